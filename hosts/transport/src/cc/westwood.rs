//! TCP Westwood+ (Mascolo et al.): Reno growth; on loss the window drops to the estimated
//! bandwidth-delay product (bandwidth sampled from the ACK rate once per RTT).
use super::{reno_increase, CcCtl, Ccc};

pub struct Westwood {
    ssthresh: f64,
    /// Bandwidth estimate, segments per microsecond.
    pub bwe: f64,
    round_start: u64,
    round_acked: u32,
    recover: Option<u32>,
}

impl Default for Westwood {
    fn default() -> Self {
        Westwood { ssthresh: f64::INFINITY, bwe: 0.0, round_start: 0, round_acked: 0, recover: None }
    }
}

impl Westwood {
    fn bdp(&self, c: &CcCtl) -> f64 {
        (self.bwe * c.min_rtt_us).max(2.0)
    }
}

impl Ccc for Westwood {
    fn name(&self) -> &'static str {
        "westwood"
    }

    fn init(&mut self, c: &mut CcCtl) {
        self.round_start = c.now_us;
    }

    fn on_ack(&mut self, c: &mut CcCtl, ack: u32) {
        self.round_acked += c.acked;
        let dt = c.now_us.saturating_sub(self.round_start) as f64;
        if dt >= c.rtt_us.max(1.0) {
            let sample = self.round_acked as f64 / dt;
            self.bwe = if self.bwe == 0.0 { sample } else { 0.9 * self.bwe + 0.1 * sample };
            self.round_start = c.now_us;
            self.round_acked = 0;
        }
        if self.recover.is_some_and(|r| ack >= r) {
            self.recover = None;
        }
        reno_increase(c, self.ssthresh, 1.0);
    }

    fn on_loss(&mut self, c: &mut CcCtl, _l: &[(u32, u32)]) {
        if self.recover.is_none() {
            self.ssthresh = self.bdp(c);
            c.cwnd = c.cwnd.min(self.ssthresh);
            self.recover = Some(c.snd_max);
        }
    }

    fn on_timeout(&mut self, c: &mut CcCtl) {
        self.ssthresh = self.bdp(c);
        c.cwnd = 1.0;
        self.recover = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::*;

    #[test]
    fn loss_sets_window_to_estimated_bdp_not_half() {
        let (mut a, mut c) = (Westwood::default(), ctl());
        a.init(&mut c);
        c.cwnd = 50.0;
        a.ssthresh = 10.0;
        for _ in 0..5 {
            ack_round(&mut a, &mut c); // about cwnd segments per 10 ms rtt
        }
        let rate_per_rtt = a.bwe * c.min_rtt_us;
        assert!(rate_per_rtt > 40.0, "bwe {rate_per_rtt} segments per rtt");
        let w = c.cwnd;
        lose(&mut a, &mut c);
        assert!(c.cwnd > w / 2.0 && c.cwnd <= w, "{} of {}", c.cwnd, w);
    }
}
