//! Concast Signalling Protocol messages (`docs/protocol.md` section 2).
//!
//! A CSP message is the payload of an IPv4 datagram with protocol 253 and a Router Alert
//! option. The Router Alert check belongs to the IPv4 layer and is done by
//! [`crate::classify`]; everything in this module works on the IPv4 payload alone, which must
//! be passed exactly (Length must equal it, so trailing bytes are an error, not padding).
//!
//! [`Packet`] is the common header view, the `*Body` types view each message body, [`Message`]
//! is a checked header plus its decoded body, and [`Repr`] builds messages.

use core::net::Ipv4Addr;
use core::ops::Range;

use crate::error::{BuildError, Error};
use crate::{read_array, read_u16, read_u32, view, write_u16, write_u32};

/// The only CSP version.
pub const VERSION: u8 = 1;
/// Length of the common header.
pub const HEADER_LEN: usize = 16;
/// Length of a SHA-256 spec hash.
pub const HASH_LEN: usize = 32;
/// Merge specs move in chunks of this many bytes (the last one shorter).
pub const CHUNK_SIZE: usize = 1024;
/// Largest merge spec, 1 MiB.
pub const MAX_SPEC_SIZE: u32 = 1_048_576;
/// Largest chunk count (`MAX_SPEC_SIZE / CHUNK_SIZE`); also the bound on a requested index.
pub const MAX_CHUNKS: u16 = 1024;
/// Longest ERROR reason.
pub const MAX_REASON_LEN: usize = 200;

/// A SHA-256 spec hash; all zero in JOIN means "holds no spec".
pub type SpecHash = [u8; HASH_LEN];

/// The hash a merge spec is named by everywhere: SHA-256 of its module bytes.
#[cfg(feature = "hash")]
pub fn sha256(spec: &[u8]) -> SpecHash {
    use sha2::Digest;
    sha2::Sha256::digest(spec).into()
}

/// Length of an Ed25519 public key.
pub const KEY_LEN: usize = 32;
/// Length of an Ed25519 signature.
pub const SIG_LEN: usize = 64;
/// The signature trailer of a signed JOIN_ACK or SPEC_UPDATE: key, then signature (2.9).
pub const SIG_TRAILER_LEN: usize = KEY_LEN + SIG_LEN;
/// First bytes of every signed message, so a spec signature is never valid as anything else.
pub const SIG_CONTEXT: &[u8; 16] = b"concast-spec-v1\0";
/// Length of the signed message: context, R, G, spec size, spec hash.
pub const SIGNED_LEN: usize = 16 + 4 + 4 + 4 + HASH_LEN;

/// R's signature over a spec (docs/protocol.md 2.9): the receiver's Ed25519 public key and
/// its signature over [`signed_message`]. The wire crate only carries it; checking it is CSP's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpecSig {
    pub key: [u8; KEY_LEN],
    pub sig: [u8; SIG_LEN],
}

/// The bytes R signs for the spec `(size, hash)` of flow `(receiver, group)`. R and G are in it
/// so a signature cannot be replayed for another flow; the size so a signed hash cannot be
/// offered with a size that makes the fetch fail or ask for more chunks than the spec has.
pub fn signed_message(receiver: Ipv4Addr, group: u32, spec_size: u32, spec_hash: &SpecHash) -> [u8; SIGNED_LEN] {
    let mut m = [0u8; SIGNED_LEN];
    m[..16].copy_from_slice(SIG_CONTEXT);
    m[16..20].copy_from_slice(&receiver.octets());
    m[20..24].copy_from_slice(&group.to_be_bytes());
    m[24..28].copy_from_slice(&spec_size.to_be_bytes());
    m[28..].copy_from_slice(spec_hash);
    m
}

/// The trailer after a fixed body of `len` bytes, if the body has one.
fn trailer_at(body: &[u8], len: usize) -> Option<SpecSig> {
    let t = body.get(len..len + SIG_TRAILER_LEN)?;
    Some(SpecSig {
        key: t[..KEY_LEN].try_into().expect("32-byte slice"),
        sig: t[KEY_LEN..].try_into().expect("64-byte slice"),
    })
}

fn write_trailer(body: &mut [u8], len: usize, s: &SpecSig) {
    body[len..len + KEY_LEN].copy_from_slice(&s.key);
    body[len + KEY_LEN..len + SIG_TRAILER_LEN].copy_from_slice(&s.sig);
}

/// A fixed body, with or without the signature trailer.
fn fixed_or_signed_len(body: &[u8], len: usize) -> Result<(), Error> {
    if body.len() == len || body.len() == len + SIG_TRAILER_LEN {
        Ok(())
    } else {
        Err(Error::CspBadLength)
    }
}

/// Offsets of the common header.
pub mod field {
    use core::ops::Range;

    pub const VERSION: usize = 0;
    pub const TYPE: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const GROUP: Range<usize> = 4..8;
    pub const RECEIVER: Range<usize> = 8..12;
    pub const SEQ: Range<usize> = 12..16;
    pub const BODY: usize = 16;
}

/// CSP message types (section 2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MessageType {
    Join = 1,
    JoinAck = 2,
    Refresh = 3,
    Leave = 4,
    SpecRequest = 5,
    SpecChunk = 6,
    SpecUpdate = 7,
    Error = 8,
}

impl MessageType {
    pub const fn from_u8(v: u8) -> Option<MessageType> {
        Some(match v {
            1 => MessageType::Join,
            2 => MessageType::JoinAck,
            3 => MessageType::Refresh,
            4 => MessageType::Leave,
            5 => MessageType::SpecRequest,
            6 => MessageType::SpecChunk,
            7 => MessageType::SpecUpdate,
            8 => MessageType::Error,
            _ => return None,
        })
    }

