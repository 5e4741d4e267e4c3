//! Segments in memory and on the wire.
//!
//! Wire layout (all big-endian): magic `0xC7`, version `1`, kind (1), attribute count (1),
//! connection id (4), then per attribute: id (1), length (1), value (length bytes), then the
//! payload to the end of the datagram. Decoding is total: any byte string either decodes or
//! yields a [`Malformed`] reason, never a panic.
//!
//! A payload is `Bytes`: a sender's segments are slices of the user's message and a
//! receiver's slices of the buffer the datagram arrived in, so neither copies; encoding copies
//! the payload once, into the datagram.
use bytes::Bytes;

use crate::attr::{self, Attrs};
use crate::composite::{Composite, MicroId};

pub const MAGIC: u8 = 0xC7;
pub const VERSION: u8 = 1;
pub const HEADER: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Data = 1,
    Ack = 2,
    Open = 3,
    Accept = 4,
    Refuse = 5,
    Close = 6,
    CloseAck = 7,
    KeepAlive = 8,
    Parity = 9,
    CcMsg = 10,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        use Kind::*;
        [Data, Ack, Open, Accept, Refuse, Close, CloseAck, KeepAlive, Parity, CcMsg]
            .into_iter()
            .find(|k| *k as u8 == b)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub kind: Kind,
    pub conn: u32,
    pub attrs: Attrs,
    pub payload: Bytes,
}

/// Why a datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    Short,
    Magic,
    Version,
    Kind,
    TruncatedAttr,
    UnknownAttr(u8),
    AttrLength(u8),
    /// The attribute's microprotocol is not in this session's composite.
    AttrNotInComposite(u8),
    DuplicateAttr(u8),
}

impl Segment {
    pub fn new(kind: Kind, conn: u32) -> Segment {
        Segment { kind, conn, attrs: Attrs::default(), payload: Bytes::new() }
    }

    pub fn encoded_len(&self) -> usize {
        HEADER
            + self.attrs.ids().map(|i| 2 + attr::decl(i).map_or(0, |d| d.len as usize)).sum::<usize>()
            + self.payload.len()
    }

    pub fn encode_into(&self, out: &mut Vec<u8>) {
        self.encode_mapped(out, |_, v| v);
    }

    /// Encode with each attribute value passed through `map(id, value)` on the way out.
    pub fn encode_mapped(&self, out: &mut Vec<u8>, map: impl Fn(u8, u64) -> u64) {
        out.reserve(self.encoded_len());
        out.extend_from_slice(&[MAGIC, VERSION, self.kind as u8, self.attrs.count() as u8]);
        out.extend_from_slice(&self.conn.to_be_bytes());
        for id in self.attrs.ids() {
            let d = attr::decl(id).expect("only declared attributes are set");
            let v = map(id, self.attrs.get(id).unwrap_or(0)).to_be_bytes();
            out.push(id);
            out.push(d.len);
            out.extend_from_slice(&v[8 - d.len as usize..]);
        }
        out.extend_from_slice(&self.payload);
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode_into(&mut v);
        v
    }

    /// Decodes one datagram, copying its payload. With `composite`, attributes whose owner is
    /// not in it are refused (the peer announced the composite, so anything else is corruption
    /// or a foreign sender).
    pub fn decode(b: &[u8], composite: Option<Composite>) -> Result<Segment, Malformed> {
        let (mut seg, at) = Segment::decode_header(b, composite)?;
        seg.payload = Bytes::copy_from_slice(&b[at..]);
        Ok(seg)
    }

    /// `decode` with the payload a slice of `b`: no copy.
    pub fn decode_shared(b: &Bytes, composite: Option<Composite>) -> Result<Segment, Malformed> {
        let (mut seg, at) = Segment::decode_header(b, composite)?;
        seg.payload = b.slice(at..);
        Ok(seg)
    }

    /// Header and attributes, and where the payload starts (never past the end of `b`).
    fn decode_header(b: &[u8], composite: Option<Composite>) -> Result<(Segment, usize), Malformed> {
        if b.len() < HEADER {
            return Err(Malformed::Short);
        }
        if b[0] != MAGIC {
            return Err(Malformed::Magic);
        }
        if b[1] != VERSION {
            return Err(Malformed::Version);
        }
        let kind = Kind::from_u8(b[2]).ok_or(Malformed::Kind)?;
        let n = b[3] as usize;
        let conn = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let mut attrs = Attrs::default();
        let mut at = HEADER;
        for _ in 0..n {
            let (&id, &len) = match (b.get(at), b.get(at + 1)) {
                (Some(i), Some(l)) => (i, l),
                _ => return Err(Malformed::TruncatedAttr),
            };
            let d = attr::decl(id).ok_or(Malformed::UnknownAttr(id))?;
            if len != d.len {
                return Err(Malformed::AttrLength(id));
            }
            if let Some(c) = composite {
                if d.owner != MicroId::TransportDriver && !c.has(d.owner) {
                    return Err(Malformed::AttrNotInComposite(id));
                }
            }
            let val = b.get(at + 2..at + 2 + len as usize).ok_or(Malformed::TruncatedAttr)?;
            if attrs.get(id).is_some() {
                return Err(Malformed::DuplicateAttr(id));
            }
            attrs.set(id, val.iter().fold(0u64, |a, x| a << 8 | *x as u64));
            at += 2 + len as usize;
        }
        Ok((Segment { kind, conn, attrs, payload: Bytes::new() }, at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::*;
    use crate::composite::Preset;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_composite_check() {
        let mut s = Segment::new(Kind::Data, 0xdeadbeef);
        s.attrs.set(SEQ, 7);
        s.attrs.set(FRAG, 1 << 32 | 3 << 16 | 4);
        s.attrs.set(FEC, 0x0102030405);
        s.payload = Bytes::from_static(b"hello");
        let w = s.encode();
        assert_eq!(w.len(), s.encoded_len());
        assert_eq!(Segment::decode(&w, None).unwrap(), s);
        assert_eq!(Segment::decode_shared(&Bytes::from(w.clone()), None).unwrap(), s);
        assert_eq!(Segment::decode(&w, Some(Preset::Audio.composite())).unwrap(), s);
        assert_eq!(
            Segment::decode(&w, Some(Preset::Bulk.composite())),
            Err(Malformed::AttrNotInComposite(FEC))
        );
        for cut in 0..w.len() - 5 {
            assert!(Segment::decode(&w[..cut], None).is_err(), "cut at {cut}");
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let copied = Segment::decode(&b, Some(Preset::Bulk.composite()));
            // the sharing decoder decides exactly as the copying one, on a slice of a bigger buffer too
            let mut big = vec![0xee; 3];
            big.extend_from_slice(&b);
            let shared = Segment::decode_shared(&Bytes::from(big).slice(3..), Some(Preset::Bulk.composite()));
            prop_assert_eq!(copied, shared);
        }

        #[test]
        fn valid_header_with_random_tail_decodes_or_is_refused(
            kind in 1u8..=10, n in 0u8..6, tail in proptest::collection::vec(any::<u8>(), 0..40)
        ) {
            let mut b = vec![MAGIC, VERSION, kind, n, 0, 0, 0, 1];
            b.extend(tail);
            if let Ok(s) = Segment::decode(&b, None) {
                prop_assert_eq!(Segment::decode(&s.encode(), None).unwrap(), s);
            }
        }
    }
}
