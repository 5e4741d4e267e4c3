//! Merge specs held by a node, by SHA-256, and the chunked transfer that fills the store.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

use crate::msg::{Body, FlowId, Msg, SpecHash};

pub use concast_wire::csp::{sha256, CHUNK_SIZE};
/// The wire's bound (`concast_wire::csp::MAX_SPEC_SIZE`) as a size.
pub const MAX_SPEC_SIZE: usize = concast_wire::csp::MAX_SPEC_SIZE as usize;

/// Chunks of a spec of `size` bytes (callers check the size against the bound first).
pub fn chunk_count(size: u32) -> u16 {
    (size as usize).div_ceil(CHUNK_SIZE) as u16
}

/// Specs cached by hash, shared by every flow that uses them.
#[derive(Default)]
pub struct SpecStore {
    specs: HashMap<SpecHash, Arc<Vec<u8>>>,
}

impl SpecStore {
    pub fn insert(&mut self, bytes: Vec<u8>) -> SpecHash {
        let hash = sha256(&bytes);
        self.specs.entry(hash).or_insert_with(|| Arc::new(bytes));
        hash
    }

    pub fn get(&self, hash: &SpecHash) -> Option<Arc<Vec<u8>>> {
        self.specs.get(hash).cloned()
    }

    pub fn contains(&self, hash: &SpecHash) -> bool {
        self.specs.contains_key(hash)
    }

    pub fn len(&self) -> usize {
        self.specs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The SPEC_CHUNK body answering a request, or None if the hash or index is unknown.
    pub fn chunk(&self, hash: &SpecHash, index: u16) -> Option<Body> {
        let spec = self.specs.get(hash)?;
        let count = chunk_count(spec.len() as u32);
        if index >= count {
            return None;
        }
        let start = usize::from(index) * CHUNK_SIZE;
        let end = (start + CHUNK_SIZE).min(spec.len());
        Some(Body::SpecChunk {
            hash: *hash,
            size: spec.len() as u32,
            index,
            count,
            data: spec[start..end].to_vec(),
        })
    }
}

/// What a transfer wants done after an event.
#[derive(Debug, PartialEq, Eq)]
pub enum FetchStep {
    /// Send these chunk requests.
    Request(Vec<Msg>),
    /// All chunks arrived and the hash matched.
    Done(Vec<u8>),
    /// The transfer is dead: a chunk ran out of tries.
    Failed(String),
    /// The transfer is dead: the bytes did not match the hash (a forged or altered chunk).
    Mismatch(String),
}

/// One spec transfer from one upstream node, with a window of requests in flight.
///
/// The window adapts like TCP's: it starts at [`FIRST_WINDOW`] requests, grows by one per
/// chunk that arrives (doubling per round trip) up to the configured `chunk_window`, and
/// halves when a request times out; a request sent again waits twice as long as its last
/// try. Replies are chunk-sized and cross the same small router queues as the flow's data,
/// so a full window sent at once into a 20-packet drop-tail queue loses chunks and, after
/// `chunk_tries`, the whole join.
#[derive(Debug)]
pub struct Fetch {
    pub hash: SpecHash,
    pub size: u32,
    pub from: Ipv4Addr,
    flow: FlowId,
    chunks: Vec<Option<Vec<u8>>>,
    /// index -> (deadline, tries so far)
    in_flight: BTreeMap<u16, (u64, u32)>,
    next_index: u16,
    timeout_us: u64,
    tries: u32,
    window: u16,
    /// Requests allowed in flight now (1..=window).
    cwnd: u16,
}

/// Chunk requests a transfer starts with.
pub const FIRST_WINDOW: u16 = 2;

impl Fetch {
    pub fn new(flow: FlowId, hash: SpecHash, size: u32, from: Ipv4Addr, cfg: &crate::Config) -> Fetch {
        Fetch {
            hash,
            size,
            from,
            flow,
            chunks: vec![None; usize::from(chunk_count(size))],
            in_flight: BTreeMap::new(),
            next_index: 0,
            timeout_us: cfg.chunk_timeout_us,
            tries: cfg.chunk_tries,
            window: cfg.chunk_window.max(1),
            cwnd: FIRST_WINDOW.clamp(1, cfg.chunk_window.max(1)),
        }
    }

    /// Whether `size` is one a node may fetch at all.
    pub fn size_ok(size: u32) -> bool {
        size > 0 && size as usize <= MAX_SPEC_SIZE
    }

    fn request(&self, index: u16, seq: u32) -> Msg {
        Msg { flow: self.flow, seq, body: Body::SpecRequest { hash: self.hash, index } }
    }

    /// Fill the window with new requests.
    pub fn pump(&mut self, now: u64, seq: &mut impl FnMut() -> u32) -> FetchStep {
        let mut out = Vec::new();
        while self.in_flight.len() < usize::from(self.cwnd)
            && usize::from(self.next_index) < self.chunks.len()
        {
            let i = self.next_index;
            self.next_index += 1;
            if self.chunks[usize::from(i)].is_none() {
                self.in_flight.insert(i, (now + self.timeout_us, 1));
                out.push(self.request(i, seq()));
            }
        }
        FetchStep::Request(out)
    }