    /// The spec's name (`"JOIN"`, `"SPEC_CHUNK"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            MessageType::Join => "JOIN",
            MessageType::JoinAck => "JOIN_ACK",
            MessageType::Refresh => "REFRESH",
            MessageType::Leave => "LEAVE",
            MessageType::SpecRequest => "SPEC_REQUEST",
            MessageType::SpecChunk => "SPEC_CHUNK",
            MessageType::SpecUpdate => "SPEC_UPDATE",
            MessageType::Error => "ERROR",
        }
    }
}

impl core::fmt::Display for MessageType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// ERROR codes (section 2.7). Other codes are valid on the wire and shown as "unknown".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum ErrorCode {
    NoSpec = 1,
    SpecRejected = 2,
    UnknownFlow = 3,
    SpecNotFound = 4,
    Malformed = 5,
    FlowQuarantined = 6,
    ResourceLimit = 7,
}

impl ErrorCode {
    pub const fn from_u16(v: u16) -> Option<ErrorCode> {
        Some(match v {
            1 => ErrorCode::NoSpec,
            2 => ErrorCode::SpecRejected,
            3 => ErrorCode::UnknownFlow,
            4 => ErrorCode::SpecNotFound,
            5 => ErrorCode::Malformed,
            6 => ErrorCode::FlowQuarantined,
            7 => ErrorCode::ResourceLimit,
            _ => return None,
        })
    }

    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::NoSpec => "NO_SPEC",
            ErrorCode::SpecRejected => "SPEC_REJECTED",
            ErrorCode::UnknownFlow => "UNKNOWN_FLOW",
            ErrorCode::SpecNotFound => "SPEC_NOT_FOUND",
            ErrorCode::Malformed => "MALFORMED",
            ErrorCode::FlowQuarantined => "FLOW_QUARANTINED",
            ErrorCode::ResourceLimit => "RESOURCE_LIMIT",
        }
    }

    /// The name of any code, `"unknown"` for codes the spec does not define.
    pub const fn name_of(code: u16) -> &'static str {
        match ErrorCode::from_u16(code) {
            Some(c) => c.name(),
            None => "unknown",
        }
    }
}

/// `ceil(size / 1024)`, or `None` if `size` is 0 or above 1 MiB (`csp_chunk_out_of_range`).
pub const fn chunk_count(spec_size: u32) -> Option<u16> {
    if spec_size == 0 || spec_size > MAX_SPEC_SIZE {
        return None;
    }
    Some(spec_size.div_ceil(CHUNK_SIZE as u32) as u16)
}

/// The byte range of chunk `index` in a spec of `spec_size` bytes, or `None` if out of range.
pub fn chunk_range(spec_size: u32, index: u16) -> Option<Range<usize>> {
    let count = chunk_count(spec_size)?;
    if index >= count {
        return None;
    }
    let start = usize::from(index) * CHUNK_SIZE;
    Some(start..(start + CHUNK_SIZE).min(spec_size as usize))
}

fn hash_at(buf: &[u8], at: usize) -> &SpecHash {
    // In bounds for every checked view; the conversion of an exact-length slice cannot fail.
    buf[at..at + HASH_LEN].try_into().expect("32-byte slice")
}

fn fixed_len(body: &[u8], len: usize) -> Result<(), Error> {
    if body.len() == len {
        Ok(())
    } else {
        Err(Error::CspBadLength)
    }
}

// ------------------------------------------------------------------ common header

view! {
    /// The CSP common header over a whole CSP message (the IPv4 payload).
    Packet
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The checks of section 2.1 in order (Router Alert excepted), then the body's own.
    pub fn check(&self) -> Result<(), Error> {
        self.check_header()?;
        Body::parse(self.msg_type_checked()?, self.body()).map(|_| ())
    }

    /// Section 2.1 up to the trailing-bytes check, without looking into the body.
    fn check_header(&self) -> Result<(), Error> {
        let buf = self.buffer.as_ref();
        if buf.len() < HEADER_LEN || usize::from(self.length()) > buf.len() {
            return Err(Error::CspTruncated);
        }
        if self.version() != VERSION {
            return Err(Error::CspBadVersion);
        }
        self.msg_type_checked()?;
        if usize::from(self.length()) < buf.len() {
            return Err(Error::CspBadLength);
        }
        Ok(())
    }

    fn msg_type_checked(&self) -> Result<MessageType, Error> {
        MessageType::from_u8(self.msg_type_raw()).ok_or(Error::CspUnknownType)
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The type byte as sent.
    pub fn msg_type_raw(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// The type; `None` only on an unchecked view with an unknown type.
    pub fn msg_type(&self) -> Option<MessageType> {
        MessageType::from_u8(self.msg_type_raw())
    }

    /// Header plus body, in bytes.
    pub fn length(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// `G` of the flow the message is about.
    pub fn group(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::GROUP.start)
    }

    /// `R` of the flow the message is about; carried because replies travel away from `R`.
    pub fn receiver(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_array::<4>(self.buffer.as_ref(), field::RECEIVER.start))
    }

    /// Chosen by a request's sender; replies copy it.
    pub fn seq(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::SEQ.start)
    }

    /// Bytes `16 .. Length` (clamped to the buffer).
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[self.body_range()]
    }

    /// Where [`Packet::body`] lies in the buffer, to borrow it for the buffer's lifetime.
    pub fn body_range(&self) -> Range<usize> {
        let end = usize::from(self.length()).min(self.buffer.as_ref().len());
        field::BODY.min(end)..end
    }

    /// Decodes the body; always `Ok` on a checked view.
    pub fn decode_body(&self) -> Result<Body<'_>, Error> {
        Body::parse(self.msg_type_checked()?, self.body())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }
    pub fn set_msg_type(&mut self, t: u8) {
        self.buffer.as_mut()[field::TYPE] = t;
    }
    pub fn set_length(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH.start, len);
    }
    pub fn set_group(&mut self, g: u32) {
        write_u32(self.buffer.as_mut(), field::GROUP.start, g);
    }
    pub fn set_receiver(&mut self, r: Ipv4Addr) {
        self.buffer.as_mut()[field::RECEIVER].copy_from_slice(&r.octets());
    }
    pub fn set_seq(&mut self, seq: u32) {
        write_u32(self.buffer.as_mut(), field::SEQ.start, seq);
    }
    /// Bytes after the header (to the end of the buffer, ignoring Length, for building).
    pub fn body_mut(&mut self) -> &mut [u8] {
        let buf = self.buffer.as_mut();
        let start = field::BODY.min(buf.len());
        &mut buf[start..]
    }
}

