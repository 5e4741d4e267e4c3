//! What Windowed and Rate-based congestion control share: hosting one CCC algorithm. The
//! algorithm's callbacks are called from the session's events, and its controls (window,
//! sending period, ACK timer and interval, RTO, custom messages) are written back to the
//! session. How data segments are then gated (by window or by time) is each host's own.
use crate::attr::{ACK, SEQ};
use crate::event::LOCAL_CC;
use crate::cc::{self, CcCtl, Ccc};
use crate::event::{Arg, Event};
use crate::segment::{Kind, Segment};
use crate::session::{Config, Cx};

pub struct CcHost {
    pub cc: Box<dyn Ccc>,
    pub ctl: CcCtl,
    last_una: u32,
}

impl CcHost {
    /// Panics on an unknown algorithm name: `Config` users check with `cc::by_name` first.
    pub fn new(cfg: &Config) -> CcHost {
        let cc = cc::by_name(&cfg.cc, cfg.cc_rate_bps).unwrap_or_else(|e| panic!("{e}"));
        CcHost { cc, ctl: CcCtl::new(cfg.mss), last_una: 0 }
    }

    /// What the algorithm may read during the next callback; `inflight` as the host counts it.
    pub fn observe(&mut self, cx: &Cx, inflight: u32) {
        let c = &mut self.ctl;
        c.now_us = cx.now;
        c.rtt_us = cx.shared.srtt_us;
        c.min_rtt_us = cx.shared.min_rtt_us;
        c.latest_rtt_us = cx.shared.latest_rtt_us;
        c.snd_una = cx.shared.snd_una;
        c.snd_max = cx.shared.snd_max;
        c.inflight = inflight;
    }

    /// The algorithm's callbacks for one event (init, close, onPktSent, processCustomMsg,
    /// onPktReceived, onACK, onLoss with the lost ranges, onTimeout).
    pub fn on_event(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        let seq = arg.seg.and_then(|id| cx.seg(id)).and_then(|s| s.attrs.get(SEQ)).map(|q| q as u32);
        cx.shared.perf.start(cx.now);
        match ev {
            // the application's own calls on its algorithm (`Session::cc_control`), the
            // counterpart of UDT/CCC's getsockopt pointer to the instance
            Event::Timer(_) if arg.tag == LOCAL_CC => {
                for m in std::mem::take(&mut cx.shared.cc_local) {
                    self.cc.process_custom_msg(&mut self.ctl, &m);
                }
            }
            Event::OpenSession => self.cc.init(&mut self.ctl),
            Event::CloseSession => self.cc.close(&mut self.ctl),
            Event::SegmentSent => {
                if let Some(q) = seq.filter(|_| arg.seg.is_some_and(|id| cx.is_data(id))) {
                    let len = arg.seg.and_then(|id| cx.seg(id)).map_or(0, |s| s.payload.len());
                    cx.shared.perf.now.pkts_sent += 1;
                    cx.shared.perf.now.bytes_sent += len as u64;
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
                        let len = seg.payload.len() as u64;
                        cx.shared.perf.now.pkts_received += 1;
                        cx.shared.perf.now.bytes_received += len;
                        self.cc.on_pkt_received(&mut self.ctl, seq.unwrap())
                    }
                    (_, true) if cx.shared.ack_advanced => {
                        self.ctl.acked = cx.shared.snd_una.wrapping_sub(self.last_una);
                        self.last_una = cx.shared.snd_una;
                        let una = cx.shared.snd_una;
                        cx.shared.perf.now.acks += 1;
                        self.cc.on_ack(&mut self.ctl, una);
                    }
                    _ => {}
                }
            }
            Event::SegmentLost => {
                let ranges = std::mem::take(&mut cx.shared.loss_ranges);
                if !ranges.is_empty() {
                    let n: u64 = ranges.iter().map(|&(a, b)| b.wrapping_sub(a) as u64 + 1).sum();
                    cx.shared.perf.now.pkts_lost += n;
                    cx.shared.perf.now.naks += 1;
                    self.cc.on_loss(&mut self.ctl, &ranges);
                }
            }
            Event::SegmentTimeout => {
                cx.shared.perf.now.timeouts += 1;
                self.cc.on_timeout(&mut self.ctl)
            }
            _ => {}
        }
    }

    /// The algorithm's controls take effect in the session.
    pub fn publish(&mut self, cx: &mut Cx) {
        let c = &mut self.ctl;
        cx.shared.cwnd = c.cwnd;
        cx.shared.pkt_snd_period_us = c.pkt_snd_period_us;
        cx.shared.ack_interval = c.ack_interval.max(1);
        cx.shared.ack_delay_us = c.ack_period_us;
        cx.shared.rto_override_us = c.rto_us;
        cx.shared.rto_policy = c.rto_policy;
        cx.shared.rack.policy = c.rack;
        for m in std::mem::take(&mut c.custom_out) {
            let mut s = Segment::new(Kind::CcMsg, cx.shared.conn);
            s.payload = m.into();
            cx.send_control(s);
        }
    }
}
