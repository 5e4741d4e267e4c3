//! TCP Vegas (Brakmo, Peterson 1995): once per RTT compare expected and actual rate; keep
//! between alpha=2 and beta=4 segments queued; leave slow start at gamma=1. Halve on loss.
use super::{reno_increase, CcCtl, Ccc};

const ALPHA: f64 = 2.0;
const BETA: f64 = 4.0;
const GAMMA: f64 = 1.0;

pub struct Vegas {
    ssthresh: f64,
    round_end: u32,
}

impl Default for Vegas {
    fn default() -> Self {
        Vegas { ssthresh: f64::INFINITY, round_end: 0 }
    }
}

impl Vegas {
    /// Segments this flow keeps in the bottleneck queue: cwnd * (1 - baseRTT / RTT).
    pub fn queued(c: &CcCtl) -> f64 {
        if c.rtt_us <= 0.0 || c.min_rtt_us <= 0.0 {
            return 0.0;
        }
        c.cwnd * (1.0 - c.min_rtt_us / c.rtt_us)
    }
}

impl Ccc for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }

    fn on_ack(&mut self, c: &mut CcCtl, ack: u32) {
        if c.cwnd < self.ssthresh {
            if Vegas::queued(c) > GAMMA {
                self.ssthresh = c.cwnd;
            } else {
                reno_increase(c, self.ssthresh, 1.0);
            }
            return;
        }
        if ack < self.round_end {
            return; // once per round trip
        }
        self.round_end = (c.snd_max + 1).max(ack + 1); // when the next segment sent is acked
        let q = Vegas::queued(c);
        if q < ALPHA {
            c.cwnd += 1.0;
        } else if q > BETA {
            c.cwnd = (c.cwnd - 1.0).max(2.0);
        }
    }

    fn on_loss(&mut self, c: &mut CcCtl, _l: &[(u32, u32)]) {
        if c.snd_una >= self.round_end || self.ssthresh.is_infinite() {
            c.cwnd = (c.cwnd / 2.0).max(2.0);
            self.ssthresh = c.cwnd;
            self.round_end = c.snd_max;
        }
    }

    fn on_timeout(&mut self, c: &mut CcCtl) {
        self.ssthresh = (c.cwnd / 2.0).max(2.0);
        c.cwnd = 1.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::*;

    #[test]
    fn holds_queue_between_alpha_and_beta() {
        let (mut a, mut c) = (Vegas::default(), ctl());
        a.ssthresh = 2.0;
        c.cwnd = 20.0;
        c.rtt_us = 10_000.0; // no queue: grow by one per round
        ack_round(&mut a, &mut c);
        assert_eq!(c.cwnd, 21.0);
        c.rtt_us = 20_000.0; // half the window queued (10.5 > beta): shrink by one
        ack_round(&mut a, &mut c);
        assert_eq!(c.cwnd, 20.0);
        c.rtt_us = 10_000.0 / (1.0 - 3.0 / 20.0); // 3 queued: hold
        ack_round(&mut a, &mut c);
        assert_eq!(c.cwnd, 20.0);
    }
}
