//! IPv4 header view (RFC 791) and the header checks of `docs/protocol.md` section 1.2.
//!
//! Concast lives in the IPv4 options area, so unlike most stacks this view treats options as
//! first-class: [`Packet::options`] is the raw area and [`Packet::options_iter`] walks it per
//! section 1.1.

use core::net::Ipv4Addr;
use core::ops::Range;

use crate::error::{BuildError, Error};
use crate::options;
use crate::{read_u16, write_u16};

/// Byte offsets of the IPv4 header fields, declared once.
pub mod field {
    use core::ops::Range;

    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
    /// Start of the options area; it ends at `IHL*4`.
    pub const OPTIONS: usize = 20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;
/// Largest options area (IHL 15).
pub const MAX_OPTIONS_LEN: usize = 40;
/// Largest IPv4 header.
pub const MAX_HEADER_LEN: usize = HEADER_LEN + MAX_OPTIONS_LEN;

/// IPv4 protocol numbers concast cares about.
pub mod protocol {
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    /// Concast Signalling Protocol (RFC 3692 experimental).
    pub const CSP: u8 = 253;
    /// MplexPkt (RFC 3692 experimental).
    pub const MPLEX: u8 = 254;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1FFF;

/// A zero-copy view of an IPv4 datagram.
///
/// After [`Packet::new_checked`] no accessor can panic. [`Packet::new_unchecked`] exists for
/// building into a fresh buffer; on it the fixed-field accessors panic if the buffer is shorter
/// than 20 bytes. The slice accessors ([`Packet::options`], [`Packet::payload`]) clamp to the
/// buffer, so they never panic even after a setter made IHL or total length inconsistent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer and applies every check of section 1.2, options walk included, so the
    /// error is the one every other concast parser reports for the same bytes.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        options::validate(packet.options())?;
        Ok(packet)
    }

    /// The structural checks of section 1.2 (`truncated` .. `bad_total_length`), without the
    /// options walk: enough for every accessor to be in bounds.
    pub fn check_len(&self) -> Result<(), Error> {
        let buf = self.buffer.as_ref();
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if buf[field::VER_IHL] >> 4 != 4 {
            return Err(Error::BadVersion);
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Error::BadIhl);
        }
        if header_len > buf.len() {
            return Err(Error::HeaderOverflow);
        }
        let total = usize::from(self.total_len());
        if total < header_len || total > buf.len() {
            return Err(Error::BadTotalLength);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole buffer, including any bytes after the total length (Ethernet padding).
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The datagram: the buffer cut at the total length (or at its end, if shorter).
    pub fn datagram(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[..usize::from(self.total_len()).min(buf.len())]
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// IHL in 32-bit words.
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] & 0x0F
    }

