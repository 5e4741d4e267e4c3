//! The MplexPkt body (`docs/protocol.md` section 3): a 16-byte MplexHdr, then
//! EncapsulatedPkt records back to back up to the IPv4 total length.
//!
//! Everything here works on the IPv4 payload of an MplexPkt (bytes `IHL*4 .. total length`).
//! The Concast ID option check belongs to the IPv4 layer and is done by [`crate::classify`].

use core::net::Ipv4Addr;

use crate::error::{BuildError, Error};
use crate::{ipv4, read_array, read_u16, read_u32, view, write_u16, write_u32};

/// Length of the MplexHdr.
pub const HEADER_LEN: usize = 16;
/// The MplexHdr Version this crate reads and writes: 1 added the record's TOS byte (version 0,
/// the first format, had 8-byte record headers and rebuilt every datagram with TOS 0).
pub const VERSION: u8 = 1;
/// Length of an EncapsulatedPkt record header.
pub const RECORD_HEADER_LEN: usize = 9;

/// Offsets of the MplexHdr.
pub mod field {
    use core::ops::Range;
    pub const INITIAL_TTL: usize = 0;
    pub const VERSION: usize = 1;
    pub const RESERVED: Range<usize> = 2..4;
    pub const MAX_TOTAL_DELAY: Range<usize> = 4..8;
    pub const DELAYED_SO_FAR: Range<usize> = 8..12;
    pub const MAX_LOCAL_DELAY: Range<usize> = 12..16;
    pub const RECORDS: usize = 16;
}

/// Offsets of an EncapsulatedPkt record.
pub mod record_field {
    use core::ops::Range;
    pub const SRC_ADDR: Range<usize> = 0..4;
    pub const TTL: usize = 4;
    pub const PROTOCOL: usize = 5;
    pub const PAYLOAD_LEN: Range<usize> = 6..8;
    pub const TOS: usize = 8;
    pub const PAYLOAD: usize = 9;
}

view! {
    /// An MplexPkt body: MplexHdr and records.
    Packet
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The MplexPkt checks of section 3 after the option check, in order.
    pub fn check(&self) -> Result<(), Error> {
        let buf = self.buffer.as_ref();
        if buf.len() < HEADER_LEN {
            return Err(Error::MplexTruncatedHeader);
        }
        if self.version() != VERSION {
            return Err(Error::MplexBadVersion);
        }
        if buf.len() == HEADER_LEN {
            return Err(Error::MplexZeroRecords);
        }
        RecordIter::new(&buf[HEADER_LEN..]).try_for_each(|r| r.map(|_| ()))
    }

    /// The outer TTL the MplexPkt was sent with; hops travelled = this minus the outer TTL now.
    pub fn initial_ttl(&self) -> u8 {
        self.buffer.as_ref()[field::INITIAL_TTL]
    }
    /// The format version; [`Packet::check`] accepts only [`VERSION`].
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    /// Microseconds, end to end, the records may be held for bundling.
    pub fn max_total_delay(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::MAX_TOTAL_DELAY.start)
    }
    /// Microseconds they have been held so far.
    pub fn delayed_so_far(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::DELAYED_SO_FAR.start)
    }
    /// Microseconds one node may hold them.
    pub fn max_local_delay(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::MAX_LOCAL_DELAY.start)
    }
    /// The header's values.
    pub fn header_repr(&self) -> HeaderRepr {
        HeaderRepr {
            initial_ttl: self.initial_ttl(),
            max_total_delay: self.max_total_delay(),
            delayed_so_far: self.delayed_so_far(),
            max_local_delay: self.max_local_delay(),
        }
    }
    /// The bytes after the MplexHdr.
    pub fn records_bytes(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[HEADER_LEN.min(b.len())..]
    }
    /// The records. On a checked packet every record is yielded; on an unchecked one the
    /// iteration stops silently at the first malformed record (use [`RecordIter`] to see it).
    pub fn records(&self) -> Records<'_> {
        Records(RecordIter::new(self.records_bytes()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_initial_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::INITIAL_TTL] = v;
    }
    pub fn set_max_total_delay(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::MAX_TOTAL_DELAY.start, v);
    }
    /// Grows at every node by the time it held the bundle (section 3.2).
    pub fn set_delayed_so_far(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::DELAYED_SO_FAR.start, v);
    }
    pub fn set_max_local_delay(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::MAX_LOCAL_DELAY.start, v);
    }
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RESERVED].fill(0);
    }
    /// Writes all header fields, Version [`VERSION`], and zeroes Reserved.
    pub fn set_header(&mut self, h: &HeaderRepr) {
        self.set_initial_ttl(h.initial_ttl);
        self.buffer.as_mut()[field::VERSION] = VERSION;
        self.clear_reserved();
        self.set_max_total_delay(h.max_total_delay);
        self.set_delayed_so_far(h.delayed_so_far);
        self.set_max_local_delay(h.max_local_delay);
    }
}

