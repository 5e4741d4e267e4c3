//! The MTP header (docs/transport.md, "MTP"): 24 bytes, then the request's name or the
//! reply's payload. Decoding is total: a datagram decodes or yields a `WireError` saying why.
use std::fmt;

pub const MAGIC: u8 = 0xC9;
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 24;
/// Largest reply payload: a UDP datagram's 65507 bytes less the header.
pub const MAX_PAYLOAD: usize = 65507 - HEADER_LEN;
/// Longest object name a request may carry (ours).
pub const MAX_NAME: usize = 1024;

/// Request: no payload wanted, only the reply header (size, end). Reply: payload suppressed.
pub const F_NOPAYLOAD: u8 = 0x01;
/// Reply: this datagram reaches the end of the object.
pub const F_END: u8 = 0x02;
/// Reply: the object is streamed; its total is not known yet (total field 0).
pub const F_STREAM: u8 = 0x04;
/// Reply: the server refuses the request; the payload is the reason (UTF-8).
pub const F_ERROR: u8 = 0x08;
/// Reply: the channel names the object, later subrequests may leave the name out (ch. V
/// "Payload Suppression"). With `F_ERROR`: the channel of a name-less request names nothing
/// the server knows (mtp.h `ERR_APP_CHANNEL`); the client asks again with the name.
pub const F_CHANNEL: u8 = 0x10;
const REQ_FLAGS: u8 = F_NOPAYLOAD;
const REPLY_FLAGS: u8 = F_NOPAYLOAD | F_END | F_STREAM | F_ERROR | F_CHANNEL;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Request = 1,
    Reply = 2,
}

/// The fixed header. `length`: request, bytes wanted per reply datagram; reply, payload bytes
/// (the bytes that would have been sent when the payload is suppressed). `namelen`: request,
/// its name's length; reply, the server's response limit per request (ch. V "Mechanisms",
/// `limit_of_reply`; 0: none). `total`: reply, the object's size (0 while streamed); request,
/// its response limit (ch. V "Mechanisms": the bytes the server may send for it in all, in
/// datagrams of at most `length`; 0: one datagram of `length`, as before the limit existed).
/// `stamp`: set by the client on every send, echoed by the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub flags: u8,
    pub channel: u8,
    pub txid: u32,
    pub offset: u32,
    pub length: u16,
    pub namelen: u16,
    pub total: u32,
    pub stamp: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    Short(usize),
    Magic(u8),
    Version(u8),
    Kind(u8),
    Flags(u8),
    Field(&'static str),
    Length { header_says: usize, got: usize },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            WireError::Short(n) => write!(f, "datagram of {n} bytes is shorter than the {HEADER_LEN}-byte header"),
            WireError::Magic(m) => write!(f, "magic {m:#04x}, not {MAGIC:#04x}"),
            WireError::Version(v) => write!(f, "version {v}, not {VERSION}"),
            WireError::Kind(k) => write!(f, "unknown type {k}"),
            WireError::Flags(x) => write!(f, "flags {x:#04x} not allowed in this type"),
            WireError::Field(w) => write!(f, "{w}"),
            WireError::Length { header_says, got } => {
                write!(f, "header says {header_says} bytes follow, {got} do")
            }
        }
    }
}

impl std::error::Error for WireError {}

impl Header {
    pub fn request(txid: u32, channel: u8, offset: u32, length: u16, namelen: u16) -> Header {
        Header { kind: Kind::Request, flags: 0, channel, txid, offset, length, namelen, total: 0, stamp: 0 }
    }

    /// A request's response limit (ch. V "Mechanisms"): the bytes it may fetch in all.
    pub fn response_limit(&self) -> usize {
        match self.kind {
            Kind::Request if self.total > 0 => self.total as usize,
            Kind::Request => self.length as usize,
            Kind::Reply => 0,
        }
    }

