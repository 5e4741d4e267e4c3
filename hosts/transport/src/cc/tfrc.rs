//! TCP-friendly rate control (CTP §III-D's "TCP-Friendly Rate Control" policy, after Floyd et
//! al. [18] / RFC 5348): the sending rate is the TCP response equation's for the measured loss
//! event rate p and RTT R,
//!   X = s / (R·sqrt(2p/3) + 4R·3·sqrt(3p/8)·p·(1 + 32p²)),
//! with p from the weighted average of the last eight loss intervals (weights 1,1,1,1,.8,.6,.4,.2)
//! and at most one loss event per RTT. Unlike RFC 5348 the sender, not the receiver, keeps the
//! intervals (it sees every loss through onLoss); before the first loss the rate doubles per RTT.
use super::{CcCtl, Ccc};

const WEIGHTS: [f64; 8] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];

#[derive(Default)]
pub struct Tfrc {
    /// Packets sent in each closed loss interval, newest first.
    intervals: Vec<f64>,
    /// Packets sent since the last loss event.
    open: f64,
    last_event_us: Option<u64>,
    /// Bytes per second.
    rate: f64,
    last_double_us: u64,
}

/// The response equation: bytes per second for segment size `s`, RTT `r_s` seconds, loss event
/// rate `p`.
pub fn response(s: f64, r_s: f64, p: f64) -> f64 {
    let t_rto = 4.0 * r_s;
    s / (r_s * (2.0 * p / 3.0).sqrt() + t_rto * 3.0 * (3.0 * p / 8.0).sqrt() * p * (1.0 + 32.0 * p * p))
}

impl Tfrc {
    /// The loss event rate from the intervals (the open one counts when it lowers p).
    pub fn loss_event_rate(&self) -> Option<f64> {
        if self.intervals.is_empty() {
            return None;
        }
        let mean = |xs: &[f64]| {
            let w: f64 = WEIGHTS.iter().take(xs.len()).sum();
            xs.iter().zip(WEIGHTS).map(|(x, w)| x * w).sum::<f64>() / w
        };
        let closed = mean(&self.intervals[..self.intervals.len().min(8)]);
        let mut with_open = vec![self.open];
        with_open.extend(self.intervals.iter().take(7));
        Some(1.0 / closed.max(mean(&with_open)).max(1.0))
    }

    fn set_period(&self, c: &mut CcCtl) {
        c.pkt_snd_period_us = c.mss as f64 / self.rate.max(1.0) * 1e6;
    }
}

impl Ccc for Tfrc {
    fn name(&self) -> &'static str {
        "tfrc"
    }

    fn init(&mut self, c: &mut CcCtl) {
        c.cwnd = 1e9; // rate, not window, limits it
        self.rate = c.mss as f64 * 4.0 / 0.1; // four segments per 100 ms until an RTT is known
        self.set_period(c);
    }

    fn on_pkt_sent(&mut self, _c: &mut CcCtl, _seq: u32) {
        self.open += 1.0;
    }

    fn on_ack(&mut self, c: &mut CcCtl, _ack: u32) {
        if c.rtt_us <= 0.0 {
            return;
        }
        let r = c.rtt_us / 1e6;
        // RFC 5348 §4.2's initial rate, W_init/R: four segments (at most 4380 bytes) per RTT
        // from the first RTT sample on, so an application-limited flow is not paced. R is the
        // smallest RTT seen here: a sample taken while paced would otherwise slow the start.
        let s = c.mss as f64;
        let w_init = (4.0 * s).min((2.0 * s).max(4380.0));
        let r0 = if c.min_rtt_us > 0.0 { c.min_rtt_us.min(c.rtt_us) / 1e6 } else { r };
        match self.loss_event_rate() {
            None if self.rate < w_init / r0 => {
                self.rate = w_init / r0;
                self.last_double_us = c.now_us;
            }
            None if c.now_us >= self.last_double_us + c.rtt_us as u64 => {
                self.rate *= 2.0;
                self.last_double_us = c.now_us;
            }
            None => {}
            Some(p) => self.rate = response(c.mss as f64, r, p),
        }
        self.set_period(c);
    }

    fn on_loss(&mut self, c: &mut CcCtl, _losses: &[(u32, u32)]) {
        // losses within one RTT of the event that opened the interval are the same event
        if self.last_event_us.is_some_and(|t| c.now_us < t + c.rtt_us.max(1.0) as u64) {
            return;
        }
        self.last_event_us = Some(c.now_us);
        self.intervals.insert(0, self.open.max(1.0));
        self.intervals.truncate(8);
        self.open = 0.0;
        if let Some(p) = self.loss_event_rate() {
            let r = (c.rtt_us / 1e6).max(1e-4);
            self.rate = response(c.mss as f64, r, p).min(self.rate);
        }
        self.set_period(c);
    }

    fn on_timeout(&mut self, c: &mut CcCtl) {
        // no feedback for an RTO: halve, as RFC 5348's no-feedback timer does
        self.rate = (self.rate / 2.0).max(c.mss as f64 / 64.0);
        self.set_period(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::ctl;

    #[test]
    fn the_equation_at_one_percent_and_100_ms() {
        // s/(R√(2p/3) + 12R√(3p/8)·p·(1+32p²)) with s=1400, R=0.1, p=0.01: ≈ 157 kB/s
        let x = response(1400.0, 0.1, 0.01);
        assert!((x - 157_270.0).abs() < 300.0, "{x}");
        assert!(response(1400.0, 0.1, 0.04) < x / 2.0);
    }

    #[test]
    fn steady_loss_gives_the_equations_rate() {
        let mut a = Tfrc::default();
        let mut c = ctl(); // RTT 10 ms
        a.init(&mut c);
        // one loss every 100 packets, spaced more than an RTT apart, for twenty intervals
        for _ in 0..20 {
            for _ in 0..100 {
                a.on_pkt_sent(&mut c, 0);
                c.now_us += 1_000;
                a.on_ack(&mut c, 0);
            }
            a.on_loss(&mut c, &[(0, 0)]);
        }
        let p = a.loss_event_rate().unwrap();
        assert!((p - 0.01).abs() < 1e-9, "{p}");
        let want = response(1400.0, 0.01, 0.01);
        let period = 1400.0 / want * 1e6;
        assert!((c.pkt_snd_period_us / period - 1.0).abs() < 0.02, "{} vs {period}", c.pkt_snd_period_us);
    }

    #[test]
    fn losses_within_an_rtt_are_one_event_and_no_loss_doubles_per_rtt() {
        let mut a = Tfrc::default();
        let mut c = ctl();
        a.init(&mut c);
        // first RTT sample: W_init/R = 4380 bytes per 10 ms
        c.now_us += 10_001;
        a.on_ack(&mut c, 0);
        let p0 = 1400.0 / (4380.0 / 0.01) * 1e6;
        assert!((c.pkt_snd_period_us - p0).abs() < 1e-6, "{} vs {p0}", c.pkt_snd_period_us);
        for _ in 0..2 {
            c.now_us += 10_001;
            a.on_ack(&mut c, 0);
        }
        assert!((c.pkt_snd_period_us - p0 / 4.0).abs() < 1e-6, "{} vs {}", c.pkt_snd_period_us, p0 / 4.0);
        for _ in 0..50 {
            a.on_pkt_sent(&mut c, 0);
        }
        a.on_loss(&mut c, &[(1, 1)]);
        c.now_us += 5_000;
        a.on_loss(&mut c, &[(2, 2)]);
        assert_eq!(a.intervals, vec![50.0]);
    }
}