view! {
    /// One EncapsulatedPkt record: header and payload, exactly (no following bytes).
    Record
}

impl<T: AsRef<[u8]>> Record<T> {
    /// The buffer must be exactly the record: 9 bytes of header and PayloadLength bytes.
    pub fn check(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        if b.len() < RECORD_HEADER_LEN
            || b.len() - RECORD_HEADER_LEN != usize::from(self.payload_len())
        {
            return Err(Error::MplexRecordTruncated);
        }
        Ok(())
    }
    /// The original datagram's source.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_array::<4>(
            self.buffer.as_ref(),
            record_field::SRC_ADDR.start,
        ))
    }
    /// The original datagram's TTL when it was bundled.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[record_field::TTL]
    }
    /// The original datagram's protocol.
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[record_field::PROTOCOL]
    }
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), record_field::PAYLOAD_LEN.start)
    }
    /// The original datagram's TOS byte (DSCP and ECN), restored at the receiver.
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[record_field::TOS]
    }
    /// The original IPv4 payload (clamped to the buffer).
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let start = record_field::PAYLOAD.min(b.len());
        let end = (start + usize::from(self.payload_len())).min(b.len());
        &b[start..end]
    }
    /// Bytes the record takes in the MplexPkt.
    pub fn record_len(&self) -> usize {
        RECORD_HEADER_LEN + usize::from(self.payload_len())
    }
    /// The record's TTL after `hops` hops of the MplexPkt (section 3.3), `None` if it would
    /// have expired on a plain path (TTL' <= 0).
    pub fn ttl_after(&self, hops: u8) -> Option<u8> {
        self.ttl().checked_sub(hops).filter(|&t| t > 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Record<T> {
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[record_field::SRC_ADDR].copy_from_slice(&a.octets());
    }
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[record_field::TTL] = v;
    }
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[record_field::PROTOCOL] = v;
    }
    pub fn set_payload_len(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), record_field::PAYLOAD_LEN.start, v);
    }
    pub fn set_tos(&mut self, v: u8) {
        self.buffer.as_mut()[record_field::TOS] = v;
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let start = record_field::PAYLOAD.min(b.len());
        &mut b[start..]
    }
}

/// Walks the bytes after the MplexHdr, yielding each record or `mplex_record_truncated`
/// (then stopping). Works on any bytes.
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> RecordIter<'a> {
    pub const fn new(records: &'a [u8]) -> RecordIter<'a> {
        RecordIter {
            rest: records,
            failed: false,
        }
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<&'a [u8]>, Error>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let rest = self.rest;
        let total = rest
            .get(record_field::PAYLOAD_LEN)
            .map(|l| RECORD_HEADER_LEN + usize::from(u16::from_be_bytes([l[0], l[1]])))
            .filter(|&t| t <= rest.len());
        let Some(total) = total else {
            self.failed = true;
            return Some(Err(Error::MplexRecordTruncated));
        };
        let (rec, tail) = rest.split_at(total);
        self.rest = tail;
        Some(Ok(Record::new_unchecked(rec)))
    }
}

impl core::iter::FusedIterator for RecordIter<'_> {}

/// The records of a checked [`Packet`].
#[derive(Debug, Clone)]
pub struct Records<'a>(RecordIter<'a>);

