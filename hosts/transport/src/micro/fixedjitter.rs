//! Fixed-Rate jitter control. The sender keeps a running mean of the gap between the messages
//! the user hands it and puts it on every segment (JGAP); the receiver plays messages out on a
//! clock of that period: the first after the playout delay (`Config::playout_us`), each next
//! one a gap after the one before (at once if it arrives after its slot while others still
//! wait). A message that finds the buffer empty and its slot passed restarts the clock after
//! the playout delay (rebuffering).
use crate::attr::JGAP;
use crate::composite::MicroId;
use crate::event::{Arg, Event};
use crate::session::{Cx, Micro};

use super::playout::{Playout, RELEASED};

#[derive(Default)]
pub struct FixedRateJitter {
    // sender
    last_msg_us: Option<u64>,
    gap_us: f64,
    // receiver
    current: Option<u32>,
    last_release: Option<u64>,
    playout: Playout,
}

impl Micro for FixedRateJitter {
    fn id(&self) -> MicroId {
        MicroId::FixedRateJitter
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[
            (Event::MsgFromUser, 45),
            (Event::SegmentFromUser, 6),
            (Event::SegmentReceived, 40),
            (Event::MsgFromNet, 60),
            (Event::SegmentFromNet, 90),
        ]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::MsgFromUser => {
                if let Some(last) = self.last_msg_us {
                    let gap = cx.now.saturating_sub(last) as f64;
                    self.gap_us = if self.gap_us == 0.0 { gap } else { 0.875 * self.gap_us + 0.125 * gap };
                }
                self.last_msg_us = Some(cx.now);
            }
            Event::SegmentFromUser => {
                let gap = self.gap_us.round().min(u32::MAX as f64) as u64;
                if let Some(s) = arg.seg.and_then(|id| cx.seg_mut(id)) {
                    s.attrs.set(JGAP, gap);
                }
            }
            Event::SegmentReceived => {
                self.current = arg.seg.and_then(|id| cx.seg(id)).and_then(|s| s.attrs.get(JGAP)).map(|g| g as u32);
            }
            Event::MsgFromNet if arg.tag != RELEASED => {
                let Some(gap) = self.current else { return };
                let now = cx.now;
                let at = match self.last_release {
                    Some(last) if !self.playout.is_empty() || last + gap as u64 >= now => {
                        (last + gap as u64).max(now)
                    }
                    _ => now + cx.cfg.playout_us, // first message, or the buffer ran dry: rebuffer
                };
                self.last_release = Some(at);
                cx.stop();
                self.playout.hold(cx, MicroId::FixedRateJitter, at, arg.msg);
            }
            Event::SegmentFromNet => self.playout.on_segment(cx, arg),
            Event::Timer(_) => self.playout.fire(cx, MicroId::FixedRateJitter),
            _ => {}
        }
    }
}
