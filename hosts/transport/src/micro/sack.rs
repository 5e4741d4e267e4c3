//! Selective acknowledgement beyond the ACK attribute's 32-segment bitmap: the receiver's
//! out-of-order segments kept as runs, and the SACK blocks an Ack segment carries as its
//! payload.
//!
//! Wire format of an Ack segment's payload: up to `MAX_BLOCKS` blocks of 8 bytes, each the
//! offset of a run's first segment from the cumulative ACK (u32, big-endian) and the run's
//! length in segments (u32, big-endian). Offsets are relative, so they need no ISN mapping; a
//! payload that is not a whole number of blocks, or a block reaching past what was sent, is
//! malformed and ignored (the ACK attribute still counts).
//!
//! Which runs: as RFC 2018 §4 orders TCP's SACK blocks, the run holding the segment that
//! arrived last comes first, then the runs of the other latest arrivals (`RECENT_BLOCKS` in
//! all), then the runs nearest the cumulative ACK. Naming only the nearest runs hid every
//! arrival beyond the 16th hole: with hundreds of scattered holes (two slow starts
//! overflowing one drop-tail queue) the sender learnt of 16 holes per round trip and a
//! recovery took seconds at 110 ms RTT (issue #23; tests/burst_recovery.rs).
use std::collections::BTreeMap;

/// Blocks per Ack: 128 bytes of payload.
pub const MAX_BLOCKS: usize = 16;
pub const BLOCK: usize = 8;
/// Of the blocks, how many name the runs of the latest arrivals (the rest the nearest runs).
pub const RECENT_BLOCKS: usize = 8;

/// Sequence numbers above the cumulative ACK that have arrived, as runs `start -> end`
/// (end exclusive).
#[derive(Debug, Default)]
pub struct Runs {
    runs: BTreeMap<u32, u32>,
    count: usize,
}

impl Runs {
    /// Segments held.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn contains(&self, q: u32) -> bool {
        self.runs.range(..=q).next_back().is_some_and(|(_, e)| q < *e)
    }

    /// Add `q`; false when it was already there.
    pub fn insert(&mut self, q: u32) -> bool {
        let before = self.runs.range(..=q).next_back().map(|(s, e)| (*s, *e));
        if before.is_some_and(|(_, e)| q < e) {
            return false;
        }
        let after = self.runs.get(&(q + 1)).copied();
        match (before.filter(|(_, e)| *e == q), after) {
            (Some((s, _)), Some(e2)) => {
                self.runs.remove(&(q + 1));
                self.runs.insert(s, e2);
            }
            (Some((s, _)), None) => {
                self.runs.insert(s, q + 1);
            }
            (None, Some(e2)) => {
                self.runs.remove(&(q + 1));
                self.runs.insert(q, e2);
            }
            (None, None) => {
                self.runs.insert(q, q + 1);
            }
        }
        self.count += 1;
        true
    }

    /// Take the run starting at `cum`, if any, returning where it ends.
    pub fn take_from(&mut self, cum: u32) -> Option<u32> {
        let end = self.runs.remove(&cum)?;
        self.count -= (end - cum) as usize;
        Some(end)
    }

    /// Bit i set when `cum + 1 + i` is held, for i < 32 (the ACK attribute's bitmap).
    pub fn bitmap(&self, cum: u32) -> u32 {
        let mut b = 0u32;
        for (s, e) in self.runs.range(cum + 1..cum.saturating_add(33)) {
            for q in *s..(*e).min(cum.saturating_add(33)) {
                b |= 1 << (q - cum - 1);
            }
        }
        b
    }

    /// The run holding `q`, as (start, end).
    pub fn run_of(&self, q: u32) -> Option<(u32, u32)> {
        self.runs.range(..=q).next_back().filter(|(_, e)| q < **e).map(|(s, e)| (*s, *e))
    }

    /// Up to `MAX_BLOCKS` runs as an Ack payload: those holding the `recent` arrivals (latest
    /// first, at most `RECENT_BLOCKS` of them), then the nearest; each run once.
    pub fn encode_blocks(&self, cum: u32, recent: &[u32], out: &mut Vec<u8>) {
        let mut chosen: Vec<(u32, u32)> = Vec::with_capacity(MAX_BLOCKS);
        for r in recent.iter().filter_map(|q| self.run_of(*q)).filter(|r| r.0 >= cum) {
            if chosen.len() == RECENT_BLOCKS {
                break;
            }
            if !chosen.contains(&r) {
                chosen.push(r);
            }
        }
        for r in self.runs.range(cum..).map(|(s, e)| (*s, *e)) {
            if chosen.len() == MAX_BLOCKS {
                break;
            }
            if !chosen.contains(&r) {
                chosen.push(r);
            }
        }
        for (s, e) in chosen {
            out.extend_from_slice(&(s - cum).to_be_bytes());
            out.extend_from_slice(&(e - s).to_be_bytes());
        }
    }
}

