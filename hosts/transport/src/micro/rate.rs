//! Rate-based congestion control: hosts one CCC algorithm like Windowed Congestion does, but
//! gates data segments by time alone: one leaves every sending period. The period is the
//! algorithm's `pkt_snd_period_us`; a window-only algorithm (period 0) is paced at its window
//! per smoothed round trip (srtt / cwnd), and before the first RTT sample a window's worth
//! leaves unpaced. It conflicts with Windowed Congestion rather than composing with it: both
//! would run the algorithm's callbacks for the same segments and gate them twice.
use std::collections::VecDeque;

use super::cchost::CcHost;
use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, SegId, TimerId};
use crate::session::{Config, Cx, Micro};

pub struct RateCongestion {
    host: CcHost,
    held: VecDeque<SegId>,
    /// Slot of the last paced release; the next is due one period (the current one) later,
    /// so a period that shrinks (an RTT sample, a rate message) takes effect at once.
    last_slot: f64,
    /// When the pending pacing timer fires.
    pace_at: f64,
    pace: Option<TimerId>,
    /// Segments let go before the first RTT sample.
    unpaced: u32,
}

impl RateCongestion {
    /// Panics on an unknown algorithm name: `Config` users check with `cc::by_name` first.
    pub fn new(cfg: &Config) -> RateCongestion {
        RateCongestion { host: CcHost::new(cfg), held: VecDeque::new(), last_slot: f64::NEG_INFINITY, pace_at: 0.0, pace: None, unpaced: 0 }
    }

    /// The gap between two data segments now; None: not paced yet (no RTT sample).
    pub fn period(&self, srtt_us: f64) -> Option<f64> {
        let c = &self.host.ctl;
        if c.pkt_snd_period_us > 0.0 {
            Some(c.pkt_snd_period_us)
        } else if srtt_us > 0.0 && c.cwnd.is_finite() {
            Some(srtt_us / c.cwnd.max(1.0))
        } else if c.cwnd.is_finite() {
            None
        } else {
            Some(0.0) // neither a period nor a window: the algorithm does not limit the rate
        }
    }

    fn release(&mut self, cx: &mut Cx) {
        while let Some(id) = self.held.front().copied() {
            match self.period(cx.shared.srtt_us) {
                None if (self.unpaced as f64) < self.host.ctl.cwnd.max(1.0) => self.unpaced += 1,
                None => return, // a window is out and no RTT sample yet: wait for the ACK
                Some(p) if p > 0.0 => {
                    let now = cx.now as f64;
                    let due = self.last_slot + p;
                    if now < due {
                        if self.pace.is_none() || due < self.pace_at {
                            if let Some(t) = self.pace.take() {
                                cx.cancel(t);
                            }
                            let wait = (due - now).ceil() as u64;
                            self.pace = Some(cx.timer(MicroId::RateCongestion, wait, 0));
                            self.pace_at = now + wait as f64;
                        }
                        return;
                    }
                    // one period of credit at most: idling does not bank a burst
                    self.last_slot = due.max(now - p);
                }
                Some(_) => {}
            }
            self.held.pop_front();
            cx.release(id, Barrier::Send);
        }
    }
}

impl Micro for RateCongestion {
    fn id(&self) -> MicroId {
        MicroId::RateCongestion
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[
            (Event::OpenSession, 30),
            (Event::SegmentToNet, 50),
            (Event::SegmentSent, 30),
            (Event::SegmentFromNet, 45),
            (Event::SegmentLost, 10),
            (Event::SegmentTimeout, 20),
            (Event::CloseSession, 30),
        ]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        self.host.observe(cx, cx.shared.unacked.len() as u32);
        match ev {
            Event::SegmentToNet => {
                let Some(id) = arg.seg.filter(|id| cx.is_data(*id)) else { return };
                cx.hold(id, Barrier::Send);
                self.held.push_back(id);
            }
            Event::Timer(_) if arg.tag != crate::event::LOCAL_CC => self.pace = None,
            _ => {}
        }
        self.host.on_event(ev, arg, cx);
        self.host.publish(cx);
        self.release(cx);
    }
}