    /// IHL in bytes.
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }

    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH.start)
    }

    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT.start)
    }

    pub fn dont_frag(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF.start) & FLAG_DF != 0
    }

    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF.start) & FLAG_MF != 0
    }

    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::FLG_OFF.start) & FRAG_OFFSET_MASK
    }

    /// MF set or offset not 0: concast never merges or multiplexes these (section 3.4).
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(crate::read_array::<4>(
            self.buffer.as_ref(),
            field::SRC_ADDR.start,
        ))
    }

    /// For a concast datagram this is the receiver `R` of the flow `(R, G)`.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(crate::read_array::<4>(
            self.buffer.as_ref(),
            field::DST_ADDR.start,
        ))
    }

    /// The header bytes, `0 .. IHL*4` (clamped to the buffer).
    pub fn header(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[..self.header_len().min(buf.len())]
    }

    /// The options area, bytes `20 .. IHL*4` (clamped to the buffer; empty if IHL < 5).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[self.options_range()]
    }

    /// Where [`Packet::options`] lies in the buffer, to borrow it for the buffer's lifetime.
    pub fn options_range(&self) -> Range<usize> {
        let end = self.header_len().min(self.buffer.as_ref().len());
        field::OPTIONS.min(end)..end
    }

    /// Walks the options area per section 1.1.
    pub fn options_iter(&self) -> options::Iter<'_> {
        options::Iter::new(self.options())
    }

    /// The payload, `IHL*4 .. total length`: Ethernet padding after the total length is not
    /// part of it (section 1.2).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.payload_range()]
    }

    /// Where [`Packet::payload`] lies in the buffer, to borrow it for the buffer's lifetime.
    pub fn payload_range(&self) -> Range<usize> {
        let end = usize::from(self.total_len()).min(self.buffer.as_ref().len());
        self.header_len().min(end)..end
    }

    /// The checksum the header should carry (the checksum field taken as zero).
    pub fn compute_checksum(&self) -> u16 {
        let header = self.header();
        let sum = crate::ones_sum(header) + 0xFFFF - u32::from(self.checksum());
        !crate::fold(sum)
    }

    /// True if the header checksum is right. Not part of validity (section 1.2): data planes
    /// drop bad checksums before concast sees a datagram.
    pub fn verify_checksum(&self) -> bool {
        crate::fold(crate::ones_sum(self.header())) == 0xFFFF
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0F) | (version << 4);
    }

    /// IHL in 32-bit words.
    pub fn set_ihl(&mut self, ihl: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xF0) | (ihl & 0x0F);
    }

    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[field::TOS] = tos;
    }

    pub fn set_total_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH.start, len);
    }

    pub fn set_ident(&mut self, ident: u16) {
        write_u16(self.buffer.as_mut(), field::IDENT.start, ident);
    }

    /// Sets DF and MF and the fragment offset (8-byte units) in one go.
    pub fn set_flags_frag(&mut self, dont_frag: bool, more_frags: bool, frag_offset: u16) {
        let mut v = frag_offset & FRAG_OFFSET_MASK;
        if dont_frag {
            v |= FLAG_DF;
        }
        if more_frags {
            v |= FLAG_MF;
        }
        write_u16(self.buffer.as_mut(), field::FLG_OFF.start, v);
    }

    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    pub fn set_protocol(&mut self, protocol: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol;
    }

    pub fn set_checksum(&mut self, checksum: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM.start, checksum);
    }

    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Recomputes the header checksum over `0 .. IHL*4`.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = self.compute_checksum();
        self.set_checksum(c);
    }

    /// The options area, mutable (clamped like [`Packet::options`]).
    pub fn options_mut(&mut self) -> &mut [u8] {
        let range = self.options_range();
        &mut self.buffer.as_mut()[range]
    }

    /// The payload, mutable (clamped like [`Packet::payload`]).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.payload_range();
        &mut self.buffer.as_mut()[range]
    }

    /// Sets the TTL and patches the checksum incrementally (RFC 1624, eqn. 3) instead of
    /// summing the whole header again: routers do this per datagram, options included.
    pub fn update_ttl(&mut self, ttl: u8) {
        let proto = u16::from(self.protocol());
        let old = u16::from(self.ttl()) << 8 | proto;
        let new = u16::from(ttl) << 8 | proto;
        let c = incremental_update(self.checksum(), old, new);
        self.set_ttl(ttl);
        self.set_checksum(c);
    }

    /// Lowers the TTL by one with an incremental checksum update. Returns the new TTL, or
    /// `None` (datagram untouched) if it was already 0. A caller forwarding the datagram drops
    /// it when the result is 0.
    pub fn decrement_ttl(&mut self) -> Option<u8> {
        let ttl = self.ttl().checked_sub(1)?;
        self.update_ttl(ttl);
        Some(ttl)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// RFC 1624 eqn. 3: `HC' = ~(~HC + ~m + m')`, for one 16-bit word changing from `old` to `new`.
pub fn incremental_update(checksum: u16, old: u16, new: u16) -> u16 {
    let sum = u32::from(!checksum) + u32::from(!old) + u32::from(new);
    !crate::fold(sum)
}

/// The Internet checksum (RFC 1071) of `data`, ready to store.
pub fn checksum(data: &[u8]) -> u16 {
    !crate::fold(crate::ones_sum(data))
}

/// The one's-complement sum of the IPv4 pseudo-header (RFC 793, RFC 768): addresses,
/// protocol and the transport segment's length; folded, not inverted.
pub fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: usize) -> u16 {
    let sum = crate::ones_sum(&src.octets())
        + crate::ones_sum(&dst.octets())
        + u32::from(protocol)
        + crate::ones_sum(&(len as u16).to_be_bytes());
    crate::fold(sum)
}

/// The checksum a TCP or UDP `segment` (header and data) should carry between `src` and
/// `dst`, computed as if its 16-bit checksum field at `field` were zero, so the segment may
/// hold any value there (a stale or an offload-partial one). UDP sends a computed 0 as 0xFFFF
/// (0 means "no checksum"); for TCP the two are the same number and 0 is kept.
pub fn transport_checksum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, segment: &[u8], field: usize) -> u16 {
    let stored = segment.get(field..field + 2).map_or(0, |f| u16::from_be_bytes([f[0], f[1]]));
    // Subtracting in one's complement is adding the complement.
    let sum = u32::from(pseudo_header_sum(src, dst, protocol, segment.len()))
        + crate::ones_sum(segment)
        + u32::from(!stored);
    match !crate::fold(sum) {
        0 if protocol == protocol::UDP => 0xFFFF,
        c => c,
    }
}

/// Whether a TCP or UDP `segment` carries a checksum that verifies between `src` and `dst`
/// (what the receiving kernel checks).
pub fn transport_checksum_ok(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, segment: &[u8]) -> bool {
    let sum = u32::from(pseudo_header_sum(src, dst, protocol, segment.len())) + crate::ones_sum(segment);
    crate::fold(sum) == 0xFFFF
}

/// The IPv4 header fields other than lengths and options, for the builders.
///
/// Lengths, IHL and the checksum are always computed by the builder, never taken from here,
/// so a builder cannot emit an inconsistent header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Params {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    pub ttl: u8,
    pub tos: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    /// In 8-byte units.
    pub frag_offset: u16,
}

