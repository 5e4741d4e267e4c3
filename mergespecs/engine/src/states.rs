//! One flow's merge states as the engine sees them: tag -> slot, and for each open state the
//! raw datagrams merged into it (what fail-open forwards if the spec dies before building).
//! The spec keeps the state itself in its own memory, indexed by the slot number.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hash for u64 tags (tags are per flow and capped in number, so no DoS concern
/// beyond the flow itself).
#[derive(Default)]
pub(crate) struct TagHasher(u64);

impl Hasher for TagHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, tag: u64) {
        // Fibonacci hashing spreads sequential tags over the high bits hashbrown uses.
        self.0 = (self.0 ^ tag)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
}

/// Raw datagrams, back to back.
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub bytes: Vec<u8>,
    pub lens: Vec<u32>,
}

impl Held {
    pub fn push(&mut self, datagram: &[u8]) {
        self.bytes.extend_from_slice(datagram);
        self.lens.push(datagram.len() as u32);
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.lens.iter().scan(0usize, move |at, &len| {
            let d = &self.bytes[*at..*at + len as usize];
            *at += len as usize;
            Some(d)
        })
    }

    pub fn count(&self) -> usize {
        self.lens.len()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.lens.clear();
    }
}

/// Where a state's timer sits in the wheel, so it can be removed without a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimerPos {
    pub deadline: u64,
    pub tick: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub tag: u64,
    pub open: bool,
    pub held: Held,
    pub timer: Option<TimerPos>,
    /// The latest time an egress gate may hold the state once it is finished (the spec's
    /// `hold_limit`); `None`: never held.
    pub hold_limit: Option<u64>,
    /// Finished and held by the egress gate since then, until its timer fires.
    pub gated: Option<u64>,
}

#[derive(Default)]
pub(crate) struct StateTable {
    by_tag: HashMap<u64, u32, BuildHasherDefault<TagHasher>>,
    slots: Vec<Slot>,
    /// Free slot numbers, reused last-in first-out so numbers stay dense.
    free: Vec<u32>,
    held_bytes: usize,
    /// Open slots in the order they were opened (for specs whose states leave in order).
    order: VecDeque<u32>,
}

impl StateTable {
    pub fn find(&self, tag: u64) -> Option<u32> {
        self.by_tag.get(&tag).copied()
    }

    /// Opens a state for `tag`, or `None` if `limit` states are open already.
    pub fn open(&mut self, tag: u64, limit: usize) -> Option<u32> {
        if self.by_tag.len() >= limit {
            return None;
        }
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::default());
            (self.slots.len() - 1) as u32
        });
        let s = &mut self.slots[slot as usize];
        s.tag = tag;
        s.open = true;
        s.hold_limit = None;
        s.gated = None;
        self.by_tag.insert(tag, slot);
        self.order.push_back(slot);
        Some(slot)
    }

    /// Closes a state; its held datagrams are forgotten (they were built or forwarded).
    pub fn close(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        debug_assert!(s.open && s.timer.is_none());
        self.held_bytes -= s.held.bytes.len();
        s.held.clear();
        s.open = false;
        s.hold_limit = None;
        s.gated = None;
        self.by_tag.remove(&s.tag);
        self.free.push(slot);
        if let Some(i) = self.order.iter().position(|&o| o == slot) {
            self.order.remove(i);
        }
    }

    /// The open slot opened first.
    pub fn oldest(&self) -> Option<u32> {
        self.order.front().copied()
    }

    /// A kept state starts over as the newest (it was built: what it holds now came later).
    pub fn requeue(&mut self, slot: u32) {
        if let Some(i) = self.order.iter().position(|&o| o == slot) {
            self.order.remove(i);
            self.order.push_back(slot);
        }
    }

    /// Open slots in the order they were opened.
    pub fn slots_in_order(&self) -> Vec<u32> {
        self.order.iter().copied().collect()
    }

    pub fn slot(&self, slot: u32) -> &Slot {
        &self.slots[slot as usize]
    }

    pub fn slot_mut(&mut self, slot: u32) -> &mut Slot {
        &mut self.slots[slot as usize]
    }

    pub fn hold(&mut self, slot: u32, datagram: &[u8]) {
        self.held_bytes += datagram.len();
        self.slots[slot as usize].held.push(datagram);
    }

    /// Forgets what a state held (it was just built); returns how many datagrams that was.
    pub fn release_held(&mut self, slot: u32) -> usize {
        let held = &mut self.slots[slot as usize].held;
        let n = held.count();
        self.held_bytes -= held.bytes.len();
        held.clear();
        n
    }

    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    pub fn open_count(&self) -> usize {
        self.by_tag.len()
    }

    /// Open slot numbers, in slot order (deterministic flushes).
    /// The earliest timer deadline of the open states (no allocation: asked every batch).
    pub fn earliest_timer(&self) -> Option<u64> {
        self.slots.iter().filter(|s| s.open).filter_map(|s| s.timer.map(|t| t.deadline)).min()
    }

    pub fn open_slots(&self) -> Vec<u32> {
        (0..self.slots.len() as u32)
            .filter(|&s| self.slots[s as usize].open)
            .collect()
    }

    /// Everything, emptied: for quarantine and removal.
    pub fn take_all(&mut self) -> Vec<Slot> {
        self.by_tag.clear();
        self.free.clear();
        self.order.clear();
        self.held_bytes = 0;
        std::mem::take(&mut self.slots)
    }
}
