//! What a dropped frame carried, so an experiment can say where its ACKs went: a queue drop
//! of a 5-record MplexPkt loses five ACKs, of a cross-traffic segment none. Only drops are
//! classified (the per-frame path of a delivered frame does not parse anything).

use serde_json::{json, Value};

use concast_wire::{classify, ipv4, Datagram};

use crate::model::Drop;

const ETH_HEADER_LEN: usize = 14;
const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];

/// What a frame was, for the drop books.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A well-formed MplexPkt (protocol 254) and how many records it bundled.
    Mplex { records: u32 },
    /// A TCP segment with ACK set, no SYN, FIN or RST and no payload: the multiplex
    /// service's capture rule (docs/multiplex.md), here travelling unbundled.
    PureAck,
    /// A CSP message (protocol 253 with Router Alert).
    Csp,
    /// Anything else: data segments, cross traffic, ARP, malformed datagrams.
    Other,
}

/// Classify an Ethernet frame as the emulator's TAPs carry it.
pub fn of_frame(frame: &[u8]) -> Kind {
    if frame.len() < ETH_HEADER_LEN || frame[12..14] != ETHERTYPE_IPV4 {
        return Kind::Other;
    }
    match classify(&frame[ETH_HEADER_LEN..]) {
        Ok(Datagram::Mplex { mplex, .. }) => Kind::Mplex { records: mplex.records().count() as u32 },
        Ok(Datagram::Csp { .. }) => Kind::Csp,
        Ok(Datagram::Ipv4(ip)) if ip.protocol() == ipv4::protocol::TCP && !ip.is_fragment() => {
            let seg = &frame[ETH_HEADER_LEN..][ip.payload_range()];
            if is_pure_ack(seg) {
                Kind::PureAck
            } else {
                Kind::Other
            }
        }
        _ => Kind::Other,
    }
}

/// ACK without SYN, FIN or RST, and nothing after the TCP header.
fn is_pure_ack(seg: &[u8]) -> bool {
    const FIN: u8 = 0x01;
    const SYN: u8 = 0x02;
    const RST: u8 = 0x04;
    const ACK: u8 = 0x10;
    if seg.len() < 20 {
        return false;
    }
    let header_len = usize::from(seg[12] >> 4) * 4;
    let flags = seg[13];
    header_len >= 20 && seg.len() == header_len && flags & ACK != 0 && flags & (FIN | SYN | RST) == 0
}

/// Drops of one cause, by what was dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindCounts {
    pub mplex_pkts: u64,
    pub mplex_records: u64,
    pub pure_acks: u64,
    pub csp: u64,
    pub other: u64,
}

impl KindCounts {
    pub fn add(&mut self, kind: Kind) {
        match kind {
            Kind::Mplex { records } => {
                self.mplex_pkts += 1;
                self.mplex_records += u64::from(records);
            }
            Kind::PureAck => self.pure_acks += 1,
            Kind::Csp => self.csp += 1,
            Kind::Other => self.other += 1,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"mplex_pkts": self.mplex_pkts, "mplex_records": self.mplex_records,
               "pure_acks": self.pure_acks, "csp": self.csp, "other": self.other})
    }
}

/// One link direction's drops, by cause and kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropBooks {
    pub queue: KindCounts,
    pub loss: KindCounts,
    pub down: KindCounts,
}

impl DropBooks {
    /// Book a frame the model dropped for `cause`.
    pub fn record(&mut self, cause: Drop, frame: &[u8]) {
        let kind = of_frame(frame);
        match cause {
            Drop::Queue => self.queue.add(kind),
            Drop::Loss => self.loss.add(kind),
            Drop::Down => self.down.add(kind),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"queue": self.queue.to_json(), "loss": self.loss.to_json(), "down": self.down.to_json()})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(ip: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ETHERTYPE_IPV4);
        f.extend_from_slice(ip);
        f
    }

    /// A 20-byte IPv4 header with a correct checksum around `payload`.
    fn ipv4(protocol: u8, options: &[u8], payload: &[u8]) -> Vec<u8> {
        let hl = 20 + options.len();
        let total = hl + payload.len();
        let mut p = vec![0u8; total];
        p[0] = 0x40 | (hl / 4) as u8;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = protocol;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..hl].copy_from_slice(options);
        p[hl..].copy_from_slice(payload);
        let mut pkt = ipv4::Packet::new_unchecked(&mut p[..]);
        pkt.fill_checksum();
        p
    }

    fn tcp(flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut s = vec![0u8; 20];
        s[12] = 5 << 4;
        s[13] = flags;
        s.extend_from_slice(payload);
        s
    }

    #[test]
    fn pure_ack_is_told_from_data_and_fin() {
        assert_eq!(of_frame(&eth(&ipv4(6, &[], &tcp(0x10, &[])))), Kind::PureAck);
        assert_eq!(of_frame(&eth(&ipv4(6, &[], &tcp(0x10, b"x")))), Kind::Other);
        assert_eq!(of_frame(&eth(&ipv4(6, &[], &tcp(0x11, &[])))), Kind::Other);
        assert_eq!(of_frame(&eth(&ipv4(17, &[], &tcp(0x10, &[])))), Kind::Other);
    }

    #[test]
    fn mplex_records_are_counted() {
        // MplexHdr (version 1) then two records of a 20-byte TCP ACK each.
        let mut body = vec![64, 1, 0, 0];
        body.extend_from_slice(&[0; 12]);
        for src in [[10, 0, 0, 3], [10, 0, 0, 4]] {
            body.extend_from_slice(&src);
            body.extend_from_slice(&[64, 6, 0, 20, 0]);
            body.extend_from_slice(&tcp(0x10, &[]));
        }
        let concast_id = [0x9E, 6, 0, 0, 0, 1, 0x01, 0x00]; // G = 1, NOP, EOL
        let frame = eth(&ipv4(254, &concast_id, &body));
        assert_eq!(of_frame(&frame), Kind::Mplex { records: 2 });
        let mut books = DropBooks::default();
        books.record(Drop::Queue, &frame);
        books.record(Drop::Loss, &eth(&ipv4(6, &[], &tcp(0x10, &[]))));
        assert_eq!((books.queue.mplex_pkts, books.queue.mplex_records), (1, 2));
        assert_eq!(books.loss.pure_acks, 1);
        assert_eq!(books.down, KindCounts::default());
    }

    #[test]
    fn short_or_foreign_frames_are_other() {
        assert_eq!(of_frame(&[0u8; 10]), Kind::Other);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(of_frame(&arp), Kind::Other);
    }
}
