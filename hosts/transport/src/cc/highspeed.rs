//! HighSpeed TCP (RFC 3649): a(w) and b(w) from the RFC's formulas, Reno below 38 segments.
use super::{reno_increase, CcCtl, Ccc};

const LOW_W: f64 = 38.0;
const HIGH_W: f64 = 83_000.0;
const HIGH_B: f64 = 0.1;

pub struct HighSpeed {
    ssthresh: f64,
    recover: Option<u32>,
}

impl Default for HighSpeed {
    fn default() -> Self {
        HighSpeed { ssthresh: f64::INFINITY, recover: None }
    }
}

/// Decrease factor b(w).
pub fn b(w: f64) -> f64 {
    if w <= LOW_W {
        return 0.5;
    }
    (HIGH_B - 0.5) * (w.ln() - LOW_W.ln()) / (HIGH_W.ln() - LOW_W.ln()) + 0.5
}

/// Increase a(w) in segments per RTT, from p(w) = 0.078 / w^1.2.
pub fn a(w: f64) -> f64 {
    if w <= LOW_W {
        return 1.0;
    }
    let p = 0.078 / w.powf(1.2);
    w * w * p * 2.0 * b(w) / (2.0 - b(w))
}

impl Ccc for HighSpeed {
    fn name(&self) -> &'static str {
        "highspeed"
    }

    fn on_ack(&mut self, c: &mut CcCtl, ack: u32) {
        if self.recover.is_some_and(|r| ack >= r) {
            self.recover = None;
        }
        let inc = a(c.cwnd);
        reno_increase(c, self.ssthresh, inc);
    }

    fn on_loss(&mut self, c: &mut CcCtl, _l: &[(u32, u32)]) {
        if self.recover.is_none() {
            c.cwnd = (c.cwnd * (1.0 - b(c.cwnd))).max(2.0);
            self.ssthresh = c.cwnd;
            self.recover = Some(c.snd_max);
        }
    }

    fn on_timeout(&mut self, c: &mut CcCtl) {
        self.ssthresh = (c.cwnd * (1.0 - b(c.cwnd))).max(2.0);
        c.cwnd = 1.0;
        self.recover = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_rfc3649_table() {
        // RFC 3649 section 5 table: w=38: a=1 b=0.5; w=1058: a~8 b~0.33; w=83000: a~72 b=0.1
        assert_eq!((a(38.0), b(38.0)), (1.0, 0.5));
        assert!((a(1058.0) - 8.0).abs() < 0.6 && (b(1058.0) - 0.33).abs() < 0.01);
        assert!((a(83_000.0) - 72.0).abs() < 2.0 && (b(83_000.0) - 0.1).abs() < 1e-9);
    }

    #[test]
    fn loss_at_large_window_cuts_less_than_half() {
        let mut h = HighSpeed::default();
        let mut c = crate::cc::testkit::ctl();
        c.cwnd = 1058.0;
        crate::cc::testkit::lose(&mut h, &mut c);
        assert!((c.cwnd - 1058.0 * (1.0 - b(1058.0))).abs() < 1e-6 && c.cwnd > 600.0);
    }
}
