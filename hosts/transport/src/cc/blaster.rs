//! A fixed-rate blaster (UDT/CCC §4.1.1's CUDPBlast): no window, one segment every
//! mss*8/rate seconds, deaf to loss. Its rate is set at any time by a rate message
//! (`cc::group`), from the application (`Session::cc_control`) or the receiver
//! (`Session::send_cc_msg`).
use super::group::parse_rate;
use super::{CcCtl, Ccc};

pub struct Blaster {
    rate_bps: f64,
}

impl Blaster {
    pub fn new(rate_bps: f64) -> Blaster {
        Blaster { rate_bps: rate_bps.max(1.0) }
    }

    /// setRate: the period follows the rate.
    pub fn set_rate(&mut self, c: &mut CcCtl, rate_bps: f64) {
        self.rate_bps = rate_bps.max(1.0);
        c.pkt_snd_period_us = c.mss as f64 * 8.0 * 1e6 / self.rate_bps;
    }
}

impl Ccc for Blaster {
    fn name(&self) -> &'static str {
        "blaster"
    }

    fn init(&mut self, c: &mut CcCtl) {
        c.cwnd = 1e9;
        let r = self.rate_bps;
        self.set_rate(c, r);
    }

    fn process_custom_msg(&mut self, c: &mut CcCtl, msg: &[u8]) {
        if let Some(bps) = parse_rate(msg) {
            self.set_rate(c, bps as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn period_matches_rate_and_loss_changes_nothing() {
        let mut b = Blaster::new(11.2e6);
        let mut c = CcCtl::new(1400);
        b.init(&mut c);
        assert!((c.pkt_snd_period_us - 1000.0).abs() < 1e-9);
        b.on_loss(&mut c, &[(0, 10)]);
        b.on_timeout(&mut c);
        assert!((c.pkt_snd_period_us - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn a_rate_message_sets_the_rate_and_anything_else_does_not() {
        let mut b = Blaster::new(11.2e6);
        let mut c = CcCtl::new(1400);
        b.init(&mut c);
        b.process_custom_msg(&mut c, &crate::cc::group::rate_msg(5_600_000));
        assert!((c.pkt_snd_period_us - 2000.0).abs() < 1e-9);
        b.process_custom_msg(&mut c, b"junk");
        assert!((c.pkt_snd_period_us - 2000.0).abs() < 1e-9);
    }
}
