//! Rate-based congestion control: hosts one CCC algorithm like Windowed Congestion does, but
//! gates data segments by time alone: one leaves every sending period. The period is the
//! algorithm's `pkt_snd_period_us`; a window-only algorithm (period 0) is paced at its window
//! per smoothed round trip (srtt / cwnd), and before the first RTT sample a window's worth
//! leaves unpaced. It conflicts with Windowed Congestion rather than composing with it: both
//! would run the algorithm's callbacks for the same segments and gate them twice.
use std::collections::VecDeque;

use super::cchost::CcHost;
use super::pacer::Pacer;
use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, SegId};
use crate::session::{Config, Cx, Micro};

pub struct RateCongestion {
    host: CcHost,
    held: VecDeque<SegId>,
    pacer: Pacer,
    /// Segments let go before the first RTT sample.
    unpaced: u32,
}

impl RateCongestion {
    /// Panics on an unknown algorithm name: `Config` users check with `cc::by_name` first.
    pub fn new(cfg: &Config) -> RateCongestion {
        RateCongestion { host: CcHost::new(cfg), held: VecDeque::new(), pacer: Pacer::new(MicroId::RateCongestion), unpaced: 0 }
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
        if !self.release_paced(cx) {
            self.pacer.stopped();
        }
    }

    /// `release`'s loop; false when it stopped for anything but the pacing period.
    fn release_paced(&mut self, cx: &mut Cx) -> bool {
        while let Some(id) = self.held.front().copied() {
            match self.period(cx.shared.srtt_us) {
                None if (self.unpaced as f64) < self.host.ctl.cwnd.max(1.0) => self.unpaced += 1,
                None => return false, // a window is out and no RTT sample yet: wait for the ACK
                Some(p) if p > 0.0 => {
                    if !self.pacer.admit(p, cx) {
                        return true;
                    }
                }
                Some(_) => {}
            }
            self.held.pop_front();
            cx.release(id, Barrier::Send);
        }
        false
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
            Event::Timer(_) if arg.tag != crate::event::LOCAL_CC => self.pacer.fired(),
            _ => {}
        }
        self.host.on_event(ev, arg, cx);
        self.host.publish(cx);
        self.release(cx);
    }
}
