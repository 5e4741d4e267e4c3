//! Merge specs held by a node, by SHA-256, and the chunked transfer that fills the store.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::msg::{Body, FlowId, Msg, SpecHash};

pub const CHUNK_SIZE: usize = 1024;
pub const MAX_SPEC_SIZE: usize = 1 << 20;

pub fn sha256(bytes: &[u8]) -> SpecHash {
    Sha256::digest(bytes).into()
}

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
    /// The transfer is dead (a chunk ran out of tries, or the bytes did not match the hash).
    Failed(String),
}

/// One spec transfer from one upstream node, with a window of requests in flight.
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
}

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
        while self.in_flight.len() < usize::from(self.window)
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
        if self.chunks.iter().all(Option::is_some) {
            let bytes: Vec<u8> = self.chunks.iter_mut().flat_map(|c| c.take().unwrap()).collect();
            return if sha256(&bytes) == self.hash {
                FetchStep::Done(bytes)
            } else {
                FetchStep::Failed("spec bytes do not match their SHA-256".into())
            };
        }
        self.pump(now, seq)
    }

    pub fn on_timer(&mut self, now: u64, seq: &mut impl FnMut() -> u32) -> FetchStep {
        let mut out = Vec::new();
        let due: Vec<u16> =
            self.in_flight.iter().filter(|(_, (d, _))| *d <= now).map(|(i, _)| *i).collect();
        for i in due {
            let (_, tries) = self.in_flight[&i];
            if tries >= self.tries {
                return FetchStep::Failed(format!("chunk {i} unanswered after {tries} requests"));
            }
            self.in_flight.insert(i, (now + self.timeout_us, tries + 1));
            out.push(self.request(i, seq()));
        }
        FetchStep::Request(out)
    }

    pub fn deadline(&self) -> Option<u64> {
        self.in_flight.values().map(|(d, _)| *d).min()
    }
}
