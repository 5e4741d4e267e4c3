//! Queueing-delay histogram: log-spaced buckets (four per power of two of microseconds), so
//! recording is a few instructions and p50/p99 come out within about 20 %.

const SUB: u32 = 4;
const BUCKETS: usize = 64 * SUB as usize;

#[derive(Clone)]
pub struct Hist {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist { counts: Box::new([0; BUCKETS]), total: 0 }
    }
}

fn bucket(us: u64) -> usize {
    let x = us + 1;
    let msb = 63 - x.leading_zeros();
    if msb < 2 {
        return x as usize - 1; // 1..3 -> 0..2: exact for tiny values
    }
    let sub = (x >> (msb - 2)) & (SUB as u64 - 1);
    (msb * SUB + sub as u32) as usize
}

/// The largest microsecond value that falls in bucket `i`.
fn upper(i: usize) -> u64 {
    if i < 3 {
        return i as u64;
    }
    let (msb, sub) = (i as u32 / SUB, i as u64 % SUB as u64);
    let base = 1u64 << msb;
    base + (sub + 1) * (base / SUB as u64) - 2
}

impl Hist {
    pub fn record_ns(&mut self, ns: u64) {
        self.counts[bucket(ns / 1000)] += 1;
        self.total += 1;
    }

    /// Add another histogram's counts (the emulator's shards each keep their own).
    pub fn merge(&mut self, other: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
    }

    /// The `q` quantile (0..1) in microseconds (a bucket's upper edge), None when empty.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let want = ((self.total as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(upper(i));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotone_and_upper_edges_bound_values() {
        for us in 0..100_000u64 {
            let b = bucket(us);
            assert!(upper(b) >= us, "us={us} b={b} upper={}", upper(b));
            assert!(b == 0 || upper(b - 1) < us, "us={us}");
        }
    }

    #[test]
    fn quantiles_within_a_bucket() {
        let mut h = Hist::default();
        assert_eq!(h.quantile_us(0.5), None);
        for us in 1..=1000u64 {
            h.record_ns(us * 1000);
        }
        let p50 = h.quantile_us(0.5).unwrap();
        let p99 = h.quantile_us(0.99).unwrap();
        assert!((500..=640).contains(&p50), "{p50}");
        assert!((990..=1270).contains(&p99), "{p99}");
    }

    #[test]
    fn merged_halves_give_the_whole() {
        let (mut whole, mut lo, mut hi) = (Hist::default(), Hist::default(), Hist::default());
        for us in 1..=1000u64 {
            whole.record_ns(us * 1000);
            if us <= 900 { &mut lo } else { &mut hi }.record_ns(us * 1000);
        }
        lo.merge(&hi);
        for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(lo.quantile_us(q), whole.quantile_us(q), "q={q}");
        }
        assert!(hi.quantile_us(0.0).unwrap() >= 900);
    }
}

/// One link direction's lateness against a bound, exactly (no buckets): how many frames left,
/// how many of them later than the bound, and the latest. The fidelity check of an experiment
/// reads these per link (docs/linkemu.md, "Fidelity").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lateness {
    pub frames: u64,
    pub over_bound: u64,
    pub max_ns: u64,
}

impl Lateness {
    pub fn record_ns(&mut self, late_ns: u64, bound_ns: u64) {
        self.frames += 1;
        if late_ns > bound_ns {
            self.over_bound += 1;
        }
        self.max_ns = self.max_ns.max(late_ns);
    }
}

#[cfg(test)]
mod lateness_tests {
    use super::Lateness;

    #[test]
    fn counts_frames_over_the_bound_and_the_latest() {
        let mut l = Lateness::default();
        for ns in [0, 400_000, 500_000, 500_001, 3_000_000] {
            l.record_ns(ns, 500_000);
        }
        assert_eq!(l, Lateness { frames: 5, over_bound: 2, max_ns: 3_000_000 });
    }
}
