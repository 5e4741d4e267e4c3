//! Timestamp jitter control. The sender stamps each segment with its clock when the user
//! handed the message in (JTS); the receiver hands each message over at its send time plus the
//! smallest transit seen so far plus the playout delay (`Config::playout_us`), so the user sees
//! the sender's timing again. A message later than its playout time is dropped (`stats.late`):
//! for audio and video a late frame is worth nothing, which is why this conflicts with
//! Reliable FIFO.
use crate::attr::JTS;
use crate::composite::MicroId;
use crate::event::{Arg, Event};
use crate::session::{Cx, Micro};

use super::playout::{Playout, RELEASED};

#[derive(Default)]
pub struct TimestampJitter {
    /// JTS of the segment Fixed Size (or Coalesce) is handling: the MSG FROM NETs it completes
    /// are raised while it does.
    current: Option<u32>,
    /// Smallest (arrival - send stamp) seen, modulo 2^32: the transit plus the clocks' offset.
    base: Option<u32>,
    playout: Playout,
}

impl Micro for TimestampJitter {
    fn id(&self) -> MicroId {
        MicroId::TimestampJitter
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[
            (Event::SegmentFromUser, 6),
            (Event::SegmentReceived, 40),
            (Event::MsgFromNet, 60),
            (Event::SegmentFromNet, 90),
        ]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::SegmentFromUser => {
                let now = cx.now as u32;
                if let Some(s) = arg.seg.and_then(|id| cx.seg_mut(id)) {
                    s.attrs.set(JTS, now as u64);
                }
            }
            Event::SegmentReceived => {
                self.current = arg.seg.and_then(|id| cx.seg(id)).and_then(|s| s.attrs.get(JTS)).map(|t| t as u32);
            }
            Event::MsgFromNet if arg.tag != RELEASED => {
                let Some(sent) = self.current else { return };
                let transit = (cx.now as u32).wrapping_sub(sent);
                let base = *self.base.get_or_insert(transit);
                // wrapping comparison: a smaller transit than the base is a faster path
                if (transit.wrapping_sub(base) as i32) < 0 {
                    self.base = Some(transit);
                }
                let late = transit.wrapping_sub(self.base.unwrap()) as u64;
                cx.stop();
                if late > cx.cfg.playout_us {
                    cx.take_net_msg(arg.msg);
                    cx.stats.late += 1;
                    return;
                }
                let at = cx.now + cx.cfg.playout_us - late;
                self.playout.hold(cx, MicroId::TimestampJitter, at, arg.msg);
            }
            Event::SegmentFromNet => self.playout.on_segment(cx, arg),
            Event::Timer(_) => self.playout.fire(cx, MicroId::TimestampJitter),
            _ => {}
        }
    }
}