    pub fn on_chunk(
        &mut self,
        now: u64,
        size: u32,
        index: u16,
        data: Vec<u8>,
        seq: &mut impl FnMut() -> u32,
    ) -> FetchStep {
        let i = usize::from(index);
        if size != self.size || i >= self.chunks.len() || self.chunks[i].is_some() {
            return FetchStep::Request(Vec::new()); // stale or foreign: ignore
        }
        self.in_flight.remove(&index);
        self.chunks[i] = Some(data);
        self.cwnd = (self.cwnd + 1).min(self.window);
        if self.chunks.iter().all(Option::is_some) {
            let bytes: Vec<u8> = self.chunks.iter_mut().flat_map(|c| c.take().unwrap()).collect();
            return if sha256(&bytes) == self.hash {
                FetchStep::Done(bytes)
            } else {
                FetchStep::Mismatch("spec bytes do not match their SHA-256".into())
            };
        }
        self.pump(now, seq)
    }

    pub fn on_timer(&mut self, now: u64, seq: &mut impl FnMut() -> u32) -> FetchStep {
        let mut out = Vec::new();
        let due: Vec<u16> =
            self.in_flight.iter().filter(|(_, (d, _))| *d <= now).map(|(i, _)| *i).collect();
        if !due.is_empty() {
            self.cwnd = (self.cwnd / 2).max(1);
        }
        for i in due {
            let (_, tries) = self.in_flight[&i];
            if tries >= self.tries {
                return FetchStep::Failed(format!("chunk {i} unanswered after {tries} requests"));
            }
            let wait = self.timeout_us.saturating_mul(1 << tries.min(3));
            self.in_flight.insert(i, (now + wait, tries + 1));
            out.push(self.request(i, seq()));
        }
        FetchStep::Request(out)
    }

    /// Requests this transfer allows in flight now.
    #[cfg(test)]
    fn window_now(&self) -> u16 {
        self.cwnd
    }

    pub fn deadline(&self) -> Option<u64> {
        self.in_flight.values().map(|(d, _)| *d).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetch(spec: &[u8]) -> Fetch {
        let flow = FlowId { receiver: Ipv4Addr::new(10, 0, 0, 9), group: 1 };
        Fetch::new(flow, sha256(spec), spec.len() as u32, Ipv4Addr::new(10, 0, 0, 1), &crate::Config::default())
    }

    fn indices(step: FetchStep) -> Vec<u16> {
        let FetchStep::Request(msgs) = step else { panic!("not a request: {step:?}") };
        msgs.iter()
            .map(|m| match m.body {
                Body::SpecRequest { index, .. } => index,
                _ => panic!("not a chunk request"),
            })
            .collect()
    }

    fn chunk(spec: &[u8], i: u16) -> Vec<u8> {
        let start = usize::from(i) * CHUNK_SIZE;
        spec[start..(start + CHUNK_SIZE).min(spec.len())].to_vec()
    }

    #[test]
    fn the_window_starts_small_grows_per_chunk_and_halves_on_a_timeout() {
        let spec: Vec<u8> = (0..40 * CHUNK_SIZE).map(|i| (i % 251) as u8).collect();
        let mut f = fetch(&spec);
        let mut n = 0;
        let mut seq = || {
            n += 1;
            n
        };
        assert_eq!(indices(f.pump(0, &mut seq)), [0, 1], "two requests first, not sixteen");
        // Each chunk that arrives lets two more go: one refills its place, one grows the window.
        assert_eq!(indices(f.on_chunk(10, spec.len() as u32, 0, chunk(&spec, 0), &mut seq)), [2, 3]);
        assert_eq!(indices(f.on_chunk(20, spec.len() as u32, 1, chunk(&spec, 1), &mut seq)), [4, 5]);
        assert_eq!(f.window_now(), 4);
        for i in 2..=5 {
            f.on_chunk(30, spec.len() as u32, i, chunk(&spec, i), &mut seq);
        }
        assert_eq!(f.window_now(), 8);
        let growth: Vec<u16> = (0..20).map(|_| {
            let i = *f.in_flight.keys().next().unwrap();
            f.on_chunk(40, spec.len() as u32, i, chunk(&spec, i), &mut seq);
            f.window_now()
        }).collect();
        assert_eq!(*growth.last().unwrap(), 16, "capped at chunk_window: {growth:?}");
        // Everything in flight times out at once: one halving, every chunk asked again, and
        // the second try waits twice the timeout.
        let outstanding = f.in_flight.len();
        let again = indices(f.on_timer(40 + 500_000, &mut seq));
        assert_eq!(again.len(), outstanding);
        assert_eq!(f.window_now(), 8);
        assert_eq!(f.deadline(), Some(40 + 500_000 + 1_000_000));
    }

    #[test]
    fn a_chunk_still_unanswered_after_its_tries_fails_the_transfer() {
        let spec = vec![7u8; 3 * CHUNK_SIZE];
        let mut f = fetch(&spec);
        let mut n = 0;
        let mut seq = || {
            n += 1;
            n
        };
        f.pump(0, &mut seq);
        let mut now = 0;
        for _ in 1..5 {
            now = f.deadline().unwrap();
            assert!(matches!(f.on_timer(now, &mut seq), FetchStep::Request(_)));
            assert_eq!(f.window_now(), 1);
        }
        // Waits of 0.5, 1, 2, 4 s so far; the fifth try times out after 4 s again.
        assert_eq!(now, 500_000 + 1_000_000 + 2_000_000 + 4_000_000);
        let last = f.deadline().unwrap();
        assert_eq!(last - now, 4_000_000);
        assert!(matches!(f.on_timer(last, &mut seq), FetchStep::Failed(e) if e.contains("unanswered after 5")));
    }
}