// ------------------------------------------------------------------ bodies

/// Offsets of the JOIN and REFRESH body (section 2.2).
pub mod join_field {
    use core::ops::Range;
    pub const HOLD_TIME: Range<usize> = 0..2;
    pub const SELECTOR_PROTO: usize = 2;
    /// Was reserved; bit 0 (0x80) is the S flag, the other bits stay reserved.
    pub const FLAGS: usize = 3;
    /// S: the joiner reads signature trailers (sections 2.2 and 2.9).
    pub const FLAG_SIGNED: u8 = 0x80;
    pub const SELECTOR_DPORT: Range<usize> = 4..6;
    pub const RESERVED2: Range<usize> = 6..8;
    pub const SPEC_HASH: Range<usize> = 8..40;
    pub const LEN: usize = 40;
}

view! {
    /// JOIN (1) and REFRESH (3) body.
    JoinBody
}

impl<T: AsRef<[u8]>> JoinBody<T> {
    pub fn check(&self) -> Result<(), Error> {
        fixed_len(self.buffer.as_ref(), join_field::LEN)
    }
    /// Seconds the upstream keeps the joiner's state without a refresh; 0 = its default.
    pub fn hold_time(&self) -> u16 {
        read_u16(self.buffer.as_ref(), join_field::HOLD_TIME.start)
    }
    /// IPv4 protocol of the flow's datagrams, 0 = any (for data planes blind to options).
    pub fn selector_proto(&self) -> u8 {
        self.buffer.as_ref()[join_field::SELECTOR_PROTO]
    }
    /// UDP/TCP destination port of the flow's datagrams, 0 = any.
    pub fn selector_dport(&self) -> u16 {
        read_u16(self.buffer.as_ref(), join_field::SELECTOR_DPORT.start)
    }
    /// The S flag: the joiner reads signed JOIN_ACKs and SPEC_UPDATEs (section 2.2).
    pub fn signed(&self) -> bool {
        self.buffer.as_ref()[join_field::FLAGS] & join_field::FLAG_SIGNED != 0
    }
    /// SHA-256 of the spec the joiner holds; all zero = none.
    pub fn spec_hash(&self) -> &SpecHash {
        hash_at(self.buffer.as_ref(), join_field::SPEC_HASH.start)
    }
    pub fn holds_spec(&self) -> bool {
        self.spec_hash() != &[0; HASH_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> JoinBody<T> {
    pub fn set_hold_time(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), join_field::HOLD_TIME.start, v);
    }
    pub fn set_selector_proto(&mut self, v: u8) {
        self.buffer.as_mut()[join_field::SELECTOR_PROTO] = v;
    }
    pub fn set_selector_dport(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), join_field::SELECTOR_DPORT.start, v);
    }
    /// Writes the flags byte: S if `signed`, the reserved bits zero.
    pub fn set_signed(&mut self, signed: bool) {
        self.buffer.as_mut()[join_field::FLAGS] = if signed { join_field::FLAG_SIGNED } else { 0 };
    }
    pub fn set_spec_hash(&mut self, h: &SpecHash) {
        self.buffer.as_mut()[join_field::SPEC_HASH].copy_from_slice(h);
    }
}

/// Offsets of the JOIN_ACK body (section 2.3).
pub mod join_ack_field {
    use core::ops::Range;
    pub const HOLD_TIME: Range<usize> = 0..2;
    /// Reserved (zero) in the first version-1 nodes; now the path MTU, 0 = not known.
    pub const PATH_MTU: Range<usize> = 2..4;
    pub const SPEC_SIZE: Range<usize> = 4..8;
    pub const SPEC_HASH: Range<usize> = 8..40;
    /// Unsigned length; a signed JOIN_ACK adds the 96-byte trailer (key, signature).
    pub const LEN: usize = 40;
    pub const SIGNED_LEN: usize = LEN + super::SIG_TRAILER_LEN;
}

view! {
    /// JOIN_ACK (2) body.
    JoinAckBody
}

impl<T: AsRef<[u8]>> JoinAckBody<T> {
    /// The spec leaves size and hash unchecked here: the joiner learns them and the
    /// SPEC_CHUNK checks catch an impossible size when it fetches.
    pub fn check(&self) -> Result<(), Error> {
        fixed_or_signed_len(self.buffer.as_ref(), join_ack_field::LEN)
    }
    /// R's signature over the named spec, if the JOIN_ACK carries one.
    pub fn signature(&self) -> Option<SpecSig> {
        trailer_at(self.buffer.as_ref(), join_ack_field::LEN)
    }
    pub fn hold_time(&self) -> u16 {
        read_u16(self.buffer.as_ref(), join_ack_field::HOLD_TIME.start)
    }
    /// The smallest MTU on the path from the sender of the JOIN_ACK to R, including its
    /// link toward the joiner (section 2.3); 0 = not known (a node that predates the field).
    pub fn path_mtu(&self) -> u16 {
        read_u16(self.buffer.as_ref(), join_ack_field::PATH_MTU.start)
    }
    pub fn spec_size(&self) -> u32 {
        read_u32(self.buffer.as_ref(), join_ack_field::SPEC_SIZE.start)
    }
    pub fn spec_hash(&self) -> &SpecHash {
        hash_at(self.buffer.as_ref(), join_ack_field::SPEC_HASH.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> JoinAckBody<T> {
    pub fn set_hold_time(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), join_ack_field::HOLD_TIME.start, v);
    }
    pub fn set_path_mtu(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), join_ack_field::PATH_MTU.start, v);
    }
    pub fn set_spec_size(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), join_ack_field::SPEC_SIZE.start, v);
    }
    pub fn set_spec_hash(&mut self, h: &SpecHash) {
        self.buffer.as_mut()[join_ack_field::SPEC_HASH].copy_from_slice(h);
    }
    /// Writes the trailer; the body must be `SIGNED_LEN` long.
    pub fn set_signature(&mut self, s: &SpecSig) {
        write_trailer(self.buffer.as_mut(), join_ack_field::LEN, s);
    }
}

