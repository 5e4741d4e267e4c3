//! Message attributes: instead of a fixed header, each microprotocol declares the attributes it
//! puts on the wire. A value is at most 8 bytes, carried big-endian in exactly `len` bytes.
use crate::composite::MicroId;

/// One attribute: its wire id, name, length in bytes and the microprotocol that owns it.
#[derive(Clone, Copy, Debug)]
pub struct AttrDecl {
    pub id: u8,
    pub name: &'static str,
    pub len: u8,
    pub owner: MicroId,
}

pub const MAX_ATTR: u8 = 15;

macro_rules! attrs {
    ($($konst:ident = $id:literal, $name:literal, $len:literal, $owner:ident;)*) => {
        $(pub const $konst: u8 = $id;)*
        /// Every declared attribute, indexed by nothing in particular; see [`decl`].
        pub const DECLS: &[AttrDecl] = &[
            $(AttrDecl { id: $id, name: $name, len: $len, owner: MicroId::$owner },)*
        ];
    };
}

attrs! {
    COMPOSITE = 1, "composite", 4, TransportDriver;      // the announced bit field
    SEQ = 2, "seq", 4, SequencedSegments;                // segment sequence number (ISN-relative on the wire)
    FRAG = 3, "frag", 8, FixedSize;                      // message id (4), fragment index (2), fragment count (2)
    ISN = 4, "isn", 4, VirtualCircuit;                   // initial sequence number, on open/accept
    ACK = 5, "ack", 8, PositiveAck;                      // cumulative ack (4), bitmap of the next 32 (4)
    WND = 6, "wnd", 4, WindowedFlow;                     // receive window in segments
    TS = 7, "ts", 8, RttEstimation;                      // sender's clock (4), echoed clock (4), in microseconds
    FEC = 8, "fec", 7, Fec;                              // group (4), index (1), n (1), k (1)
    NAK = 9, "nak", 8, NegativeAck;                      // first missing seq (4, absolute), count (4)
    URG = 10, "urg", 1, OutOfBand;                       // 1: an urgent message's segment
    JTS = 11, "jts", 4, TimestampJitter;                 // sender's clock at MSG FROM USER, microseconds
    JGAP = 12, "jgap", 4, FixedRateJitter;               // sender's mean gap between messages, microseconds
    XON = 13, "xon", 1, XonXoff;                         // 0: XOFF (stop), 1: XON (go on)
    RTSCTS = 14, "rtscts", 5, RtsCts;                    // 1: RTS / 2: CTS (1), segment count (4)
    PMTU = 15, "pmtu", 2, Resize;                        // probe size; echo: size | 0x8000
}
// Ids 1..=15 are all taken: a new attribute needs `Attrs` widened past 16 presence bits.

pub fn decl(id: u8) -> Option<&'static AttrDecl> {
    DECLS.iter().find(|d| d.id == id)
}

/// The attributes a microprotocol declares.
pub fn declared_by(m: MicroId) -> impl Iterator<Item = &'static AttrDecl> {
    DECLS.iter().filter(move |d| d.owner == m)
}

/// A fixed-capacity attribute set: presence bits plus values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attrs {
    present: u16,
    vals: [u64; MAX_ATTR as usize + 1],
}

impl Attrs {
    pub fn get(&self, id: u8) -> Option<u64> {
        (self.present & (1 << id) != 0).then(|| self.vals[id as usize])
    }

    pub fn set(&mut self, id: u8, v: u64) {
        debug_assert!(decl(id).is_some(), "attribute {id} is not declared");
        self.present |= 1 << id;
        self.vals[id as usize] = v;
    }

    pub fn remove(&mut self, id: u8) {
        self.present &= !(1 << id);
    }

    pub fn ids(&self) -> impl Iterator<Item = u8> + '_ {
        (1..=MAX_ATTR).filter(move |i| self.present & (1 << i) != 0)
    }

    pub fn count(&self) -> usize {
        self.present.count_ones() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_unique_and_fit() {
        for (i, d) in DECLS.iter().enumerate() {
            assert!(d.id >= 1 && d.id <= MAX_ATTR && d.len >= 1 && d.len <= 8, "{d:?}");
            assert!(DECLS[i + 1..].iter().all(|e| e.id != d.id && e.name != d.name));
        }
        assert_eq!(declared_by(MicroId::PositiveAck).count(), 1);
    }
}
