//! Sequenced Messages: hands messages to the user in the order they were sent, whatever order
//! their segments arrive in (segments of different messages may overtake each other when no
//! FIFO orders them). A message's number is Fixed Size's message id (FRAG); a message that
//! completes early waits for those before it. A gap waits for as long as a resend can fill it:
//! for ever with Retransmit in the composite, else `GAP_WAIT_US`, after which it is skipped.
use std::collections::BTreeMap;

use crate::attr::{FRAG, URG};
use crate::composite::MicroId;
use crate::event::{Arg, Event, TimerId};
use crate::session::{Cx, Micro};

/// How long a gap is waited for when nothing will resend it.
pub const GAP_WAIT_US: u64 = 100_000;
/// Tag on MSG FROM NET raisings made here, which this microprotocol lets through.
const PASS: u64 = 0x5E9_0000_0000;

#[derive(Default)]
pub struct SequencedMessages {
    next: u32,
    /// The message id (and urgency) of the segment Fixed Size is reassembling right now: its
    /// MSG FROM NET, if it completes a message, is raised while that segment is handled.
    current: Option<(u32, bool)>,
    /// Early messages by distance from `next`: Some(user message key), or None for an urgent
    /// one already handed over out of band.
    waiting: BTreeMap<u32, Option<u64>>,
    gap: Option<TimerId>,
}

impl SequencedMessages {
    fn pass(cx: &mut Cx, key: u64) {
        cx.raise(Event::MsgFromNet, Arg { msg: key, tag: PASS, ..Arg::default() });
    }

    /// Hand over every waiting message from `next` on without a gap.
    fn drain(&mut self, cx: &mut Cx) {
        while let Some(k) = self.waiting.remove(&self.next) {
            if let Some(key) = k {
                SequencedMessages::pass(cx, key);
            }
            self.next = self.next.wrapping_add(1);
        }
        if let Some(t) = self.gap.take() {
            cx.cancel(t);
        }
        if !self.waiting.is_empty() && !cx.composite.has(MicroId::Retransmit) {
            self.gap = Some(cx.timer(MicroId::SequencedMessages, GAP_WAIT_US, 0));
        }
    }
}

impl Micro for SequencedMessages {
    fn id(&self) -> MicroId {
        MicroId::SequencedMessages
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentReceived, 40), (Event::MsgFromNet, 50)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::SegmentReceived => {
                let seg = arg.seg.and_then(|id| cx.seg(id));
                self.current = seg.and_then(|s| {
                    s.attrs.get(FRAG).map(|f| ((f >> 32) as u32, s.attrs.get(URG).is_some()))
                });
            }
            Event::MsgFromNet if arg.tag != PASS => {
                let Some((id, urgent)) = self.current.take() else { return };
                let ahead = id.wrapping_sub(self.next);
                if ahead >= 1 << 31 || self.waiting.contains_key(&id) {
                    // before `next` or already waiting: a duplicate (a resent segment completed it again)
                    cx.stop();
                    cx.take_net_msg(arg.msg);
                    cx.stats.duplicates += 1;
                    return;
                }
                if urgent {
                    // out of band: goes on now, and its place in the order is taken
                    self.waiting.insert(id, None);
                    self.drain(cx);
                    return;
                }
                cx.stop();
                self.waiting.insert(id, Some(arg.msg));
                self.drain(cx);
            }
            Event::Timer(_) => {
                self.gap = None;
                if let Some(first) = self.waiting.keys().min_by_key(|k| k.wrapping_sub(self.next)) {
                    cx.stats.msgs_incomplete += first.wrapping_sub(self.next) as u64;
                    self.next = *first;
                    self.drain(cx);
                }
            }
            _ => {}
        }
    }
}
