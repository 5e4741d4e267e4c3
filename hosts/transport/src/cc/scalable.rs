//! Scalable TCP (Kelly 2003): +0.01 segment per ACK, cwnd x 0.875 on loss.
use super::{reno_increase, CcCtl, Ccc};

pub struct Scalable {
    ssthresh: f64,
    recover: Option<u32>,
}

impl Default for Scalable {
    fn default() -> Self {
        Scalable { ssthresh: f64::INFINITY, recover: None }
    }
}

impl Ccc for Scalable {
    fn name(&self) -> &'static str {
        "scalable"
    }

    fn on_ack(&mut self, c: &mut CcCtl, ack: u32) {
        if self.recover.is_some_and(|r| ack >= r) {
            self.recover = None;
        }
        if c.cwnd < self.ssthresh {
            reno_increase(c, self.ssthresh, 1.0);
        } else {
            c.cwnd += 0.01 * c.acked.max(1) as f64;
        }
    }

    fn on_loss(&mut self, c: &mut CcCtl, _l: &[(u32, u32)]) {
        if self.recover.is_none() {
            c.cwnd = (c.cwnd * 0.875).max(2.0);
            self.ssthresh = c.cwnd;
            self.recover = Some(c.snd_max);
        }
    }

    fn on_timeout(&mut self, c: &mut CcCtl) {
        self.ssthresh = (c.cwnd * 0.875).max(2.0);
        c.cwnd = 1.0;
        self.recover = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::*;

    #[test]
    fn increase_is_proportional_and_decrease_is_one_eighth() {
        let (mut a, mut c) = (Scalable::default(), ctl());
        a.ssthresh = 100.0;
        c.cwnd = 100.0;
        ack_round(&mut a, &mut c); // 100 acks x 0.01
        assert!((c.cwnd - 101.0).abs() < 1e-9, "{}", c.cwnd);
        lose(&mut a, &mut c);
        assert!((c.cwnd - 101.0 * 0.875).abs() < 1e-9);
    }
}
