//! NewReno (RFC 6582): slow start, additive increase, halve once per loss window.
use super::{reno_increase, CcCtl, Ccc};

pub struct NewReno {
    pub ssthresh: f64,
    recover: Option<u32>,
}

impl Default for NewReno {
    fn default() -> Self {
        NewReno { ssthresh: f64::INFINITY, recover: None }
    }
}

impl Ccc for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    fn on_ack(&mut self, c: &mut CcCtl, ack: u32) {
        match self.recover {
            Some(r) if ack < r => {} // partial ack: stay in recovery, window unchanged
            Some(_) => {
                self.recover = None;
                c.cwnd = self.ssthresh;
            }
            None => reno_increase(c, self.ssthresh, 1.0),
        }
    }

    fn on_loss(&mut self, c: &mut CcCtl, _losses: &[(u32, u32)]) {
        if self.recover.is_none() {
            self.ssthresh = (c.cwnd / 2.0).max(2.0);
            c.cwnd = self.ssthresh;
            self.recover = Some(c.snd_max);
        }
    }

    fn on_timeout(&mut self, c: &mut CcCtl) {
        self.ssthresh = (c.cwnd / 2.0).max(2.0);
        c.cwnd = 1.0;
        self.recover = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::*;

    #[test]
    fn slow_start_doubles_then_linear_then_halves_and_timeout_resets() {
        let (mut a, mut c) = (NewReno::default(), ctl());
        ack_round(&mut a, &mut c);
        assert_eq!(c.cwnd, 4.0);
        ack_round(&mut a, &mut c);
        assert_eq!(c.cwnd, 8.0);
        a.ssthresh = 8.0;
        ack_round(&mut a, &mut c);
        assert!((c.cwnd - 9.0).abs() < 0.1, "{}", c.cwnd);
        lose(&mut a, &mut c);
        assert!((c.cwnd - 4.5).abs() < 0.1, "{}", c.cwnd);
        let w = c.cwnd;
        lose(&mut a, &mut c); // same loss window: no second halving
        assert_eq!(c.cwnd, w);
        a.on_timeout(&mut c);
        assert_eq!(c.cwnd, 1.0);
        assert!((a.ssthresh - 2.25).abs() < 0.1);
    }
}
