//! FAST TCP (Jin, Wei, Low 2004): once per RTT move the window toward the equilibrium
//! w = baseRTT/RTT * w + alpha, a gamma-weighted step of at most doubling. Halve on loss.
use super::{CcCtl, Ccc};

/// Segments this flow aims to keep queued, and the step weight.
pub const ALPHA: f64 = 20.0;
pub const GAMMA: f64 = 0.5;

#[derive(Default)]
pub struct Fast {
    round_end: u32,
}

impl Fast {
    /// The window after one update at window `w`.
    pub fn next(w: f64, base_rtt: f64, rtt: f64) -> f64 {
        if rtt <= 0.0 || base_rtt <= 0.0 {
            return w + 1.0;
        }
        (2.0 * w).min((1.0 - GAMMA) * w + GAMMA * (base_rtt / rtt * w + ALPHA))
    }
}

impl Ccc for Fast {
    fn name(&self) -> &'static str {
        "fast"
    }

    fn on_ack(&mut self, c: &mut CcCtl, ack: u32) {
        if ack < self.round_end {
            return; // once per round trip
        }
        self.round_end = (c.snd_max + 1).max(ack + 1);
        c.cwnd = Fast::next(c.cwnd, c.min_rtt_us, c.rtt_us).max(2.0);
    }

    fn on_loss(&mut self, c: &mut CcCtl, _l: &[(u32, u32)]) {
        if c.snd_una >= self.round_end {
            c.cwnd = (c.cwnd / 2.0).max(2.0);
            self.round_end = c.snd_max + 1;
        }
    }

    fn on_timeout(&mut self, c: &mut CcCtl) {
        c.cwnd = 2.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_to_alpha_segments_queued() {
        // a path of 100 segments' BDP: RTT = base * (w / 100) once the window exceeds it
        let (base, bdp) = (10_000.0, 100.0);
        let mut w: f64 = 10.0;
        for _ in 0..200 {
            let rtt = base * (w / bdp).max(1.0);
            w = Fast::next(w, base, rtt);
        }
        assert!((w - (bdp + ALPHA)).abs() < 0.5, "{w}");
        // without queueing it at most doubles per round
        assert_eq!(Fast::next(10.0, base, base), 20.0);
    }
}
