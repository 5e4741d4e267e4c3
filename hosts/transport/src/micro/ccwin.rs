//! Windowed (and paced) congestion control: hosts one CCC algorithm, calls its callbacks from
//! the events, and holds each data segment's send barrier until the algorithm's window has
//! room and its sending period has elapsed.
use std::collections::{HashSet, VecDeque};

use crate::attr::{ACK, SEQ};
use crate::cc::{self, CcCtl, Ccc};
use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, SegId, TimerId};
use crate::segment::{Kind, Segment};
use crate::segtable::IdBuildHasher;
use crate::session::{Config, Cx, Micro};

pub struct WindowedCongestion {
    cc: Box<dyn Ccc>,
    ctl: CcCtl,
    held: VecDeque<SegId>,
    inflight: HashSet<SegId, IdBuildHasher>,
    next_at: f64,
    pace: Option<TimerId>,
    last_una: u32,
}

impl WindowedCongestion {
    /// Panics on an unknown algorithm name: `Config` users check with `cc::by_name` first.
    pub fn new(cfg: &Config) -> WindowedCongestion {
        let cc = cc::by_name(&cfg.cc, cfg.cc_rate_bps).unwrap_or_else(|e| panic!("{e}"));
        WindowedCongestion {
            cc,
            ctl: CcCtl::new(cfg.mss),
            held: VecDeque::new(),
            inflight: HashSet::default(),
            next_at: 0.0,
            pace: None,
            last_una: 0,
        }
    }

    fn observe(&mut self, cx: &Cx) {
        let c = &mut self.ctl;
        c.now_us = cx.now;
        c.rtt_us = cx.shared.srtt_us;
        c.min_rtt_us = cx.shared.min_rtt_us;
        c.snd_una = cx.shared.snd_una;
        c.snd_max = cx.shared.snd_max;
        c.inflight = self.inflight.len() as u32;
    }

    /// The algorithm's controls take effect.
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
            if self.inflight.len() as f64 >= self.ctl.cwnd.max(1.0).floor() {
                return;
            }
            let period = self.ctl.pkt_snd_period_us;
            if period > 0.0 {
                let now = cx.now as f64;
                if now < self.next_at {
                    if self.pace.is_none() {
                        let wait = (self.next_at - now).ceil() as u64;
                        self.pace = Some(cx.timer(MicroId::WindowedCongestion, wait, 0));
                    }
                    return;
                }
                // at most one period of credit: a late wake-up keeps the rate, idling does not
                // bank a burst
                self.next_at = self.next_at.max(now - period) + period;
            }
            self.held.pop_front();
            self.inflight.insert(id);
            cx.release(id, Barrier::Send);
        }
    }
}

impl Micro for WindowedCongestion {
    fn id(&self) -> MicroId {
        MicroId::WindowedCongestion
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[
            (Event::OpenSession, 30),
            (Event::SegmentToNet, 50),
            (Event::SegmentSent, 30),
            (Event::SegmentDone, 10),
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
            Event::SegmentDone => {
                if let Some(id) = arg.seg {
                    self.inflight.remove(&id);
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
                // a lost segment has left the network: it no longer fills the window
                if let Some(id) = arg.seg {
                    self.inflight.remove(&id);
                }
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
