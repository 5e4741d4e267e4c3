//! A seeded generator per link so that loss patterns repeat run after run (splitmix64: tiny,
//! fast, and good enough to draw Bernoulli loss).

/// The generator itself is the workspace's one splitmix64 (`concast_wire::splitmix`).
pub type Rng = concast_wire::splitmix::SplitMix64;

/// A stable seed from a link id (FNV-1a), so a link keeps its loss pattern across runs.
pub fn seed_of(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_uniform_mean() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let xs: Vec<f64> = (0..100_000).map(|_| a.next_f64()).collect();
        assert!(xs.iter().all(|&x| x == b.next_f64() && (0.0..1.0).contains(&x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        assert_ne!(seed_of("l1"), seed_of("l2"));
    }
}
