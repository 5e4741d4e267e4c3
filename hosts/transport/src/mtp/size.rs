//! Datagram-size adaptation (rules "ours", docs/transport.md "MTP"): the client chooses how
//! many bytes each reply may carry. Repeated full-size requests lost again, several in a row,
//! read as a path that drops big datagrams (an MTU black hole, a fragment-dropping middlebox):
//! the size halves. Only repeats count: a burst of congestion loss takes first sends, and
//! their repeats, sent into a halved window, get through. A run of answered requests doubles it back
//! toward the ceiling, so a transient run of random losses costs little; a size that failed
//! right after growing is tried again only after four times as many answers.

/// Consecutive losses of full-size repeats that halve the size.
pub const CUT_AFTER: u32 = 4;
/// Consecutive answers that double it again (at first; ×4 for each failed try, up to 65536).
pub const GROW_AFTER: u32 = 64;
const GROW_AFTER_MAX: u32 = 65536;

#[derive(Clone, Debug)]
pub struct SizeAdapt {
    pub size: usize,
    pub min: usize,
    pub max: usize,
    lost_full: u32,
    answered: u32,
    grow_after: u32,
    /// The last change was a doubling, not yet confirmed by a full run of answers.
    trying: bool,
    pub cuts: u64,
    pub grows: u64,
}

impl SizeAdapt {
    pub fn new(min: usize, max: usize) -> SizeAdapt {
        SizeAdapt {
            size: max,
            min: min.min(max),
            max,
            lost_full: 0,
            answered: 0,
            grow_after: GROW_AFTER,
            trying: false,
            cuts: 0,
            grows: 0,
        }
    }

    pub fn answered(&mut self, len: usize) {
        if len >= self.size {
            self.lost_full = 0;
        }
        self.answered += 1;
        if self.answered >= GROW_AFTER {
            self.trying = false;
        }
        if self.answered >= self.grow_after && self.size < self.max {
            self.size = (self.size * 2).min(self.max);
            self.answered = 0;
            self.grows += 1;
            self.trying = true;
        }
    }

    /// A request of `len` bytes was lost; `repeat`: it had been sent before.
    pub fn lost(&mut self, len: usize, repeat: bool) {
        if !repeat || len < self.size || self.size <= self.min {
            return;
        }
        self.lost_full += 1;
        self.answered = 0;
        if self.lost_full >= CUT_AFTER {
            if self.trying {
                self.grow_after = (self.grow_after * 4).min(GROW_AFTER_MAX);
                self.trying = false;
            }
            self.size = (self.size / 2).max(self.min);
            self.lost_full = 0;
            self.cuts += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_full_losses_halve_sixty_four_answers_double_small_losses_do_nothing() {
        let mut s = SizeAdapt::new(256, 1400);
        for _ in 0..3 {
            s.lost(1400, true);
        }
        s.answered(1400); // a full-size answer resets the run
        for _ in 0..3 {
            s.lost(1400, true);
            s.lost(100, true); // short tail requests say nothing about size
        }
        assert_eq!(s.size, 1400);
        for _ in 0..10 {
            s.lost(1400, false); // first sends lost in a burst say nothing
        }
        assert_eq!(s.size, 1400);
        s.lost(1400, true);
        assert_eq!((s.size, s.cuts), (700, 1));
        for _ in 0..40 {
            s.lost(700, true);
        }
        assert_eq!(s.size, 256);
        for _ in 0..GROW_AFTER {
            s.answered(256);
        }
        assert_eq!((s.size, s.grows), (512, 1));
        // 512 fails at once: back to 256, and the next try waits 4 × 64 answers
        for _ in 0..CUT_AFTER {
            s.lost(512, true);
        }
        for _ in 0..4 * GROW_AFTER - 1 {
            s.answered(256);
        }
        assert_eq!(s.size, 256);
        s.answered(256);
        assert_eq!(s.size, 512);
    }
}
