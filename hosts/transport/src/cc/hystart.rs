//! HyStart++ (RFC 9406): leave the initial slow start when the round trip rises, not at the
//! first loss. Flows that share a queue see its delay rise in the same rounds, whatever
//! window each has reached; a loss-ended slow start overshoots the path by up to a window and
//! ends each flow at whichever loss event hits it (issue #23).
use super::CcCtl;

/// RFC 9406 §4.3's constants (times in µs).
const MIN_RTT_THRESH_US: f64 = 4_000.0;
const MAX_RTT_THRESH_US: f64 = 16_000.0;
const MIN_RTT_DIVISOR: f64 = 8.0;
const N_RTT_SAMPLE: u32 = 8;
const CSS_GROWTH_DIVISOR: f64 = 4.0;
const CSS_ROUNDS: u32 = 5;
/// The per-ACK increase limit L of a sender that does not pace (§4.3; one that paces has none).
pub const L_UNPACED: f64 = 8.0;

/// What the window does on this ACK.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Grow {
    /// Slow start: add this many segments.
    Slow(f64),
    /// Conservative Slow Start: add this many (a quarter of slow start's).
    Css(f64),
    /// CSS ran its rounds: set ssthresh to cwnd, congestion avoidance from here.
    Exit,
}

#[derive(Debug)]
pub struct HyStart {
    /// The round ends when the cumulative ACK reaches this (snd_max when it began).
    window_end: Option<u32>,
    last_round_min_us: f64,
    round_min_us: f64,
    samples: u32,
    /// In CSS: the round minimum that started it, and the rounds CSS has begun.
    css: Option<(f64, u32)>,
    /// L, segments.
    limit: f64,
}

impl HyStart {
    /// `paced`: the sender paces its slow start, so the increase per ACK is not limited.
    pub fn new(paced: bool) -> HyStart {
        let limit = if paced { f64::INFINITY } else { L_UNPACED };
        HyStart { window_end: None, last_round_min_us: f64::INFINITY, round_min_us: f64::INFINITY, samples: 0, css: None, limit }
    }

    pub fn in_css(&self) -> bool {
        self.css.is_some()
    }

    /// One advancing ACK during slow start (§4.2): round bookkeeping, the ACK's RTT sample
    /// (`CcCtl::latest_rtt_us`), then the delay-increase test.
    pub fn on_ack(&mut self, c: &CcCtl, ack: u32) -> Grow {
        let round_over = self.window_end.is_none_or(|e| ack.wrapping_sub(e) as i32 >= 0);
        if round_over {
            self.last_round_min_us = self.round_min_us;
            self.round_min_us = f64::INFINITY;
            self.samples = 0;
            self.window_end = Some(c.snd_max);
            if let Some((_, rounds)) = self.css.as_mut() {
                *rounds += 1;
                if *rounds > CSS_ROUNDS {
                    return Grow::Exit;
                }
            }
        }
        if c.latest_rtt_us > 0.0 {
            self.round_min_us = self.round_min_us.min(c.latest_rtt_us);
            self.samples += 1;
        }
        let enough = self.samples >= N_RTT_SAMPLE && self.round_min_us.is_finite();
        match self.css {
            None if enough && self.last_round_min_us.is_finite() => {
                let thresh = (self.last_round_min_us / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH_US, MAX_RTT_THRESH_US);
                if self.round_min_us >= self.last_round_min_us + thresh {
                    self.css = Some((self.round_min_us, 1));
                }
            }
            // the rise was spurious: back to slow start
            Some((baseline, _)) if enough && self.round_min_us < baseline => self.css = None,
            _ => {}
        }
        let n = (c.acked.max(1) as f64).min(self.limit);
        if self.css.is_some() { Grow::Css(n / CSS_GROWTH_DIVISOR) } else { Grow::Slow(n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::ctl;

    /// One round: `acks` ACKs of two segments each, every one with RTT sample `rtt_us`, a
    /// round's segments always in flight.
    fn round(h: &mut HyStart, c: &mut CcCtl, acks: u32, rtt_us: f64) -> Vec<Grow> {
        (0..acks)
            .map(|_| {
                c.snd_una += 2;
                c.snd_max = c.snd_una + 2 * acks;
                c.acked = 2;
                c.latest_rtt_us = rtt_us;
                let una = c.snd_una;
                h.on_ack(c, una)
            })
            .collect()
    }

    #[test]
    fn a_round_trip_rise_past_the_threshold_starts_css_then_congestion_avoidance() {
        let (mut h, mut c) = (HyStart::new(true), ctl());
        assert!(round(&mut h, &mut c, 10, 110_000.0).iter().all(|g| *g == Grow::Slow(2.0)));
        // 110 ms / 8 = 13.75 ms: a rise of 13 ms is not enough
        assert!(round(&mut h, &mut c, 10, 123_000.0).iter().all(|g| *g == Grow::Slow(2.0)));
        assert!(!h.in_css());
        let g = round(&mut h, &mut c, 10, 140_000.0);
        assert_eq!(g[6], Grow::Slow(2.0), "fewer than N_RTT_SAMPLE samples: no decision");
        assert_eq!(g[7], Grow::Css(0.5), "the 8th sample decides");
        // (a round ends on the ACK of its last segment, which counts for the next one)
        let rest: Vec<Grow> = (0..CSS_ROUNDS).flat_map(|_| round(&mut h, &mut c, 10, 140_000.0)).collect();
        let exit = rest.iter().position(|g| *g == Grow::Exit).expect("CSS ended");
        assert!(rest[..exit].iter().all(|g| *g == Grow::Css(0.5)));
        assert_eq!(exit, 10 * (CSS_ROUNDS as usize - 1), "the round it began in and CSS_ROUNDS - 1 more");
    }

    #[test]
    fn css_returns_to_slow_start_when_the_round_trip_falls_back() {
        let (mut h, mut c) = (HyStart::new(false), ctl());
        round(&mut h, &mut c, 10, 110_000.0);
        round(&mut h, &mut c, 10, 130_000.0);
        assert!(h.in_css());
        let g = round(&mut h, &mut c, 10, 112_000.0);
        assert_eq!(g[9], Grow::Slow(2.0));
        assert!(!h.in_css(), "below the baseline: the rise was spurious");
        // unpaced: at most L segments an ACK
        c.snd_max = c.snd_una + 40;
        c.snd_una += 20;
        c.acked = 20;
        let una = c.snd_una;
        assert_eq!(h.on_ack(&c, una), Grow::Slow(L_UNPACED));
    }
}
