//! splitmix64, the one seeded generator every crate draws from (link loss, transport timers,
//! generated MTP objects): tiny, stateless apart from one word, reproducible from a seed.
//! Kept here because this is the lowest crate all its users depend on, and it is `no_std`.

/// The Weyl-sequence step added to the state before each output.
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The output function: a bijective 64-bit mix of one state word.
#[inline]
pub const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Advances `state` by one step and returns the next output; for callers that keep the state
/// as a bare `u64`.
#[inline]
pub fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GAMMA);
    mix(*state)
}

/// A splitmix64 generator.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        next(&mut self.0)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_outputs() {
        // The reference generator's first outputs for seeds 0 and 1234567.
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(g.next_u64(), 0x06C4_5D18_8009_454F);
        let mut g = SplitMix64::new(1_234_567);
        assert_eq!(g.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(g.next_u64(), 3_203_168_211_198_807_973);
        assert_eq!(g.next_u64(), 9_817_491_932_198_370_423);
    }

    #[test]
    fn bare_state_and_struct_agree() {
        let (mut s, mut g) = (42u64, SplitMix64::new(42));
        for _ in 0..100 {
            assert_eq!(next(&mut s), g.next_u64());
        }
        assert_eq!(mix(42u64.wrapping_add(GAMMA)), SplitMix64::new(42).next_u64());
    }
}