/// Offsets of the SPEC_REQUEST body (section 2.5).
pub mod spec_request_field {
    use core::ops::Range;
    pub const SPEC_HASH: Range<usize> = 0..32;
    pub const CHUNK_INDEX: Range<usize> = 32..34;
    pub const RESERVED: Range<usize> = 34..36;
    pub const LEN: usize = 36;
}

view! {
    /// SPEC_REQUEST (5) body.
    SpecRequestBody
}

impl<T: AsRef<[u8]>> SpecRequestBody<T> {
    pub fn check(&self) -> Result<(), Error> {
        fixed_len(self.buffer.as_ref(), spec_request_field::LEN)?;
        if self.chunk_index() >= MAX_CHUNKS {
            return Err(Error::CspChunkOutOfRange);
        }
        Ok(())
    }
    pub fn spec_hash(&self) -> &SpecHash {
        hash_at(self.buffer.as_ref(), spec_request_field::SPEC_HASH.start)
    }
    pub fn chunk_index(&self) -> u16 {
        read_u16(self.buffer.as_ref(), spec_request_field::CHUNK_INDEX.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SpecRequestBody<T> {
    pub fn set_spec_hash(&mut self, h: &SpecHash) {
        self.buffer.as_mut()[spec_request_field::SPEC_HASH].copy_from_slice(h);
    }
    pub fn set_chunk_index(&mut self, v: u16) {
        write_u16(
            self.buffer.as_mut(),
            spec_request_field::CHUNK_INDEX.start,
            v,
        );
    }
}

/// Offsets of the SPEC_CHUNK body (section 2.5).
pub mod spec_chunk_field {
    use core::ops::Range;
    pub const SPEC_HASH: Range<usize> = 0..32;
    pub const SPEC_SIZE: Range<usize> = 32..36;
    pub const CHUNK_INDEX: Range<usize> = 36..38;
    pub const CHUNK_COUNT: Range<usize> = 38..40;
    pub const DATA: usize = 40;
    /// Body length without data.
    pub const MIN_LEN: usize = 40;
}

view! {
    /// SPEC_CHUNK (6) body: fixed part and chunk data.
    SpecChunkBody
}

impl<T: AsRef<[u8]>> SpecChunkBody<T> {
    /// Section 2.5, in its order: body length, then size/count/index, then data length.
    pub fn check(&self) -> Result<(), Error> {
        let body = self.buffer.as_ref();
        if body.len() < spec_chunk_field::MIN_LEN {
            return Err(Error::CspBadLength);
        }
        let count = chunk_count(self.spec_size()).ok_or(Error::CspChunkOutOfRange)?;
        if self.chunk_count() != count || self.chunk_index() >= count {
            return Err(Error::CspChunkOutOfRange);
        }
        let expect = chunk_range(self.spec_size(), self.chunk_index()).map(|r| r.len());
        if expect != Some(self.data().len()) {
            return Err(Error::CspBadLength);
        }
        Ok(())
    }
    pub fn spec_hash(&self) -> &SpecHash {
        hash_at(self.buffer.as_ref(), spec_chunk_field::SPEC_HASH.start)
    }
    pub fn spec_size(&self) -> u32 {
        read_u32(self.buffer.as_ref(), spec_chunk_field::SPEC_SIZE.start)
    }
    pub fn chunk_index(&self) -> u16 {
        read_u16(self.buffer.as_ref(), spec_chunk_field::CHUNK_INDEX.start)
    }
    pub fn chunk_count(&self) -> u16 {
        read_u16(self.buffer.as_ref(), spec_chunk_field::CHUNK_COUNT.start)
    }
    /// The chunk's bytes; they belong at [`SpecChunkBody::offset`] in the spec.
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[spec_chunk_field::DATA.min(b.len())..]
    }
    /// Where the data goes in the reassembled spec.
    pub fn offset(&self) -> usize {
        usize::from(self.chunk_index()) * CHUNK_SIZE
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SpecChunkBody<T> {
    pub fn set_spec_hash(&mut self, h: &SpecHash) {
        self.buffer.as_mut()[spec_chunk_field::SPEC_HASH].copy_from_slice(h);
    }
    pub fn set_spec_size(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), spec_chunk_field::SPEC_SIZE.start, v);
    }
    pub fn set_chunk_index(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), spec_chunk_field::CHUNK_INDEX.start, v);
    }
    pub fn set_chunk_count(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), spec_chunk_field::CHUNK_COUNT.start, v);
    }
    pub fn data_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let start = spec_chunk_field::DATA.min(b.len());
        &mut b[start..]
    }
}

/// Offsets of the SPEC_UPDATE body (section 2.6). Note the order differs from JOIN_ACK: size
/// first, then hash.
pub mod spec_update_field {
    use core::ops::Range;
    pub const SPEC_SIZE: Range<usize> = 0..4;
    pub const SPEC_HASH: Range<usize> = 4..36;
    /// Unsigned length; a signed SPEC_UPDATE adds the 96-byte trailer (key, signature).
    pub const LEN: usize = 36;
    pub const SIGNED_LEN: usize = LEN + super::SIG_TRAILER_LEN;
}

view! {
    /// SPEC_UPDATE (7) body.
    SpecUpdateBody
}