impl Params {
    /// TTL 64, DF set (concast datagrams are never fragmented by their senders), ident 0.
    pub const fn new(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8) -> Params {
        Params {
            src,
            dst,
            protocol,
            ttl: 64,
            tos: 0,
            ident: 0,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    }

    /// The fields of an existing header, to re-emit it.
    pub fn from_packet<T: AsRef<[u8]>>(p: &Packet<T>) -> Params {
        Params {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            ttl: p.ttl(),
            tos: p.tos(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
        }
    }
}

/// Writes an IPv4 header with `options` (padded with EOL to a multiple of 4) for a payload of
/// `payload_len` bytes that the caller has put or will put right after it. Fills the checksum.
/// Returns the header length. The options are written as given: use [`build`] or the
/// `build` module to get a checked datagram.
pub fn emit_header(
    buf: &mut [u8],
    params: &Params,
    options: &[u8],
    payload_len: usize,
) -> Result<usize, BuildError> {
    if options.len() > MAX_OPTIONS_LEN {
        return Err(BuildError::Oversize);
    }
    let header_len = HEADER_LEN + options.len().div_ceil(4) * 4;
    let total = header_len + payload_len;
    let total = u16::try_from(total).map_err(|_| BuildError::Oversize)?;
    if buf.len() < header_len {
        return Err(BuildError::BufferTooSmall);
    }
    let (header, _) = buf.split_at_mut(header_len);
    let opts = &mut header[field::OPTIONS..];
    opts[..options.len()].copy_from_slice(options);
    opts[options.len()..].fill(options::EOL);
    let mut p = Packet::new_unchecked(header);
    p.set_version(4);
    p.set_ihl((header_len / 4) as u8);
    p.set_tos(params.tos);
    p.set_total_len(total);
    p.set_ident(params.ident);
    p.set_flags_frag(params.dont_frag, params.more_frags, params.frag_offset);
    p.set_ttl(params.ttl);
    p.set_protocol(params.protocol);
    p.set_src_addr(params.src);
    p.set_dst_addr(params.dst);
    p.fill_checksum();
    Ok(header_len)
}

/// Writes a whole IPv4 datagram (header, `options` padded with EOL, `payload`) and checks that
/// its options walk cleanly. Returns the datagram length.
pub fn build(
    buf: &mut [u8],
    params: &Params,
    options: &[u8],
    payload: &[u8],
) -> Result<usize, BuildError> {
    let padded = options.len().div_ceil(4) * 4;
    if options.len() <= MAX_OPTIONS_LEN && buf.len() < HEADER_LEN + padded + payload.len() {
        return Err(BuildError::BufferTooSmall);
    }
    let header_len = emit_header(buf, params, options, payload.len())?;
    options::validate(&buf[field::OPTIONS..header_len])?;
    buf[header_len..header_len + payload.len()].copy_from_slice(payload);
    Ok(header_len + payload.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 791-style example datagram from the spec's own vectors: plain UDP, 10.0.1.1 -> 10.0.9.9.
    fn sample() -> [u8; 28] {
        let mut b = [0u8; 28];
        let params = Params {
            ident: 0x1234,
            ..Params::new(Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 9, 9), 17)
        };
        let n = build(&mut b, &params, &[], &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(n, 28);
        b
    }

    #[test]
    fn fields_and_checksum() {
        let b = sample();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.ihl(), 5);
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.ident(), 0x1234);
        assert!(p.dont_frag() && !p.more_frags() && p.frag_offset() == 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), 17);
        assert!(p.verify_checksum());
        assert_eq!(p.compute_checksum(), p.checksum());
        assert_eq!(p.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(p.options().is_empty());
    }

    #[test]
    fn header_checks_in_order() {
        let b = sample();
        assert_eq!(Packet::new_checked(&b[..19]).unwrap_err(), Error::Truncated);
        let mut v = b;
        v[0] = 0x65;
        assert_eq!(Packet::new_checked(&v[..]).unwrap_err(), Error::BadVersion);
        v[0] = 0x44;
        assert_eq!(Packet::new_checked(&v[..]).unwrap_err(), Error::BadIhl);
        v[0] = 0x48; // 32-byte header, 28 present
        assert_eq!(
            Packet::new_checked(&v[..]).unwrap_err(),
            Error::HeaderOverflow
        );
        let mut v = b;
        v[3] = 19;
        assert_eq!(
            Packet::new_checked(&v[..]).unwrap_err(),
            Error::BadTotalLength
        );
        v[3] = 29;
        assert_eq!(
            Packet::new_checked(&v[..]).unwrap_err(),
            Error::BadTotalLength
        );
    }

    #[test]
    fn ttl_decrement_is_incremental_and_correct() {
        let mut b = sample();
        let mut p = Packet::new_unchecked(&mut b[..]);
        for expect in (0..64).rev() {
            assert_eq!(p.decrement_ttl(), Some(expect));
            assert!(p.verify_checksum());
        }
        assert_eq!(p.decrement_ttl(), None);
        assert_eq!(p.ttl(), 0);
    }

    #[test]
    fn padding_is_not_payload() {
        let mut b = [0u8; 34];
        b[..28].copy_from_slice(&sample());
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload().len(), 8);
        assert_eq!(p.datagram().len(), 28);
    }
}
