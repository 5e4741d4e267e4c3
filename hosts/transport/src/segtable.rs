//! The session's segment table: a slab of slots reused through a free list, addressed by
//! `SegId`s that carry the slot index and a generation. Lookup, insert and free are an index
//! and a compare (no hashing), no memory is allocated once the table has grown to the
//! session's peak of live segments, and an id whose segment was freed never finds the
//! segment that reuses its slot.
//!
//! A ring indexed by sequence offset was the other candidate; a slab does not care that
//! control segments die at once while data segments live a round trip, nor that a held
//! segment sits in the middle.
use std::hash::{BuildHasherDefault, Hasher};

use crate::event::SegId;

/// A hasher for `SegId`s and sequence numbers (integers the session made, not an attacker):
/// one multiply instead of SipHash, which showed in the sender's profile.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, v: u64) {
        // Fibonacci hashing: the high bits, which hashbrown uses, depend on every input bit
        self.0 = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
}

pub type IdBuildHasher = BuildHasherDefault<IdHasher>;

struct Slot<T> {
    gen: u32,
    val: Option<T>,
}

pub struct SegTable<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Default for SegTable<T> {
    fn default() -> Self {
        SegTable { slots: Vec::new(), free: Vec::new(), live: 0 }
    }
}

fn split(id: SegId) -> (usize, u32) {
    ((id.0 & 0xffff_ffff) as usize, (id.0 >> 32) as u32)
}

impl<T> SegTable<T> {
    pub fn insert(&mut self, val: T) -> SegId {
        self.live += 1;
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot { gen: 0, val: None });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[idx as usize];
        // a new generation per use, so an old id misses; starting at 1 keeps SegId(0) unused
        slot.gen = slot.gen.wrapping_add(1).max(1);
        slot.val = Some(val);
        SegId((slot.gen as u64) << 32 | idx as u64)
    }

    pub fn get(&self, id: SegId) -> Option<&T> {
        let (i, g) = split(id);
        self.slots.get(i).filter(|s| s.gen == g).and_then(|s| s.val.as_ref())
    }

    pub fn get_mut(&mut self, id: SegId) -> Option<&mut T> {
        let (i, g) = split(id);
        self.slots.get_mut(i).filter(|s| s.gen == g).and_then(|s| s.val.as_mut())
    }

    pub fn remove(&mut self, id: SegId) -> Option<T> {
        let (i, g) = split(id);
        let slot = self.slots.get_mut(i).filter(|s| s.gen == g)?;
        let v = slot.val.take()?;
        self.free.push(i as u32);
        self.live -= 1;
        Some(v)
    }

    pub fn len(&self) -> usize {
        self.live
    }

    /// The live values, in slot order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter_map(|s| s.val.as_ref())
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_miss_and_slots_are_reused() {
        let mut t = SegTable::default();
        let a = t.insert("a");
        let b = t.insert("b");
        assert_eq!(t.get(a), Some(&"a"));
        assert_eq!(t.remove(a), Some("a"));
        assert_eq!(t.remove(a), None);
        let c = t.insert("c"); // takes a's slot
        assert_eq!(c.0 & 0xffff_ffff, a.0 & 0xffff_ffff);
        assert_ne!(c, a);
        assert_eq!(t.get(a), None);
        assert_eq!(t.get(c), Some(&"c"));
        assert_eq!((t.len(), t.slots.len()), (2, 2));
        *t.get_mut(b).unwrap() = "B";
        assert_eq!(t.remove(b), Some("B"));
        assert_eq!(t.get(SegId(99)), None);
        assert_eq!(t.len(), 1);
        assert!(!t.is_empty());
    }
}
