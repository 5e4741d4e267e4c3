//! UDT's native rate control (DAIMD): every SYN = 10 ms raise the sending rate by an amount
//! set by the spare capacity's order of magnitude; on a loss beyond the last decrease, slow
//! down by 1/9 (period x 1.125) and a few random further times within the same congestion
//! epoch. UDT estimates capacity with packet pairs at the receiver; here the capacity is the
//! highest delivery rate the ACKs showed, which underestimates it until the link is filled.
use super::{CcCtl, Ccc};

const SYN_US: f64 = 10_000.0;
const MAX_CWND: f64 = 8192.0;

pub struct Daimd {
    slow_start: bool,
    loss: bool,
    last_rc: u64,
    last_ack: u32,
    last_dec_period: f64,
    last_dec_seq: Option<u32>,
    nak_count: u32,
    dec_count: u32,
    avg_nak: f64,
    dec_random: u32,
    /// Delivery rate over the last SYN and the highest seen, segments per second.
    pub recv_rate: f64,
    pub capacity: f64,
    rng: u32,
}

impl Default for Daimd {
    fn default() -> Self {
        Daimd {
            slow_start: true,
            loss: false,
            last_rc: 0,
            last_ack: 0,
            last_dec_period: 1.0,
            last_dec_seq: None,
            nak_count: 0,
            dec_count: 0,
            avg_nak: 1.0,
            dec_random: 1,
            recv_rate: 0.0,
            capacity: 0.0,
            rng: 0x2545_f491,
        }
    }
}

impl Daimd {
    /// Rate increase per SYN in segments, from the spare capacity (segments per second).
    pub fn increase(spare: f64, mss: usize) -> f64 {
        let min = 1.0 / mss as f64;
        if spare <= 0.0 {
            return min;
        }
        (10f64.powf((spare * mss as f64 * 8.0).log10().ceil()) * 0.0000015 / mss as f64).max(min)
    }

    pub fn slow_start(&self) -> bool {
        self.slow_start
    }
}

impl Ccc for Daimd {
    fn name(&self) -> &'static str {
        "daimd"
    }

    fn init(&mut self, c: &mut CcCtl) {
        c.cwnd = 16.0;
        c.pkt_snd_period_us = 1.0;
        c.ack_period_us = SYN_US as u64;
        self.last_rc = c.now_us;
        self.last_ack = c.snd_una;
    }

    fn on_ack(&mut self, c: &mut CcCtl, ack: u32) {
        let dt = c.now_us.saturating_sub(self.last_rc) as f64;
        if dt < SYN_US {
            return;
        }
        self.recv_rate = ack.wrapping_sub(self.last_ack) as f64 * 1e6 / dt;
        self.capacity = self.capacity.max(self.recv_rate);
        self.last_rc = c.now_us;
        if self.slow_start {
            c.cwnd += ack.wrapping_sub(self.last_ack) as f64;
            self.last_ack = ack;
            if c.cwnd > MAX_CWND {
                self.slow_start = false;
                c.pkt_snd_period_us = 1e6 / self.recv_rate.max(1.0);
            }
            return;
        }
        self.last_ack = ack;
        c.cwnd = self.recv_rate / 1e6 * (c.rtt_us + SYN_US) + 16.0;
        if self.loss {
            self.loss = false;
            return;
        }
        let mut spare = self.capacity - 1e6 / c.pkt_snd_period_us;
        if c.pkt_snd_period_us > self.last_dec_period && self.capacity / 9.0 < spare {
            spare = self.capacity / 9.0;
        }
        let inc = Daimd::increase(spare, c.mss);
        c.pkt_snd_period_us =
            c.pkt_snd_period_us * SYN_US / (c.pkt_snd_period_us * inc + SYN_US);
    }

    fn on_loss(&mut self, c: &mut CcCtl, losses: &[(u32, u32)]) {
        let first = losses.first().map_or(c.snd_una, |r| r.0);
        if self.slow_start {
            self.slow_start = false;
            c.pkt_snd_period_us = if self.recv_rate > 0.0 {
                1e6 / self.recv_rate
            } else {
                (c.rtt_us + SYN_US) / c.cwnd
            };
        }
        self.loss = true;
        if self.last_dec_seq.is_none_or(|s| first > s) {
            self.last_dec_period = c.pkt_snd_period_us;
            c.pkt_snd_period_us *= 1.125;
            self.avg_nak = (self.avg_nak * 0.875 + self.nak_count as f64 * 0.125).ceil();
            self.nak_count = 1;
            self.dec_count = 1;
            self.last_dec_seq = Some(c.snd_max);
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 17;
            self.rng ^= self.rng << 5;
            self.dec_random = ((self.avg_nak * (self.rng % 1000) as f64 / 1000.0).ceil() as u32).max(1);
        } else {
            self.nak_count += 1;
            if self.dec_count < 5 && self.nak_count.is_multiple_of(self.dec_random) {
                self.dec_count += 1;
                c.pkt_snd_period_us *= 1.125;
                self.last_dec_seq = Some(c.snd_max);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::*;

    #[test]
    fn increase_follows_udt_table() {
        // spare 20 Mbit/s at 1500-byte packets -> 10^8 * 1.5e-6 / 1500 = 0.1 packets per SYN
        let spare = 20e6 / (1500.0 * 8.0);
        assert!((Daimd::increase(spare, 1500) - 0.1).abs() < 1e-9);
        let spare = 200e6 / (1500.0 * 8.0);
        assert!((Daimd::increase(spare, 1500) - 1.0).abs() < 1e-9);
        assert_eq!(Daimd::increase(-5.0, 1500), 1.0 / 1500.0);
    }

    #[test]
    fn loss_leaves_slow_start_and_decreases_once_per_epoch() {
        let (mut d, mut c) = (Daimd::default(), ctl());
        d.init(&mut c);
        for _ in 0..5 {
            c.now_us += 10_000;
            c.snd_una += 100;
            let a = c.snd_una;
            d.on_ack(&mut c, a); // 100 segments per 10 ms = 10,000 per second
        }
        assert!(d.slow_start());
        c.snd_max = c.snd_una + 50;
        let s = c.snd_una;
        d.on_loss(&mut c, &[(s, s)]);
        assert!(!d.slow_start());
        assert!((c.pkt_snd_period_us - 112.5).abs() < 1e-6, "{}", c.pkt_snd_period_us);
        let p = c.pkt_snd_period_us;
        d.dec_random = 1000; // no random extra decrease inside the epoch
        d.on_loss(&mut c, &[(s + 1, s + 1)]);
        assert_eq!(c.pkt_snd_period_us, p);
        // rate grows again after the next SYN without loss
        for _ in 0..2 {
            c.now_us += 10_000;
            c.snd_una += 89;
            let a = c.snd_una;
            d.on_ack(&mut c, a);
        }
        assert!(c.pkt_snd_period_us < p, "{} !< {p}", c.pkt_snd_period_us);
    }
}
