//! One MplexPkt being filled: MplexHdr space, records in arrival order, its delay fields, the
//! raw bytes the engine holds for it and its place in the opening order (`seq`).

use concast_sdk::wire::mplex::{self, Record, RecordRepr};
use concast_speckit::arena::Arena;
use concast_speckit::buf::ArenaBuf;

use crate::delays::BundleDelays;
use crate::input::Incoming;

/// Whether `packet`'s records fit in an empty bundle with `limit` bytes of payload (what the
/// path MTU allows, `payload_limit`).
pub fn fits_empty(packet: &Incoming, limit: usize) -> bool {
    mplex::HEADER_LEN + packet.record_bytes <= limit
}

/// Most records a bundle of `capacity` bytes holds: every record takes at least its header.
pub fn max_records(capacity: usize) -> usize {
    capacity / mplex::RECORD_HEADER_LEN
}

pub struct MplexBundle {
    /// Sized once, at init, for the path MTU then; `reset` sets the limit of the moment.
    buf: ArenaBuf,
    records: u32,
    max_ttl: u8,
    opened_at: Option<u64>,
    armed: Option<u64>,
    delays: BundleDelays,
    held_bytes: u32,
    /// Opening order (1, 2, ...); 0 while empty.
    pub seq: u64,
}

impl MplexBundle {
    /// An empty bundle whose payload (MplexHdr included) is built in `bytes` (zeroed).
    pub fn new(bytes: Arena<u8>) -> MplexBundle {
        MplexBundle {
            buf: ArenaBuf::from_arena(bytes),
            records: 0,
            max_ttl: 0,
            opened_at: None,
            armed: None,
            delays: BundleDelays::new(),
            held_bytes: 0,
            seq: 0,
        }
    }

    /// Starts an empty bundle whose payload may be `limit` bytes (MplexHdr included).
    pub fn reset(&mut self, limit: usize) {
        self.buf.reset(mplex::HEADER_LEN, limit);
        self.records = 0;
        self.max_ttl = 0;
        self.opened_at = None;
        self.armed = None;
        self.delays = BundleDelays::new();
        self.held_bytes = 0;
        self.seq = 0;
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    pub fn records(&self) -> u32 {
        self.records
    }

    pub fn held_bytes(&self) -> u32 {
        self.held_bytes
    }

    /// True once not even an empty record fits.
    pub fn is_full(&self) -> bool {
        self.buf.remaining() < mplex::RECORD_HEADER_LEN
    }

    /// Whether `packet`'s records fit in the room left.
    pub fn has_room(&self, packet: &Incoming) -> bool {
        packet.record_bytes <= self.buf.remaining()
    }

    /// Adds `packet`'s records (the caller checked the room), arrived at `now`; `on_record`
    /// sees each record added.
    pub fn add(
        &mut self,
        packet: &Incoming,
        raw_len: usize,
        now: u64,
        mut on_record: impl FnMut(&RecordRepr),
    ) {
        for r in packet.records() {
            write_record(&mut self.buf, &r);
            on_record(&r);
            self.opened_at.get_or_insert(now);
            self.records += 1;
            self.max_ttl = self.max_ttl.max(r.ttl);
        }
        self.delays.fold(packet.delays, now);
        self.held_bytes = self.held_bytes.saturating_add(raw_len as u32);
    }

    /// When the bundle must leave (section 3.2); `None` while empty.
    pub fn deadline(&self) -> Option<u64> {
        Some(self.delays.deadline(self.opened_at?))
    }

    /// When the tightest record's MaxTotalDelay budget runs out; `None` while empty.
    pub fn budget_deadline(&self) -> Option<u64> {
        self.delays.budget_deadline()
    }

    /// Arms the state's timer at `at` unless it is armed there already.
    pub fn arm(&mut self, host: &mut impl concast_sdk::Host, at: u64) {
        if self.armed != Some(at) {
            host.set_timer(at);
            self.armed = Some(at);
        }
    }

    /// The records so far (for the key index when the bundle leaves).
    pub fn record_iter(&self) -> mplex::RecordIter<'_> {
        mplex::RecordIter::new(&self.buf.as_slice()[mplex::HEADER_LEN..])
    }

    /// The finished MplexPkt body sent at `now`, and its outer TTL (= initialTTL, the
    /// largest record TTL, section 3.1).
    pub fn finish(&mut self, now: u64) -> (&[u8], u8) {
        let ttl = self.max_ttl;
        let header = self.delays.header(now, ttl);
        let body = self.buf.as_mut_slice();
        mplex::Packet::new_unchecked(&mut body[..mplex::HEADER_LEN]).set_header(&header);
        (self.buf.as_slice(), ttl)
    }
}

/// Appends one record (the caller checked that it fits).
fn write_record(buf: &mut ArenaBuf, r: &RecordRepr) {
    let Some(out) = buf.reserve(r.record_len()) else {
        return;
    };
    let mut rec = Record::new_unchecked(out);
    rec.set_src_addr(r.src);
    rec.set_ttl(r.ttl);
    rec.set_protocol(r.protocol);
    rec.set_payload_len(r.payload.len() as u16);
    rec.set_tos(r.tos);
    rec.payload_mut().copy_from_slice(r.payload);
}