impl<T: AsRef<[u8]>> SpecUpdateBody<T> {
    pub fn check(&self) -> Result<(), Error> {
        fixed_or_signed_len(self.buffer.as_ref(), spec_update_field::LEN)?;
        chunk_count(self.spec_size()).ok_or(Error::CspChunkOutOfRange)?;
        Ok(())
    }
    /// R's signature over the new spec, if the SPEC_UPDATE carries one.
    pub fn signature(&self) -> Option<SpecSig> {
        trailer_at(self.buffer.as_ref(), spec_update_field::LEN)
    }
    pub fn spec_size(&self) -> u32 {
        read_u32(self.buffer.as_ref(), spec_update_field::SPEC_SIZE.start)
    }
    pub fn spec_hash(&self) -> &SpecHash {
        hash_at(self.buffer.as_ref(), spec_update_field::SPEC_HASH.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SpecUpdateBody<T> {
    pub fn set_spec_size(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), spec_update_field::SPEC_SIZE.start, v);
    }
    pub fn set_spec_hash(&mut self, h: &SpecHash) {
        self.buffer.as_mut()[spec_update_field::SPEC_HASH].copy_from_slice(h);
    }
    /// Writes the trailer; the body must be `SIGNED_LEN` long.
    pub fn set_signature(&mut self, s: &SpecSig) {
        write_trailer(self.buffer.as_mut(), spec_update_field::LEN, s);
    }
}

/// Offsets of the ERROR body (section 2.7).
pub mod error_field {
    use core::ops::Range;
    pub const CODE: Range<usize> = 0..2;
    pub const OFFENDING_TYPE: usize = 2;
    pub const RESERVED: usize = 3;
    pub const REASON: usize = 4;
    /// Body length without reason.
    pub const MIN_LEN: usize = 4;
}

view! {
    /// ERROR (8) body.
    ErrorBody
}

impl<T: AsRef<[u8]>> ErrorBody<T> {
    /// Length only: unknown codes are valid, and the spec gives no error name for a reason
    /// that is not UTF-8, so it is not checked (see [`ErrorBody::reason_str`]).
    pub fn check(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < error_field::MIN_LEN || len - error_field::MIN_LEN > MAX_REASON_LEN {
            return Err(Error::CspBadLength);
        }
        Ok(())
    }
    /// Raw code; see [`ErrorCode::from_u16`].
    pub fn code(&self) -> u16 {
        read_u16(self.buffer.as_ref(), error_field::CODE.start)
    }
    pub fn error_code(&self) -> Option<ErrorCode> {
        ErrorCode::from_u16(self.code())
    }
    /// Type of the message the error answers (0 when it answers none, e.g. quarantine).
    pub fn offending_type(&self) -> u8 {
        self.buffer.as_ref()[error_field::OFFENDING_TYPE]
    }
    pub fn reason(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[error_field::REASON.min(b.len())..]
    }
    /// The reason as text, `None` if it is not UTF-8.
    pub fn reason_str(&self) -> Option<&str> {
        core::str::from_utf8(self.reason()).ok()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ErrorBody<T> {
    pub fn set_code(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), error_field::CODE.start, v);
    }
    pub fn set_offending_type(&mut self, v: u8) {
        self.buffer.as_mut()[error_field::OFFENDING_TYPE] = v;
    }
    pub fn reason_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let start = error_field::REASON.min(b.len());
        &mut b[start..]
    }
}

/// A checked message body, by type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    Join(JoinBody<&'a [u8]>),
    JoinAck(JoinAckBody<&'a [u8]>),
    Refresh(JoinBody<&'a [u8]>),
    Leave,
    SpecRequest(SpecRequestBody<&'a [u8]>),
    SpecChunk(SpecChunkBody<&'a [u8]>),
    SpecUpdate(SpecUpdateBody<&'a [u8]>),
    Error(ErrorBody<&'a [u8]>),
}

impl<'a> Body<'a> {
    /// Checks `body` (bytes `16 .. Length`) by the rules of its type.
    pub fn parse(msg_type: MessageType, body: &'a [u8]) -> Result<Body<'a>, Error> {
        Ok(match msg_type {
            MessageType::Join => Body::Join(JoinBody::new_checked(body)?),
            MessageType::JoinAck => Body::JoinAck(JoinAckBody::new_checked(body)?),
            MessageType::Refresh => Body::Refresh(JoinBody::new_checked(body)?),
            MessageType::Leave => {
                fixed_len(body, 0)?;
                Body::Leave
            }
            MessageType::SpecRequest => Body::SpecRequest(SpecRequestBody::new_checked(body)?),
            MessageType::SpecChunk => Body::SpecChunk(SpecChunkBody::new_checked(body)?),
            MessageType::SpecUpdate => Body::SpecUpdate(SpecUpdateBody::new_checked(body)?),
            MessageType::Error => Body::Error(ErrorBody::new_checked(body)?),
        })
    }

    pub fn msg_type(&self) -> MessageType {
        match self {
            Body::Join(_) => MessageType::Join,
            Body::JoinAck(_) => MessageType::JoinAck,
            Body::Refresh(_) => MessageType::Refresh,
            Body::Leave => MessageType::Leave,
            Body::SpecRequest(_) => MessageType::SpecRequest,
            Body::SpecChunk(_) => MessageType::SpecChunk,
            Body::SpecUpdate(_) => MessageType::SpecUpdate,
            Body::Error(_) => MessageType::Error,
        }
    }
}

/// A checked CSP message: the header view and its decoded body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub header: Packet<&'a [u8]>,
    pub body: Body<'a>,
}

impl<'a> Message<'a> {
    /// Applies section 2.1 and the body rules to `payload`, the IPv4 payload exactly.
    pub fn parse(payload: &'a [u8]) -> Result<Message<'a>, Error> {
        let header = Packet::new_unchecked(payload);
        header.check_header()?;
        let msg_type = header.msg_type_checked()?;
        let body = Body::parse(msg_type, &payload[header.body_range()])?;
        Ok(Message { header, body })
    }

    pub fn msg_type(&self) -> MessageType {
        self.body.msg_type()
    }
    pub fn group(&self) -> u32 {
        self.header.group()
    }
    pub fn receiver(&self) -> Ipv4Addr {
        self.header.receiver()
    }
    pub fn seq(&self) -> u32 {
        self.header.seq()
    }
}

// ------------------------------------------------------------------ building

/// JOIN / REFRESH fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JoinRepr {
    pub hold_time: u16,
    pub selector_proto: u8,
    pub selector_dport: u16,
    pub spec_hash: SpecHash,
    /// The S flag (section 2.2).
    pub signed: bool,
}

/// JOIN_ACK fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JoinAckRepr {
    pub hold_time: u16,
    /// 0 = not known.
    pub path_mtu: u16,
    pub spec_size: u32,
    pub spec_hash: SpecHash,
    /// R's signature trailer (None: unsigned).
    pub signature: Option<SpecSig>,
}

/// SPEC_REQUEST fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpecRequestRepr {
    pub spec_hash: SpecHash,
    pub chunk_index: u16,
}

/// SPEC_CHUNK fields; `data` is borrowed, not copied, until emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpecChunkRepr<'a> {
    pub spec_hash: SpecHash,
    pub spec_size: u32,
    pub chunk_index: u16,
    pub chunk_count: u16,
    pub data: &'a [u8],
}

impl<'a> SpecChunkRepr<'a> {
    /// Chunk `index` of `spec`, with size and count derived; `None` if out of range.
    pub fn of_spec(spec: &'a [u8], spec_hash: SpecHash, index: u16) -> Option<Self> {
        let size = u32::try_from(spec.len()).ok()?;
        let range = chunk_range(size, index)?;
        Some(SpecChunkRepr {
            spec_hash,
            spec_size: size,
            chunk_index: index,
            chunk_count: chunk_count(size)?,
            data: &spec[range],
        })
    }
}

/// SPEC_UPDATE fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpecUpdateRepr {
    pub spec_size: u32,
    pub spec_hash: SpecHash,
    /// R's signature trailer (None: unsigned).
    pub signature: Option<SpecSig>,
}

/// ERROR fields; `reason` is borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorRepr<'a> {
    pub code: u16,
    pub offending_type: u8,
    pub reason: &'a [u8],
}