    /// A reply's announcement of the server's own response limit per request (0: none).
    pub fn server_limit(&self) -> Option<u32> {
        (self.kind == Kind::Reply && self.namelen > 0).then_some(self.namelen as u32)
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(MAGIC);
        out.push(VERSION << 4 | self.kind as u8);
        out.push(self.flags);
        out.push(self.channel);
        out.extend_from_slice(&self.txid.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.length.to_be_bytes());
        out.extend_from_slice(&self.namelen.to_be_bytes());
        out.extend_from_slice(&self.total.to_be_bytes());
        out.extend_from_slice(&self.stamp.to_be_bytes());
    }

    /// How many bytes must follow the header in a well-formed datagram.
    pub fn body_len(&self) -> usize {
        match self.kind {
            Kind::Request => self.namelen as usize,
            Kind::Reply if self.flags & F_NOPAYLOAD != 0 => 0,
            Kind::Reply => self.length as usize,
        }
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Decodes a whole datagram into its header and body (name or payload).
pub fn decode(d: &[u8]) -> Result<(Header, &[u8]), WireError> {
    if d.len() < HEADER_LEN {
        return Err(WireError::Short(d.len()));
    }
    if d[0] != MAGIC {
        return Err(WireError::Magic(d[0]));
    }
    if d[1] >> 4 != VERSION {
        return Err(WireError::Version(d[1] >> 4));
    }
    let kind = match d[1] & 0x0F {
        1 => Kind::Request,
        2 => Kind::Reply,
        k => return Err(WireError::Kind(k)),
    };
    let h = Header {
        kind,
        flags: d[2],
        channel: d[3],
        txid: be32(d, 4),
        offset: be32(d, 8),
        length: u16::from_be_bytes([d[12], d[13]]),
        namelen: u16::from_be_bytes([d[14], d[15]]),
        total: be32(d, 16),
        stamp: be32(d, 20),
    };
    let allowed = if kind == Kind::Request { REQ_FLAGS } else { REPLY_FLAGS };
    if h.flags & !allowed != 0 {
        return Err(WireError::Flags(h.flags));
    }
    match kind {
        Kind::Request if h.total != 0 && h.length == 0 => {
            return Err(WireError::Field("request with a response limit and a datagram size of 0"))
        }
        Kind::Request if h.namelen as usize > MAX_NAME => return Err(WireError::Field("name longer than 1024 bytes")),
        Kind::Reply if h.flags & F_STREAM != 0 && h.total != 0 => {
            return Err(WireError::Field("streamed reply with a nonzero total"))
        }
        _ => {}
    }
    let body = &d[HEADER_LEN..];
    if body.len() != h.body_len() {
        return Err(WireError::Length { header_says: h.body_len(), got: body.len() });
    }
    Ok((h, body))
}

/// A whole datagram: header then body.
pub fn datagram(h: &Header, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    h.encode(&mut out);
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn request_round_trips_and_bad_fields_are_named() {
        let mut h = Header::request(0xDEADBEEF, 3, 4096, 1400, 5);
        h.stamp = 77;
        let d = datagram(&h, b"hello");
        assert_eq!(decode(&d).unwrap(), (h, &b"hello"[..]));
        let mut bad = d.clone();
        bad[2] = F_END;
        assert_eq!(decode(&bad).unwrap_err(), WireError::Flags(F_END));
        assert!(matches!(decode(&d[..d.len() - 1]), Err(WireError::Length { header_says: 5, got: 4 })));
        assert_eq!(decode(&d[..10]).unwrap_err(), WireError::Short(10));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(d in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = decode(&d);
        }

        #[test]
        fn valid_header_random_tail_decodes_only_at_exact_length(len in 0u16..64, tail in proptest::collection::vec(any::<u8>(), 0..80)) {
            let h = Header { kind: Kind::Reply, flags: 0, channel: 0, txid: 1, offset: 0, length: len, namelen: 0, total: 100, stamp: 1 };
            let d = datagram(&h, &tail);
            prop_assert_eq!(decode(&d).is_ok(), tail.len() == len as usize);
        }
    }
}