impl<'a> Iterator for Records<'a> {
    type Item = Record<&'a [u8]>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()?.ok()
    }
}

impl core::iter::FusedIterator for Records<'_> {}

/// MplexHdr values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HeaderRepr {
    pub initial_ttl: u8,
    pub max_total_delay: u32,
    pub delayed_so_far: u32,
    pub max_local_delay: u32,
}

/// A record to append; `payload` is borrowed until written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordRepr<'a> {
    pub src: Ipv4Addr,
    pub ttl: u8,
    pub protocol: u8,
    /// DSCP and ECN bits of the original header.
    pub tos: u8,
    pub payload: &'a [u8],
}

impl<'a> RecordRepr<'a> {
    /// A plain datagram captured for bundling: its source, TTL, protocol, TOS and payload.
    pub fn from_ipv4<T: AsRef<[u8]>>(p: &'a ipv4::Packet<T>) -> RecordRepr<'a> {
        RecordRepr {
            src: p.src_addr(),
            ttl: p.ttl(),
            protocol: p.protocol(),
            tos: p.tos(),
            payload: p.payload(),
        }
    }

    /// The values of a record view.
    pub fn from_record(r: &'a Record<&'a [u8]>) -> RecordRepr<'a> {
        RecordRepr {
            src: r.src_addr(),
            ttl: r.ttl(),
            protocol: r.protocol(),
            tos: r.tos(),
            payload: r.payload(),
        }
    }

    /// Bytes the record takes.
    pub fn record_len(&self) -> usize {
        RECORD_HEADER_LEN + self.payload.len()
    }
}

/// Appends records after an MplexHdr in a caller's buffer, with no allocation.
///
/// The buffer is the MplexPkt body only; [`crate::build::MplexBuilder`] wraps this with the
/// IPv4 header. Records are written in the order pushed (section 3.1 asks for arrival order).
#[derive(Debug)]
pub struct BodyBuilder<'a> {
    buf: &'a mut [u8],
    len: usize,
    records: usize,
}