/// A message body to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BodyRepr<'a> {
    Join(JoinRepr),
    JoinAck(JoinAckRepr),
    Refresh(JoinRepr),
    Leave,
    SpecRequest(SpecRequestRepr),
    SpecChunk(SpecChunkRepr<'a>),
    SpecUpdate(SpecUpdateRepr),
    Error(ErrorRepr<'a>),
}

impl BodyRepr<'_> {
    pub fn msg_type(&self) -> MessageType {
        match self {
            BodyRepr::Join(_) => MessageType::Join,
            BodyRepr::JoinAck(_) => MessageType::JoinAck,
            BodyRepr::Refresh(_) => MessageType::Refresh,
            BodyRepr::Leave => MessageType::Leave,
            BodyRepr::SpecRequest(_) => MessageType::SpecRequest,
            BodyRepr::SpecChunk(_) => MessageType::SpecChunk,
            BodyRepr::SpecUpdate(_) => MessageType::SpecUpdate,
            BodyRepr::Error(_) => MessageType::Error,
        }
    }

    /// Body length in bytes.
    pub fn len(&self) -> usize {
        match self {
            BodyRepr::Join(_) | BodyRepr::Refresh(_) => join_field::LEN,
            BodyRepr::JoinAck(a) => join_ack_field::LEN + a.signature.map_or(0, |_| SIG_TRAILER_LEN),
            BodyRepr::Leave => 0,
            BodyRepr::SpecRequest(_) => spec_request_field::LEN,
            BodyRepr::SpecChunk(c) => spec_chunk_field::MIN_LEN + c.data.len(),
            BodyRepr::SpecUpdate(u) => spec_update_field::LEN + u.signature.map_or(0, |_| SIG_TRAILER_LEN),
            BodyRepr::Error(e) => error_field::MIN_LEN + e.reason.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A whole CSP message to emit (or as decoded, with reserved fields dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    pub group: u32,
    pub receiver: Ipv4Addr,
    pub seq: u32,
    pub body: BodyRepr<'a>,
}

impl<'a> Repr<'a> {
    /// The values of a checked message.
    pub fn parse(m: &Message<'a>) -> Repr<'a> {
        let body = match m.body {
            Body::Join(b) | Body::Refresh(b) => {
                let j = JoinRepr {
                    hold_time: b.hold_time(),
                    selector_proto: b.selector_proto(),
                    selector_dport: b.selector_dport(),
                    spec_hash: *b.spec_hash(),
                    signed: b.signed(),
                };
                if matches!(m.body, Body::Join(_)) {
                    BodyRepr::Join(j)
                } else {
                    BodyRepr::Refresh(j)
                }
            }
            Body::JoinAck(b) => BodyRepr::JoinAck(JoinAckRepr {
                hold_time: b.hold_time(),
                path_mtu: b.path_mtu(),
                spec_size: b.spec_size(),
                spec_hash: *b.spec_hash(),
                signature: b.signature(),
            }),
            Body::Leave => BodyRepr::Leave,
            Body::SpecRequest(b) => BodyRepr::SpecRequest(SpecRequestRepr {
                spec_hash: *b.spec_hash(),
                chunk_index: b.chunk_index(),
            }),
            Body::SpecChunk(b) => BodyRepr::SpecChunk(SpecChunkRepr {
                spec_hash: *b.spec_hash(),
                spec_size: b.spec_size(),
                chunk_index: b.chunk_index(),
                chunk_count: b.chunk_count(),
                data: b.into_inner().get(spec_chunk_field::DATA..).unwrap_or(&[]),
            }),
            Body::SpecUpdate(b) => BodyRepr::SpecUpdate(SpecUpdateRepr {
                spec_size: b.spec_size(),
                spec_hash: *b.spec_hash(),
                signature: b.signature(),
            }),
            Body::Error(b) => BodyRepr::Error(ErrorRepr {
                code: b.code(),
                offending_type: b.offending_type(),
                reason: b.into_inner().get(error_field::REASON..).unwrap_or(&[]),
            }),
        };
        Repr {
            group: m.group(),
            receiver: m.receiver(),
            seq: m.seq(),
            body,
        }
    }

    /// Length of the emitted message.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.body.len()
    }

    /// Writes the message at the start of `buf` and returns its length. The result is parsed
    /// back before returning, so a builder can never put a malformed message on the wire
    /// (e.g. a 201-byte reason gives `Invalid(CspBadLength)`).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BuildError> {
        let len = self.buffer_len();
        let wire_len = u16::try_from(len).map_err(|_| BuildError::Oversize)?;
        let out = buf.get_mut(..len).ok_or(BuildError::BufferTooSmall)?;
        out.fill(0);
        let mut p = Packet::new_unchecked(&mut *out);
        p.set_version(VERSION);
        p.set_msg_type(self.body.msg_type() as u8);
        p.set_length(wire_len);
        p.set_group(self.group);
        p.set_receiver(self.receiver);
        p.set_seq(self.seq);
        let body = &mut out[HEADER_LEN..];
        match &self.body {
            BodyRepr::Join(j) | BodyRepr::Refresh(j) => {
                let mut b = JoinBody::new_unchecked(body);
                b.set_hold_time(j.hold_time);
                b.set_selector_proto(j.selector_proto);
                b.set_selector_dport(j.selector_dport);
                b.set_spec_hash(&j.spec_hash);
                b.set_signed(j.signed);
            }
            BodyRepr::JoinAck(a) => {
                let mut b = JoinAckBody::new_unchecked(body);
                b.set_hold_time(a.hold_time);
                b.set_path_mtu(a.path_mtu);
                b.set_spec_size(a.spec_size);
                b.set_spec_hash(&a.spec_hash);
                if let Some(s) = &a.signature {
                    b.set_signature(s);
                }
            }
            BodyRepr::Leave => {}
            BodyRepr::SpecRequest(r) => {
                let mut b = SpecRequestBody::new_unchecked(body);
                b.set_spec_hash(&r.spec_hash);
                b.set_chunk_index(r.chunk_index);
            }
            BodyRepr::SpecChunk(c) => {
                let mut b = SpecChunkBody::new_unchecked(body);
                b.set_spec_hash(&c.spec_hash);
                b.set_spec_size(c.spec_size);
                b.set_chunk_index(c.chunk_index);
                b.set_chunk_count(c.chunk_count);
                b.data_mut().copy_from_slice(c.data);
            }
            BodyRepr::SpecUpdate(u) => {
                let mut b = SpecUpdateBody::new_unchecked(body);
                b.set_spec_size(u.spec_size);
                b.set_spec_hash(&u.spec_hash);
                if let Some(s) = &u.signature {
                    b.set_signature(s);
                }
            }
            BodyRepr::Error(e) => {
                let mut b = ErrorBody::new_unchecked(body);
                b.set_code(e.code);
                b.set_offending_type(e.offending_type);
                b.reason_mut().copy_from_slice(e.reason);
            }
        }
        Message::parse(&buf[..len])?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Ipv4Addr = Ipv4Addr::new(10, 0, 9, 9);

    fn emit(body: BodyRepr<'_>, buf: &mut [u8]) -> Result<usize, BuildError> {
        Repr {
            group: 7,
            receiver: R,
            seq: 0x0A0B_0C0D,
            body,
        }
        .emit(buf)
    }

    #[test]
    fn leave_bytes() {
        let mut buf = [0u8; 64];
        let n = emit(BodyRepr::Leave, &mut buf).unwrap();
        assert_eq!(
            &buf[..n],
            &[1, 4, 0, 16, 0, 0, 0, 7, 10, 0, 9, 9, 0x0A, 0x0B, 0x0C, 0x0D]
        );
        let m = Message::parse(&buf[..n]).unwrap();
        assert_eq!(m.msg_type(), MessageType::Leave);
        assert_eq!(m.group(), 7);
        assert_eq!(m.receiver(), R);
        assert_eq!(Packet::new_checked(&buf[..n]).unwrap().seq(), 0x0A0B_0C0D);
    }

    #[test]
    fn join_ack_carries_the_path_mtu_where_reserved_was() {
        let mut buf = [0u8; 64];
        let ack = JoinAckRepr {
            hold_time: 30,
            path_mtu: 9000,
            spec_size: 0x0102_0304,
            spec_hash: [0xAB; 32],
            signature: None,
        };
        let n = emit(BodyRepr::JoinAck(ack), &mut buf).unwrap();
        assert_eq!(n, 56);
        assert_eq!(&buf[16..24], &[0, 30, 0x23, 0x28, 1, 2, 3, 4]);
        let m = Message::parse(&buf[..n]).unwrap();
        let Body::JoinAck(b) = m.body else {
            panic!("not a JOIN_ACK")
        };
        assert_eq!((b.hold_time(), b.path_mtu()), (30, 9000));
        // A node that predates the field sends zero there: "not known".
        let old = JoinAckRepr { path_mtu: 0, ..ack };
        emit(BodyRepr::JoinAck(old), &mut buf).unwrap();
        assert_eq!(&buf[18..20], &[0, 0]);
    }

    #[test]
    fn header_checks_in_order() {
        let mut buf = [0u8; 64];
        let n = emit(BodyRepr::Leave, &mut buf).unwrap();
        assert_eq!(Message::parse(&buf[..10]).unwrap_err(), Error::CspTruncated);
        let mut v = buf;
        v[3] = 17;
        assert_eq!(Message::parse(&v[..n]).unwrap_err(), Error::CspTruncated);
        let mut v = buf;
        v[0] = 2;
        assert_eq!(Message::parse(&v[..n]).unwrap_err(), Error::CspBadVersion);
        v[1] = 9; // version is checked before type
        assert_eq!(Message::parse(&v[..n]).unwrap_err(), Error::CspBadVersion);
        let mut v = buf;
        v[1] = 0;
        assert_eq!(Message::parse(&v[..n]).unwrap_err(), Error::CspUnknownType);
        assert_eq!(
            Message::parse(&buf[..n + 1]).unwrap_err(),
            Error::CspBadLength
        );
    }

    #[test]
    fn chunking() {
        assert_eq!(chunk_count(0), None);
        assert_eq!(chunk_count(1), Some(1));
        assert_eq!(chunk_count(1024), Some(1));
        assert_eq!(chunk_count(1025), Some(2));
        assert_eq!(chunk_count(MAX_SPEC_SIZE), Some(MAX_CHUNKS));
        assert_eq!(chunk_count(MAX_SPEC_SIZE + 1), None);
        assert_eq!(chunk_range(2500, 2), Some(2048..2500));
        assert_eq!(chunk_range(2500, 3), None);

        let spec = [0x5Au8; 2500];
        let mut buf = [0u8; 2000];
        for i in 0..3 {
            let c = SpecChunkRepr::of_spec(&spec, [1; 32], i).unwrap();
            let n = emit(BodyRepr::SpecChunk(c), &mut buf).unwrap();
            let m = Message::parse(&buf[..n]).unwrap();
            let Body::SpecChunk(b) = m.body else { panic!() };
            assert_eq!(b.chunk_count(), 3);
            assert_eq!(b.offset(), usize::from(i) * 1024);
            assert_eq!(b.data().len(), if i < 2 { 1024 } else { 452 });
        }
        assert!(SpecChunkRepr::of_spec(&spec, [1; 32], 3).is_none());
        // A builder refuses to emit a chunk with the wrong amount of data.
        let bad = SpecChunkRepr {
            data: &spec[..1000],
            ..SpecChunkRepr::of_spec(&spec, [1; 32], 0).unwrap()
        };
        assert_eq!(
            emit(BodyRepr::SpecChunk(bad), &mut buf),
            Err(BuildError::Invalid(Error::CspBadLength))
        );
    }

    #[test]
    fn error_reason_limit() {
        let mut buf = [0u8; 300];
        let reason = [b'r'; 201];
        let e = |r| {
            BodyRepr::Error(ErrorRepr {
                code: 5,
                offending_type: 1,
                reason: r,
            })
        };
        assert_eq!(emit(e(&reason[..200]), &mut buf), Ok(220));
        assert_eq!(
            emit(e(&reason), &mut buf),
            Err(BuildError::Invalid(Error::CspBadLength))
        );
        assert_eq!(
            emit(e(&reason), &mut buf[..100]),
            Err(BuildError::BufferTooSmall)
        );
        assert_eq!(ErrorCode::name_of(99), "unknown");
        assert_eq!(ErrorCode::name_of(4), "SPEC_NOT_FOUND");
    }

    #[test]
    fn request_and_update_ranges() {
        let mut buf = [0u8; 64];
        let req = |i| {
            BodyRepr::SpecRequest(SpecRequestRepr {
                spec_hash: [0; 32],
                chunk_index: i,
            })
        };
        assert!(emit(req(1023), &mut buf).is_ok());
        assert_eq!(
            emit(req(1024), &mut buf),
            Err(BuildError::Invalid(Error::CspChunkOutOfRange))
        );
        let upd = |s| {
            BodyRepr::SpecUpdate(SpecUpdateRepr {
                spec_size: s,
                spec_hash: [0; 32],
                signature: None,
            })
        };
        assert!(emit(upd(MAX_SPEC_SIZE), &mut buf).is_ok());
        assert_eq!(
            emit(upd(0), &mut buf),
            Err(BuildError::Invalid(Error::CspChunkOutOfRange))
        );
        assert_eq!(
            emit(upd(MAX_SPEC_SIZE + 1), &mut buf),
            Err(BuildError::Invalid(Error::CspChunkOutOfRange))
        );
    }

    #[test]
    fn signed_join_ack_and_spec_update_carry_key_then_signature_after_the_fixed_body() {
        let sig = SpecSig { key: [0x11; KEY_LEN], sig: [0x22; SIG_LEN] };
        let mut buf = [0u8; 256];
        let ack = JoinAckRepr { hold_time: 30, path_mtu: 0, spec_size: 10, spec_hash: [0xAB; 32], signature: Some(sig) };
        let n = emit(BodyRepr::JoinAck(ack), &mut buf).unwrap();
        assert_eq!(n, HEADER_LEN + join_ack_field::SIGNED_LEN);
        assert_eq!(&buf[56..88], &[0x11; 32]);
        assert_eq!(&buf[88..152], &[0x22; 64]);
        let m = Message::parse(&buf[..n]).unwrap();
        assert_eq!(Repr::parse(&m).body, BodyRepr::JoinAck(ack));
        let upd = SpecUpdateRepr { spec_size: 10, spec_hash: [0xAB; 32], signature: Some(sig) };
        let n = emit(BodyRepr::SpecUpdate(upd), &mut buf).unwrap();
        assert_eq!(n, HEADER_LEN + spec_update_field::SIGNED_LEN);
        let m = Message::parse(&buf[..n]).unwrap();
        assert_eq!(Repr::parse(&m).body, BodyRepr::SpecUpdate(upd));
        // Any other length is neither form: a cut trailer is csp_bad_length.
        let n = emit(BodyRepr::JoinAck(ack), &mut buf).unwrap();
        let cut = n - 1;
        buf[2..4].copy_from_slice(&(cut as u16).to_be_bytes());
        assert_eq!(Message::parse(&buf[..cut]).unwrap_err(), Error::CspBadLength);
    }

    #[test]
    fn the_signed_message_is_context_r_g_size_hash() {
        let m = signed_message(R, 0x0102_0304, 0x0A0B_0C0D, &[0xEE; 32]);
        assert_eq!(&m[..16], b"concast-spec-v1\0");
        assert_eq!(&m[16..28], &[10, 0, 9, 9, 1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D]);
        assert_eq!(&m[28..], &[0xEE; 32]);
    }
}