/// The runs `(first, end)` (end exclusive) an Ack payload names, checked against `limit`
/// (nothing at or beyond it was sent). None when malformed.
pub fn decode_blocks(cum: u32, payload: &[u8], limit: u32) -> Option<Vec<(u32, u32)>> {
    if !payload.len().is_multiple_of(BLOCK) || payload.len() > MAX_BLOCKS * BLOCK {
        return None;
    }
    payload
        .chunks(BLOCK)
        .map(|b| {
            let off = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            let len = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
            let first = cum.checked_add(off)?;
            let end = first.checked_add(len)?;
            (len > 0 && end <= limit).then_some((first, end))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn blocks_on_the_wire() {
        let mut r = Runs::default();
        for q in [12, 10, 11, 40, 41, 200] {
            assert!(r.insert(q));
        }
        assert!(!r.insert(11));
        assert_eq!(r.len(), 6);
        let mut w = Vec::new();
        r.encode_blocks(5, &[], &mut w);
        // runs 10..13, 40..42, 200..201 as (offset from 5, length)
        assert_eq!(w, [0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 35, 0, 0, 0, 2, 0, 0, 0, 195, 0, 0, 0, 1]);
        // the latest arrival's run first (RFC 2018 §4), each run once
        let mut w2 = Vec::new();
        r.encode_blocks(5, &[200, 41, 40], &mut w2);
        assert_eq!(decode_blocks(5, &w2, 201), Some(vec![(200, 201), (40, 42), (10, 13)]));
        assert_eq!(decode_blocks(5, &w, 201), Some(vec![(10, 13), (40, 42), (200, 201)]));
        assert_eq!(decode_blocks(5, &w, 200), None, "a block past what was sent");
        assert_eq!(decode_blocks(5, &w[..7], 1000), None, "not whole blocks");
        assert_eq!(r.bitmap(5), 0b111 << 4, "40 and 41 are beyond the bitmap's 32");
        assert_eq!(r.take_from(10), Some(13));
        assert_eq!(r.len(), 3);
    }

    proptest! {
        #[test]
        fn runs_agree_with_a_set(offs in proptest::collection::vec(1u32..300, 0..200), cum in 0u32..50) {
            // what the receiver holds is always above its cumulative ACK
            let mut r = Runs::default();
            let mut set = std::collections::BTreeSet::new();
            for q in offs.into_iter().map(|o| cum + o) {
                prop_assert_eq!(r.insert(q), set.insert(q));
            }
            prop_assert_eq!(r.len(), set.len());
            for q in 0..360 {
                prop_assert_eq!(r.contains(q), set.contains(&q));
            }
            let bits = (0..32u32).filter(|i| set.contains(&(cum + 1 + i))).fold(0u32, |b, i| b | 1 << i);
            prop_assert_eq!(r.bitmap(cum), bits);
            let mut w = Vec::new();
            let recent: Vec<u32> = set.iter().rev().take(12).copied().collect();
            r.encode_blocks(cum, &recent, &mut w);
            let blocks = decode_blocks(cum, &w, 1000).unwrap();
            let covered: Vec<u32> = blocks.iter().flat_map(|(a, b)| *a..*b).collect();
            prop_assert!(covered.iter().all(|q| set.contains(q) && *q >= cum));
            prop_assert!(blocks.len() <= MAX_BLOCKS);
            prop_assert_eq!(blocks.len(), r.runs.len().min(MAX_BLOCKS), "as many runs as fit, none twice");
            if let Some(last) = recent.first() {
                prop_assert_eq!(blocks.first().map(|b| b.0 <= *last && *last < b.1), Some(true));
            }
        }
    }
}
