//! The playout buffer both jitter controls use: delivered messages (MSG FROM NET, stopped and
//! kept by key) wait for their release time and are raised again then, in release order, with
//! a tag their owner lets through.
use std::collections::BTreeMap;

use crate::composite::MicroId;
use crate::event::{Arg, Event, TimerId};
use crate::segment::Kind;
use crate::session::Cx;

/// Tag on the MSG FROM NET raisings a playout buffer makes.
pub const RELEASED: u64 = 0x9_1A70_0000;

#[derive(Default)]
pub struct Playout {
    /// (release time, arrival order) -> user message key
    queue: BTreeMap<(u64, u64), u64>,
    order: u64,
    armed: Option<(u64, TimerId)>,
}

impl Playout {
    /// Keep the message (its MSG FROM NET must be stopped by the caller) until `at`.
    pub fn hold(&mut self, cx: &mut Cx, who: MicroId, at: u64, key: u64) {
        self.order += 1;
        self.queue.insert((at, self.order), key);
        self.arm(cx, who);
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    fn arm(&mut self, cx: &mut Cx, who: MicroId) {
        let Some(&(first, _)) = self.queue.keys().next() else { return };
        if let Some((at, t)) = self.armed {
            if at <= first {
                return;
            }
            cx.cancel(t);
        }
        let t = cx.timer(who, first.saturating_sub(cx.now), 0);
        self.armed = Some((first, t));
    }

    /// The peer closed: what waits goes to the user now, since the session ends at once.
    pub fn on_segment(&mut self, cx: &mut Cx, arg: &Arg) {
        let close = arg.seg.and_then(|id| cx.seg(id)).is_some_and(|s| s.kind == Kind::Close);
        if close {
            for (_, key) in std::mem::take(&mut self.queue) {
                cx.raise(Event::MsgFromNet, Arg { msg: key, tag: RELEASED, ..Arg::default() });
            }
        }
    }

    /// The owner's timer fired: release everything due.
    pub fn fire(&mut self, cx: &mut Cx, who: MicroId) {
        self.armed = None;
        while let Some(e) = self.queue.first_entry() {
            if e.key().0 > cx.now {
                break;
            }
            let key = e.remove();
            cx.raise(Event::MsgFromNet, Arg { msg: key, tag: RELEASED, ..Arg::default() });
        }
        self.arm(cx, who);
    }
}
