//! The one MplexPkt a flow is filling: MplexHdr space, records in arrival order, the sources
//! in it, its delay fields and the raw bytes the engine holds for it.

use concast_sdk::wire::mplex::{self, Record, RecordRepr};
use concast_speckit::bundle::Bundle;
use concast_speckit::MAX_BUNDLE;

use crate::delays::BundleDelays;
use crate::input::Incoming;

/// Slots of the source set: a 4096-byte bundle holds at most 510 records (8 bytes each at
/// least), well inside three quarters of 1024.
const SOURCE_SLOTS: usize = 1024;

/// Why a packet cannot join the open bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A record's source is already in the bundle: its datagrams must not be reordered or
    /// coalesced, so the bundle goes first.
    SameSource,
    /// Its records would take the bundle past the path MTU (or the held-bytes budget).
    NoRoom,
}

pub struct MplexBundle {
    inner: Bundle<MAX_BUNDLE, SOURCE_SLOTS>,
    delays: BundleDelays,
    held_bytes: u32,
    max_held_bytes: u32,
}

impl MplexBundle {
    pub const fn new(max_held_bytes: u32) -> MplexBundle {
        MplexBundle {
            inner: Bundle::new(),
            delays: BundleDelays::new(),
            held_bytes: 0,
            max_held_bytes,
        }
    }

    /// Starts an empty bundle whose payload may be `limit` bytes (MplexHdr included).
    pub fn reset(&mut self, limit: usize) {
        self.inner.reset(mplex::HEADER_LEN, limit);
        self.delays = BundleDelays::new();
        self.held_bytes = 0;
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    pub fn records(&self) -> u32 {
        self.inner.items
    }

    pub fn contains_source(&self, src: u32) -> bool {
        self.inner.sources.contains(src)
    }

    /// True once not even an empty record fits.
    pub fn is_full(&self) -> bool {
        self.inner.buf.remaining() < mplex::RECORD_HEADER_LEN
    }

    /// Whether `packet` (`raw_len` bytes as it arrived) could join: no source already in the
    /// bundle, and room for its records and for the engine's copy of it.
    pub fn admits(&self, packet: &Incoming, raw_len: usize) -> Result<(), Refusal> {
        let inner = &self.inner;
        if packet
            .records()
            .any(|r| inner.sources.contains(r.src.to_bits()))
        {
            return Err(Refusal::SameSource);
        }
        let held = u64::from(self.held_bytes) + raw_len as u64;
        if packet.record_bytes > inner.buf.remaining()
            || inner.sources.len() + packet.live as usize > SourceSlots::CAPACITY
            || held > u64::from(self.max_held_bytes)
        {
            return Err(Refusal::NoRoom);
        }
        Ok(())
    }

    /// Adds `packet`'s records (after [`MplexBundle::admits`] said yes), arrived at `now`.
    pub fn add(&mut self, packet: &Incoming, raw_len: usize, now: u64) {
        for r in packet.records() {
            write_record(&mut self.inner.buf, &r);
            self.inner.sources.insert(r.src.to_bits());
            self.inner.note_arrival(now, r.ttl);
        }
        self.delays.fold(packet.delays, now);
        self.held_bytes = self.held_bytes.saturating_add(raw_len as u32);
    }

    /// When the bundle must leave (section 3.2); `None` while empty.
    pub fn deadline(&self) -> Option<u64> {
        Some(self.delays.deadline(self.inner.opened_at()?))
    }

    /// Arms the state's timer at `at` (only if it moved).
    pub fn arm(&mut self, host: &mut impl concast_sdk::Host, at: u64) {
        self.inner.arm(host, at);
    }

    /// The finished MplexPkt body sent at `now`, and its outer TTL (= initialTTL, the
    /// largest record TTL, section 3.1).
    pub fn finish(&mut self, now: u64) -> (&[u8], u8) {
        let ttl = self.inner.max_ttl;
        let header = self.delays.header(now, ttl);
        let body = self.inner.buf.as_mut_slice();
        mplex::Packet::new_unchecked(&mut body[..mplex::HEADER_LEN]).set_header(&header);
        (self.inner.buf.as_slice(), ttl)
    }
}

type SourceSlots = concast_speckit::sources::SourceSet<SOURCE_SLOTS>;

/// Appends one record (the caller checked that it fits).
fn write_record<const N: usize>(buf: &mut concast_speckit::buf::FixedBuf<N>, r: &RecordRepr) {
    let Some(out) = buf.reserve(r.record_len()) else {
        return;
    };
    let mut rec = Record::new_unchecked(out);
    rec.set_src_addr(r.src);
    rec.set_ttl(r.ttl);
    rec.set_protocol(r.protocol);
    rec.set_payload_len(r.payload.len() as u16);
    rec.payload_mut().copy_from_slice(r.payload);
}