impl<'a> BodyBuilder<'a> {
    /// Writes the MplexHdr at the start of `buf`.
    pub fn new(buf: &'a mut [u8], header: &HeaderRepr) -> Result<BodyBuilder<'a>, BuildError> {
        let hdr = buf
            .get_mut(..HEADER_LEN)
            .ok_or(BuildError::BufferTooSmall)?;
        Packet::new_unchecked(hdr).set_header(header);
        Ok(BodyBuilder {
            buf,
            len: HEADER_LEN,
            records: 0,
        })
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: the MplexHdr is always there.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn record_count(&self) -> usize {
        self.records
    }

    /// Bytes left in the buffer.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.len
    }

    /// True if a record with `payload_len` bytes of payload still fits: what a bundler asks
    /// before deciding to hold or send.
    pub fn fits(&self, payload_len: usize) -> bool {
        RECORD_HEADER_LEN + payload_len <= self.remaining()
    }

    /// Appends one record. On error nothing is written.
    pub fn push(&mut self, r: &RecordRepr<'_>) -> Result<(), BuildError> {
        let plen = u16::try_from(r.payload.len()).map_err(|_| BuildError::Oversize)?;
        let end = self.len + r.record_len();
        let out = self
            .buf
            .get_mut(self.len..end)
            .ok_or(BuildError::BufferTooSmall)?;
        let mut rec = Record::new_unchecked(out);
        rec.set_src_addr(r.src);
        rec.set_ttl(r.ttl);
        rec.set_protocol(r.protocol);
        rec.set_payload_len(plen);
        rec.set_tos(r.tos);
        rec.payload_mut().copy_from_slice(r.payload);
        self.len = end;
        self.records += 1;
        Ok(())
    }

    /// Sets `initialTTL` after the fact (section 3.1: it is the largest record TTL, known only
    /// once all records are in).
    pub fn set_initial_ttl(&mut self, ttl: u8) {
        self.buf[field::INITIAL_TTL] = ttl;
    }

    /// Sets `DelayedSoFar` at send time.
    pub fn set_delayed_so_far(&mut self, v: u32) {
        write_u32(self.buf, field::DELAYED_SO_FAR.start, v);
    }

    /// The body length; refuses a body without records (`mplex_zero_records`).
    pub fn finish(self) -> Result<usize, BuildError> {
        if self.records == 0 {
            return Err(BuildError::Invalid(Error::MplexZeroRecords));
        }
        Ok(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);

    #[test]
    fn build_and_walk() {
        let mut buf = [0u8; 64];
        let hdr = HeaderRepr {
            initial_ttl: 64,
            max_total_delay: 20000,
            delayed_so_far: 1200,
            max_local_delay: 2000,
        };
        let empty = BodyBuilder::new(&mut buf, &hdr).unwrap();
        assert_eq!(
            empty.finish(),
            Err(BuildError::Invalid(Error::MplexZeroRecords))
        );
        let mut b = BodyBuilder::new(&mut buf, &hdr).unwrap();
        b.push(&RecordRepr {
            src: S,
            ttl: 63,
            protocol: 6,
            tos: 0xB9, // DSCP EF, ECN ECT(1)
            payload: &[1, 2, 3],
        })
        .unwrap();
        b.push(&RecordRepr {
            src: S,
            ttl: 9,
            protocol: 17,
            tos: 0,
            payload: &[],
        })
        .unwrap();
        assert!(b.fits(64 - 16 - 12 - 9 - 9));
        assert!(!b.fits(64 - 16 - 12 - 9 - 9 + 1));
        let n = b.finish().unwrap();
        assert_eq!(n, 16 + 12 + 9);
        let p = Packet::new_checked(&buf[..n]).unwrap();
        assert_eq!((p.header_repr(), p.version()), (hdr, VERSION));
        let mut rs = p.records();
        let r = rs.next().unwrap();
        assert_eq!(
            (r.src_addr(), r.ttl(), r.protocol(), r.tos(), r.payload()),
            (S, 63, 6, 0xB9, &[1, 2, 3][..])
        );
        assert_eq!(r.ttl_after(2), Some(61));
        let r = rs.next().unwrap();
        assert_eq!(r.payload_len(), 0);
        assert_eq!(r.ttl_after(9), None);
        assert!(rs.next().is_none());
    }

    #[test]
    fn checks_in_order() {
        let mut buf = [0u8; 64];
        let n = {
            let mut b = BodyBuilder::new(&mut buf, &HeaderRepr::default()).unwrap();
            b.push(&RecordRepr {
                src: S,
                ttl: 1,
                protocol: 6,
                tos: 0,
                payload: &[0; 20],
            })
            .unwrap();
            b.finish().unwrap()
        };
        assert_eq!(
            Packet::new_checked(&buf[..10]).unwrap_err(),
            Error::MplexTruncatedHeader
        );
        assert_eq!(
            Packet::new_checked(&buf[..16]).unwrap_err(),
            Error::MplexZeroRecords
        );
        for v in [0, 2] {
            let mut old = buf;
            old[field::VERSION] = v;
            assert_eq!(
                Packet::new_checked(&old[..n]).unwrap_err(),
                Error::MplexBadVersion,
                "version {v}"
            );
        }
        assert_eq!(
            Packet::new_checked(&buf[..n - 1]).unwrap_err(),
            Error::MplexRecordTruncated
        );
        assert_eq!(
            Packet::new_checked(&buf[..n + 5]).unwrap_err(),
            Error::MplexRecordTruncated
        );
        assert!(Packet::new_checked(&buf[..n + 9]).is_ok()); // an empty record of zeros
    }

    #[test]
    fn builder_never_writes_past_buffer() {
        let mut buf = [0u8; 30];
        let mut b = BodyBuilder::new(&mut buf, &HeaderRepr::default()).unwrap();
        let r = RecordRepr {
            src: S,
            ttl: 1,
            protocol: 6,
            tos: 0,
            payload: &[0; 6],
        };
        assert_eq!(b.push(&r), Err(BuildError::BufferTooSmall));
        assert_eq!(b.len(), 16);
        assert!(BodyBuilder::new(&mut [0u8; 15], &HeaderRepr::default()).is_err());
    }
}
