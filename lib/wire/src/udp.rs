//! UDP (RFC 768). Concast itself never looks inside UDP; hosts build and check it, and merge
//! specs that rewrite their flow's payload (gather, NAK suppression) read and write it.
//!
//! The checksum covers the IPv4 pseudo-header ([`ipv4::pseudo_header_sum`]); 0 on the wire
//! means "no checksum", which IPv4 allows, so a computed 0 is sent as 0xFFFF.

use core::net::Ipv4Addr;

use crate::ipv4::{self, protocol};
use crate::{read_u16, write_u16};

/// Bytes of the UDP header.
pub const HEADER_LEN: usize = 8;

/// Byte offsets of the header fields, declared once.
mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// A view of a UDP datagram (header and payload) in an IPv4 payload.
///
/// After [`Packet::new_checked`] no accessor can panic; [`Packet::new_unchecked`] is for
/// building into a buffer of at least [`HEADER_LEN`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps an IPv4 payload; `None` if it is shorter than the header, or the length field is
    /// below the header or beyond the buffer.
    pub fn new_checked(buffer: T) -> Option<Packet<T>> {
        let buf = buffer.as_ref();
        if buf.len() < HEADER_LEN {
            return None;
        }
        let len = usize::from(read_u16(buf, field::LENGTH));
        if !(HEADER_LEN..=buf.len()).contains(&len) {
            return None;
        }
        Some(Packet { buffer })
    }

    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// The length field: header and payload.
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Header and payload, cut at the length field (clamped to the buffer).
    pub fn datagram(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[..usize::from(self.len()).clamp(HEADER_LEN.min(buf.len()), buf.len())]
    }

    /// The payload, cut at the length field.
    pub fn payload(&self) -> &[u8] {
        &self.datagram()[HEADER_LEN.min(self.buffer.as_ref().len())..]
    }

    /// True if the datagram carries no checksum (0) or one that verifies between `src` and
    /// `dst`: what a receiving kernel accepts.
    pub fn checksum_ok(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == 0 || ipv4::transport_checksum_ok(src, dst, protocol::UDP, self.datagram())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, port: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    pub fn set_dst_port(&mut self, port: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, port);
    }

    pub fn set_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_checksum(&mut self, checksum: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, checksum);
    }

    /// Computes and stores the checksum of header and payload between `src` and `dst`.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let c = ipv4::transport_checksum(src, dst, protocol::UDP, self.datagram(), field::CHECKSUM);
        self.set_checksum(c);
    }

    /// The payload, writable, cut at the length field.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.datagram().len();
        &mut self.buffer.as_mut()[HEADER_LEN.min(end)..end]
    }
}

/// Writes a UDP header for `payload_len` bytes of payload into `buf[..8]`, checksum 0 (none):
/// fill it with [`Packet::fill_checksum`] once the payload is in place, or leave it 0 where
/// the sender's checksum cannot hold (a merged datagram's source is the merging node).
pub fn emit_header(buf: &mut [u8], src_port: u16, dst_port: u16, payload_len: usize) {
    let mut p = Packet::new_unchecked(&mut buf[..HEADER_LEN]);
    p.set_src_port(src_port);
    p.set_dst_port(dst_port);
    p.set_len((HEADER_LEN + payload_len) as u16);
    p.set_checksum(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 2);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 1, 2, 2);

    fn datagram(payload: &[u8], buf: &mut [u8]) -> usize {
        let n = HEADER_LEN + payload.len();
        emit_header(buf, 4000, 5000, payload.len());
        buf[HEADER_LEN..n].copy_from_slice(payload);
        Packet::new_unchecked(&mut buf[..n]).fill_checksum(SRC, DST);
        n
    }

    #[test]
    fn a_built_datagram_reads_back_and_its_checksum_verifies() {
        let mut buf = [0u8; 64];
        let n = datagram(b"hello", &mut buf);
        let p = Packet::new_checked(&buf[..n]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (4000, 5000, 13));
        assert_eq!(p.payload(), b"hello");
        assert_ne!(p.checksum(), 0);
        assert!(p.checksum_ok(SRC, DST));
        assert!(!p.checksum_ok(SRC, Ipv4Addr::new(10, 1, 2, 3)), "the pseudo-header counts");
    }

    #[test]
    fn a_flipped_payload_bit_fails_the_checksum_and_zero_means_none() {
        let mut buf = [0u8; 64];
        let n = datagram(b"hello", &mut buf);
        buf[HEADER_LEN] ^= 1;
        assert!(!Packet::new_checked(&buf[..n]).unwrap().checksum_ok(SRC, DST));
        Packet::new_unchecked(&mut buf[..n]).set_checksum(0);
        assert!(Packet::new_checked(&buf[..n]).unwrap().checksum_ok(SRC, DST));
    }

    #[test]
    fn the_payload_stops_at_the_length_field_and_bad_lengths_are_refused() {
        let mut buf = [0u8; 64];
        let n = datagram(b"abc", &mut buf);
        let padded = Packet::new_checked(&buf[..n + 4]).unwrap();
        assert_eq!(padded.payload(), b"abc", "bytes after the length are not payload");
        assert!(Packet::new_checked(&buf[..7]).is_none(), "shorter than the header");
        assert!(Packet::new_checked(&buf[..n - 1]).is_none(), "length beyond the buffer");
        let mut short = buf;
        Packet::new_unchecked(&mut short[..]).set_len(7);
        assert!(Packet::new_checked(&short[..n]).is_none(), "length below the header");
    }

    #[test]
    fn a_checksum_that_sums_to_zero_is_sent_as_all_ones() {
        // Search a 2-byte payload whose checksum computes to 0: it must go out as 0xFFFF.
        let mut buf = [0u8; 16];
        let found = (0..=u16::MAX).find_map(|v| {
            datagram(&v.to_be_bytes(), &mut buf);
            let p = Packet::new_checked(&buf[..10]).unwrap();
            (p.checksum() == 0xFFFF).then_some(p.checksum_ok(SRC, DST))
        });
        assert_eq!(found, Some(true));
    }
}
