//! A fixed-rate blaster: no window, one segment every mss*8/rate seconds, deaf to loss.
use super::{CcCtl, Ccc};

pub struct Blaster {
    rate_bps: f64,
}

impl Blaster {
    pub fn new(rate_bps: f64) -> Blaster {
        Blaster { rate_bps: rate_bps.max(1.0) }
    }
}

impl Ccc for Blaster {
    fn name(&self) -> &'static str {
        "blaster"
    }

    fn init(&mut self, c: &mut CcCtl) {
        c.cwnd = 1e9;
        c.pkt_snd_period_us = c.mss as f64 * 8.0 * 1e6 / self.rate_bps;
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
}
