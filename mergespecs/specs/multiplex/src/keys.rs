//! The same-source rule's key (docs/multiplex.md "Parallel bundles"): two records with one
//! key never share a bundle, and a record always goes in a later bundle than the last one
//! holding its key, so nothing of one key is reordered.
//!
//! [`KeyIndex`] maps each key to the sequence number of the newest open bundle holding it.

use concast_speckit::arena::{Arena, Zeroable};

/// What "the same source" means (`key=host` or `key=flow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// The record's source address (the original paper's wording).
    Host,
    /// The record's original flow: source address and, for TCP and UDP, the two ports from
    /// its payload; other protocols key on (source, protocol). The destination is R for every
    /// record of the flow, so it adds nothing. TCP and UDP with equal ports share a key, which
    /// only makes bundling more careful, never less.
    Flow,
}

/// The key of a record or datagram with source `src`, protocol `protocol` and IP payload
/// `payload` (for a record, what it carries).
pub fn key_of(kind: KeyKind, src: u32, protocol: u8, payload: &[u8]) -> u64 {
    let high = u64::from(src) << 32;
    match kind {
        KeyKind::Host => u64::from(src),
        KeyKind::Flow => match (protocol, payload) {
            (6 | 17, [a, b, c, d, ..]) => high | u64::from(u32::from_be_bytes([*a, *b, *c, *d])),
            _ => high | u64::from(protocol),
        },
    }
}

#[derive(Clone, Copy, Default)]
struct Entry {
    key: u64,
    /// 0: the slot is empty (bundle sequence numbers start at 1).
    seq: u64,
}

// SAFETY: two integers; all zero is the empty slot.
unsafe impl Zeroable for Entry {}

/// Open addressing with linear probing and backward-shift deletion (no tombstones), sized
/// at init for every record the open bundles can hold, at most half full.
pub struct KeyIndex {
    slots: Arena<Entry>,
    mask: usize,
    len: usize,
}

impl KeyIndex {
    /// Room for `keys` keys.
    pub fn new(keys: usize) -> Result<KeyIndex, &'static str> {
        let size = (keys.max(8) * 2).next_power_of_two();
        Ok(KeyIndex {
            slots: Arena::zeroed(size)?,
            mask: size - 1,
            len: 0,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn home(&self, key: u64) -> usize {
        // Fibonacci hashing: keys often differ only in a few low bits (the last octet, a port).
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & self.mask
    }

    fn find(&self, key: u64) -> Result<usize, usize> {
        let mut i = self.home(key);
        loop {
            let e = self.slots[i];
            if e.seq == 0 {
                return Err(i);
            }
            if e.key == key {
                return Ok(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The newest open bundle holding `key`, if any.
    pub fn get(&self, key: u64) -> Option<u64> {
        self.find(key).ok().map(|i| self.slots[i].seq)
    }

    /// `key` is now (also) in bundle `seq`, the newest holding it. False if the index is full
    /// (it is sized so that this does not happen).
    pub fn set(&mut self, key: u64, seq: u64) -> bool {
        match self.find(key) {
            Ok(i) => self.slots[i].seq = seq,
            Err(i) => {
                if (self.len + 1) * 2 > self.slots.len() {
                    return false;
                }
                self.slots[i] = Entry { key, seq };
                self.len += 1;
            }
        }
        true
    }

    /// Bundle `seq` left: forget `key` if that bundle was the newest holding it.
    pub fn remove_if(&mut self, key: u64, seq: u64) {
        let Ok(mut hole) = self.find(key) else {
            return;
        };
        if self.slots[hole].seq != seq {
            return;
        }
        self.len -= 1;
        // Shift later members of the probe run back so lookups never stop at the hole.
        let mut i = hole;
        loop {
            i = (i + 1) & self.mask;
            let e = self.slots[i];
            if e.seq == 0 {
                break;
            }
            let home = self.home(e.key);
            // `e` may fill the hole if its home is not cyclically in (hole, i].
            let between = if hole <= i {
                hole < home && home <= i
            } else {
                hole < home || home <= i
            };
            if !between {
                self.slots[hole] = e;
                hole = i;
            }
        }
        self.slots[hole] = Entry::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_keys_separate_connections_of_a_host_and_host_keys_do_not() {
        let tcp = |sport: u16, dport: u16| {
            let mut p = [0u8; 20];
            p[..2].copy_from_slice(&sport.to_be_bytes());
            p[2..4].copy_from_slice(&dport.to_be_bytes());
            p
        };
        let src = 0x0A00_0001;
        let (a, b) = (tcp(40_000, 80), tcp(40_001, 80));
        assert_ne!(
            key_of(KeyKind::Flow, src, 6, &a),
            key_of(KeyKind::Flow, src, 6, &b)
        );
        assert_eq!(
            key_of(KeyKind::Host, src, 6, &a),
            key_of(KeyKind::Host, src, 6, &b)
        );
        assert_ne!(
            key_of(KeyKind::Flow, src, 6, &a),
            key_of(KeyKind::Flow, src + 1, 6, &a)
        );
        // No ports to read: (source, protocol).
        assert_eq!(
            key_of(KeyKind::Flow, src, 1, &[8, 0]),
            (u64::from(src) << 32) | 1
        );
        assert_eq!(
            key_of(KeyKind::Flow, src, 6, &[1, 2]),
            (u64::from(src) << 32) | 6
        );
    }

    #[test]
    fn set_get_and_remove_keep_every_other_key_findable() {
        let mut ix = KeyIndex::new(64).unwrap();
        // Keys that collide a lot: the same home for many of them is likely with 256 slots.
        let keys: std::vec::Vec<u64> = (0..64u64).map(|k| k * 256).collect();
        for (n, &k) in keys.iter().enumerate() {
            assert!(ix.set(k, n as u64 + 1));
        }
        assert_eq!(ix.len(), 64);
        ix.set(keys[3], 100); // a newer bundle holds it now
        ix.remove_if(keys[3], 4); // the older bundle leaving does not forget it
        assert_eq!(ix.get(keys[3]), Some(100));
        for (n, &k) in keys.iter().enumerate().step_by(2) {
            ix.remove_if(k, if n == 3 { 100 } else { n as u64 + 1 });
        }
        for (n, &k) in keys.iter().enumerate() {
            let want = match n {
                _ if n % 2 == 0 => None,
                3 => Some(100),
                _ => Some(n as u64 + 1),
            };
            assert_eq!(ix.get(k), want, "key {k}");
        }
        assert_eq!(ix.len(), 32);
    }

    #[test]
    fn the_index_refuses_rather_than_overfills() {
        let mut ix = KeyIndex::new(8).unwrap(); // 16 slots, 8 keys
        for k in 0..8 {
            assert!(ix.set(k, 1));
        }
        assert!(!ix.set(99, 1));
        assert!(ix.set(3, 2), "updating a member needs no room");
    }
}
