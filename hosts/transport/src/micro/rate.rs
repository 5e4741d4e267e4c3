//! Rate-based congestion control: hosts one CCC algorithm like Windowed Congestion does, but
//! gates data segments by time alone: one leaves every sending period. The period is the
//! algorithm's `pkt_snd_period_us`; a window-only algorithm (period 0) is paced at its window
//! per smoothed round trip (srtt / cwnd), and before the first RTT sample a window's worth
//! leaves unpaced. It conflicts with Windowed Congestion rather than composing with it: both
//! would run the algorithm's callbacks for the same segments and gate them twice.
use std::collections::VecDeque;

use crate::attr::{ACK, SEQ};
use crate::cc::{self, CcCtl, Ccc};
use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, SegId, TimerId};
use crate::segment::{Kind, Segment};
use crate::session::{Config, Cx, Micro};

pub struct RateCongestion {
    cc: Box<dyn Ccc>,
    ctl: CcCtl,
    held: VecDeque<SegId>,
    next_at: f64,
    pace: Option<TimerId>,
    last_una: u32,
    /// Segments let go before the first RTT sample.
    unpaced: u32,
}

impl RateCongestion {
    /// Panics on an unknown algorithm name: `Config` users check with `cc::by_name` first.
    pub fn new(cfg: &Config) -> RateCongestion {
        let cc = cc::by_name(&cfg.cc, cfg.cc_rate_bps).unwrap_or_else(|e| panic!("{e}"));
        RateCongestion {
            cc,
            ctl: CcCtl::new(cfg.mss),
            held: VecDeque::new(),
            next_at: 0.0,
            pace: None,
            last_una: 0,
            unpaced: 0,
        }
    }

    /// The gap between two data segments now; None: not paced yet (no RTT sample).
    pub fn period(&self, srtt_us: f64) -> Option<f64> {
        let c = &self.ctl;
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

    fn observe(&mut self, cx: &Cx) {
        let c = &mut self.ctl;
        c.now_us = cx.now;
        c.rtt_us = cx.shared.srtt_us;
        c.min_rtt_us = cx.shared.min_rtt_us;
        c.snd_una = cx.shared.snd_una;
        c.snd_max = cx.shared.snd_max;
        c.inflight = cx.shared.unacked.len() as u32;
    }

    fn apply(&mut self, cx: &mut Cx) {
        let c = &mut self.ctl;
        cx.shared.cwnd = c.cwnd;
        cx.shared.pkt_snd_period_us = c.pkt_snd_period_us;
        cx.shared.ack_interval = c.ack_interval.max(1);
        cx.shared.ack_delay_us = c.ack_period_us;
        cx.shared.rto_override_us = c.rto_us;
        for m in std::mem::take(&mut c.custom_out) {
            let mut s = Segment::new(Kind::CcMsg, cx.shared.conn);
            s.payload = m;
            cx.send_control(s);
        }
        self.release(cx);
    }

    fn release(&mut self, cx: &mut Cx) {
        while let Some(id) = self.held.front().copied() {
            match self.period(cx.shared.srtt_us) {
                None if (self.unpaced as f64) < self.ctl.cwnd.max(1.0) => self.unpaced += 1,
                None => return, // a window is out and no RTT sample yet: wait for the ACK
                Some(p) if p > 0.0 => {
                    let now = cx.now as f64;
                    if now < self.next_at {
                        if self.pace.is_none() {
                            let wait = (self.next_at - now).ceil() as u64;
                            self.pace = Some(cx.timer(MicroId::RateCongestion, wait, 0));
                        }
                        return;
                    }
                    // one period of credit at most: idling does not bank a burst
                    self.next_at = self.next_at.max(now - p) + p;
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
        self.observe(cx);
        let seq = arg.seg.and_then(|id| cx.seg(id)).and_then(|s| s.attrs.get(SEQ)).map(|q| q as u32);
        match ev {
            Event::OpenSession => self.cc.init(&mut self.ctl),
            Event::CloseSession => self.cc.close(&mut self.ctl),
            Event::SegmentToNet => {
                let Some(id) = arg.seg.filter(|id| cx.is_data(*id)) else { return };
                cx.hold(id, Barrier::Send);
                self.held.push_back(id);
            }
            Event::SegmentSent => {
                if let Some(q) = seq.filter(|_| arg.seg.is_some_and(|id| cx.is_data(id))) {
                    self.cc.on_pkt_sent(&mut self.ctl, q);
                }
            }
            Event::SegmentFromNet => {
                let Some(id) = arg.seg else { return };
                let Some(seg) = cx.seg(id) else { return };
                match (seg.kind, seg.attrs.get(ACK).is_some()) {
                    (Kind::CcMsg, _) => {
                        let m = seg.payload.clone();
                        cx.consume(id);
                        self.cc.process_custom_msg(&mut self.ctl, &m);
                    }
                    (Kind::Data, _) if seq.is_some() => {
                        self.cc.on_pkt_received(&mut self.ctl, seq.unwrap())
                    }
                    (_, true) if cx.shared.ack_advanced => {
                        self.ctl.acked = cx.shared.snd_una.wrapping_sub(self.last_una);
                        self.last_una = cx.shared.snd_una;
                        let una = cx.shared.snd_una;
                        self.cc.on_ack(&mut self.ctl, una);
                    }
                    _ => {}
                }
            }
            Event::SegmentLost => {
                let ranges = std::mem::take(&mut cx.shared.loss_ranges);
                if !ranges.is_empty() {
                    self.cc.on_loss(&mut self.ctl, &ranges);
                }
            }
            Event::SegmentTimeout => self.cc.on_timeout(&mut self.ctl),
            Event::Timer(_) => self.pace = None,
            _ => {}
        }
        self.apply(cx);
    }
}
