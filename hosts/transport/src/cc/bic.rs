//! BIC (Xu, Harfoush, Rhee 2004): binary search toward the window of the last loss, then
//! max probing; multiplicative decrease 0.8. Reno below 14 segments.
use super::{reno_increase, CcCtl, Ccc};

const LOW_WINDOW: f64 = 14.0;
const BETA: f64 = 0.8;
const SMAX: f64 = 32.0;
const SMIN: f64 = 0.01;

pub struct Bic {
    ssthresh: f64,
    pub w_max: f64,
    recover: Option<u32>,
}

impl Default for Bic {
    fn default() -> Self {
        Bic { ssthresh: f64::INFINITY, w_max: 0.0, recover: None }
    }
}

impl Bic {
    /// Window growth per RTT at window `w`.
    pub fn per_rtt(&self, w: f64) -> f64 {
        if w < LOW_WINDOW {
            1.0
        } else if w < self.w_max {
            ((self.w_max - w) / 2.0).clamp(SMIN, SMAX)
        } else {
            (w - self.w_max).clamp(1.0, SMAX)
        }
    }
}

impl Ccc for Bic {
    fn name(&self) -> &'static str {
        "bic"
    }

    fn on_ack(&mut self, c: &mut CcCtl, ack: u32) {
        if self.recover.is_some_and(|r| ack >= r) {
            self.recover = None;
        }
        let inc = self.per_rtt(c.cwnd);
        reno_increase(c, self.ssthresh, inc);
    }

    fn on_loss(&mut self, c: &mut CcCtl, _l: &[(u32, u32)]) {
        if self.recover.is_some() {
            return;
        }
        self.w_max = c.cwnd;
        c.cwnd = if c.cwnd < LOW_WINDOW { c.cwnd / 2.0 } else { c.cwnd * BETA }.max(2.0);
        self.ssthresh = c.cwnd;
        self.recover = Some(c.snd_max);
    }

    fn on_timeout(&mut self, c: &mut CcCtl) {
        self.w_max = c.cwnd;
        self.ssthresh = (c.cwnd * BETA).max(2.0);
        c.cwnd = 1.0;
        self.recover = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::*;

    #[test]
    fn binary_search_then_probing() {
        let (mut a, mut c) = (Bic::default(), ctl());
        c.cwnd = 100.0;
        lose(&mut a, &mut c);
        assert_eq!((a.w_max, c.cwnd), (100.0, 80.0));
        // the first step is half the distance to w_max
        assert_eq!(a.per_rtt(80.0), 10.0);
        ack_round(&mut a, &mut c);
        // the step shrinks as the window nears w_max: most of the way there, never past it
        assert!(c.cwnd > 86.0 && c.cwnd < 90.0, "{}", c.cwnd);
        assert_eq!(a.per_rtt(99.99), SMIN.max((100.0 - 99.99) / 2.0));
        assert_eq!(a.per_rtt(110.0), 10.0); // max probing grows with the distance past w_max
        assert_eq!(a.per_rtt(200.0), SMAX);
    }
}
