//! A set of IPv4 sources (u32, network order read big-endian) with O(1) insert and lookup and
//! O(1) clear, for the "never two records of one source in a bundle" rule. Open addressing in
//! a table of `SLOTS` (a power of two) entries; a slot is live only if its stamp equals the
//! set's generation, so clearing is one increment.

#[derive(Clone)]
pub struct SourceSet<const SLOTS: usize> {
    addrs: [u32; SLOTS],
    stamps: [u16; SLOTS],
    generation: u16,
    len: usize,
}

impl<const SLOTS: usize> Default for SourceSet<SLOTS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SLOTS: usize> SourceSet<SLOTS> {
    /// Most sources the set holds: lookups stay short at three quarters full.
    pub const CAPACITY: usize = SLOTS / 4 * 3;

    pub const fn new() -> Self {
        assert!(SLOTS.is_power_of_two());
        SourceSet {
            addrs: [0; SLOTS],
            stamps: [0; SLOTS],
            generation: 1,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len >= Self::CAPACITY
    }

    pub fn clear(&mut self) {
        self.len = 0;
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Stamps from 65,535 clears ago would look live again: wipe them once.
            self.stamps.fill(0);
            self.generation = 1;
        }
    }

    /// The slot holding `addr`, or the free slot where it would go.
    fn probe(&self, addr: u32) -> (usize, bool) {
        // Fibonacci hashing: sources often differ only in their last octet.
        let mut i = (addr.wrapping_mul(0x9E37_79B9) >> 16) as usize & (SLOTS - 1);
        loop {
            if self.stamps[i] != self.generation {
                return (i, false);
            }
            if self.addrs[i] == addr {
                return (i, true);
            }
            i = (i + 1) & (SLOTS - 1);
        }
    }

    pub fn contains(&self, addr: u32) -> bool {
        self.probe(addr).1
    }

    /// Adds `addr`; false if the set is full (and `addr` not in it). Adding a member is a no-op.
    pub fn insert(&mut self, addr: u32) -> bool {
        let (i, present) = self.probe(addr);
        if present {
            return true;
        }
        if self.is_full() {
            return false;
        }
        self.addrs[i] = addr;
        self.stamps[i] = self.generation;
        self.len += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::SourceSet;

    #[test]
    fn insert_lookup_clear_and_capacity() {
        let mut s = SourceSet::<16>::new();
        assert_eq!(SourceSet::<16>::CAPACITY, 12);
        for a in 0..12u32 {
            assert!(s.insert(0x0A00_0100 + a));
        }
        assert!(s.insert(0x0A00_0100), "a member is already in");
        assert!(!s.insert(0x0B00_0000), "full");
        assert!(s.contains(0x0A00_010B) && !s.contains(0x0A00_010C));
        s.clear();
        assert!(s.is_empty() && !s.contains(0x0A00_0100));
        for _ in 0..70_000 {
            s.clear();
        }
        assert!(s.insert(7) && s.contains(7) && !s.contains(0));
    }
}
