//! Retransmit: resends a segment declared lost, and keeps one retransmission timer on the
//! oldest unacknowledged segment; when it fires that segment times out (SEGMENT TIMEOUT) and
//! is resent, and the session enters recovery so partial ACKs resend the rest. With Windowed
//! Congestion a segment declared lost is queued (`Shared::rtx_pending`) and resent when its
//! window has room, ahead of new data; the timed-out segment goes at once.
use crate::attr::ACK;
use crate::composite::MicroId;
use crate::event::{Arg, Event, TimerId};
use crate::session::{Cx, Micro};

#[derive(Default)]
pub struct Retransmit {
    timer: Option<TimerId>,
}

impl Retransmit {
    fn arm(&mut self, cx: &mut Cx) {
        if let Some(t) = self.timer.take() {
            cx.cancel(t);
        }
        if !cx.shared.unacked.is_empty() {
            let rto = cx.shared.rto();
            self.timer = Some(cx.timer(MicroId::Retransmit, rto, 0));
        }
    }
}

impl Retransmit {
    fn resends_oldest(&self, arg: &Arg, cx: &Cx) -> bool {
        let Some(id) = arg.seg else { return false };
        // with RACK only (ctcp): the CTP tables' composites keep RFC 6298's timer as it was
        cx.shared.rack.policy.is_some() && cx.shared.unacked.first_key_value().is_some_and(|(_, i)| *i == id)
    }
}

impl Micro for Retransmit {
    fn id(&self) -> MicroId {
        MicroId::Retransmit
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[
            (Event::SegmentSent, 20),
            (Event::SegmentFromNet, 40),
            (Event::SegmentLost, 20),
            (Event::SegmentTimeout, 90),
        ]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::SegmentSent if self.timer.is_none() => self.arm(cx),
            // the oldest segment resent (a loss RACK found in its retransmission): its timer
            // starts again from this send, as Linux's does when it resends the head (RFC 6298
            // §5.1 leaves it running); otherwise the RTO armed for the first retransmission
            // fires while the second is on its way (issue #23)
            Event::SegmentSent if self.resends_oldest(arg, cx) => self.arm(cx),
            Event::SegmentFromNet => {
                let acks = arg.seg.and_then(|id| cx.seg(id)).is_some_and(|s| s.attrs.get(ACK).is_some());
                if acks && cx.shared.ack_advanced {
                    self.arm(cx);
                }
            }
            Event::SegmentLost => {
                if let Some(id) = arg.seg.filter(|id| cx.seg(*id).is_some()) {
                    if cx.composite.has(MicroId::WindowedCongestion) {
                        // resent when the window has room, as RFC 6675 §5 counts
                        // retransmissions in the pipe: all at once, hundreds of holes' worth
                        // overflowed the queue that had just dropped them (issue #23)
                        cx.shared.rtx_pending.push_back(id);
                    } else {
                        cx.stats.retransmits += 1;
                        cx.raise(Event::SendSegment, Arg::seg(id));
                    }
                }
            }
            Event::SegmentTimeout => self.arm(cx), // after the RTO has been backed off
            Event::Timer(_) => {
                self.timer = None;
                let Some((q, id)) = cx.shared.unacked.first_key_value().map(|(q, i)| (*q, *i)) else {
                    return;
                };
                cx.shared.rtx_audit.declared(q, super::rtxaudit::Cause::Timeout);
                cx.stats.timeouts += 1;
                cx.stats.retransmits += 1;
                cx.shared.in_recovery = true;
                cx.shared.recover = cx.shared.snd_max;
                cx.raise(Event::SegmentTimeout, Arg::seg(id));
                cx.raise(Event::SendSegment, Arg::seg(id));
            }
            _ => {}
        }
    }
}
