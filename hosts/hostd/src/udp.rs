//! The UDP datagrams hostd writes and reads: whole IPv4 datagrams built in one buffer
//! (concast ones with the option, plain ones without). The UDP header and its checksum are
//! the wire crate's (`concast_wire::udp`).

use std::net::Ipv4Addr;

use concast_wire::build::{concast_header, CONCAST_HEADER_LEN};
use concast_wire::ipv4::{self, protocol, Params};
use concast_wire::udp;

pub use concast_wire::udp::HEADER_LEN;

/// Path MTU hostd assumes toward every receiver (Ethernet); senders set DF and never fragment.
pub const MTU: usize = 1500;
/// The largest application payload one concast datagram carries within the MTU.
pub const MAX_PAYLOAD: usize = MTU - CONCAST_HEADER_LEN - HEADER_LEN;

/// The ports and payload of a UDP datagram hostd received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View<'a> {
    pub sport: u16,
    pub dport: u16,
    pub payload: &'a [u8],
}

impl<'a> View<'a> {
    /// The UDP datagram in an IPv4 payload; `None` if shorter than its header or its length field.
    pub fn parse(ip_payload: &'a [u8]) -> Option<View<'a>> {
        let p = udp::Packet::new_checked(ip_payload)?;
        let payload = &ip_payload[HEADER_LEN..usize::from(p.len())];
        Some(View { sport: p.src_port(), dport: p.dst_port(), payload })
    }
}

/// Writes a UDP header, `payload` and its checksum into `buf` (exactly `HEADER_LEN + payload.len()` bytes).
fn write(buf: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) {
    udp::emit_header(buf, sport, dport, payload.len());
    buf[HEADER_LEN..].copy_from_slice(payload);
    udp::Packet::new_unchecked(buf).fill_checksum(src, dst);
}

/// What to put in the IPv4 header of a datagram hostd sends for an application.
#[derive(Debug, Clone, Copy)]
pub struct Addressing {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ttl: u8,
    pub sport: u16,
    pub dport: u16,
}

impl Addressing {
    fn params(&self) -> Params {
        Params { ttl: self.ttl, ..Params::new(self.src, self.dst, protocol::UDP) }
    }
}

/// A concast datagram (`9E 06 G 00 00`, IHL 7, DF) carrying UDP with `payload`.
pub fn concast_datagram(a: &Addressing, group: u32, payload: &[u8]) -> Vec<u8> {
    let udp_len = HEADER_LEN + payload.len();
    let mut buf = vec![0u8; CONCAST_HEADER_LEN + udp_len];
    concast_header(&mut buf, &a.params(), group, udp_len).expect("buffer sized for the header");
    write(&mut buf[CONCAST_HEADER_LEN..], a.src, a.dst, a.sport, a.dport, payload);
    buf
}

/// A plain UDP datagram (no options, DF): what a sender sends after falling back to unicast.
pub fn plain_datagram(a: &Addressing, payload: &[u8]) -> Vec<u8> {
    let udp_len = HEADER_LEN + payload.len();
    let mut buf = vec![0u8; ipv4::HEADER_LEN + udp_len];
    ipv4::emit_header(&mut buf, &a.params(), &[], udp_len).expect("buffer sized for the header");
    write(&mut buf[ipv4::HEADER_LEN..], a.src, a.dst, a.sport, a.dport, payload);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use concast_wire::datagram::{classify, Datagram};

    fn addressing() -> Addressing {
        Addressing { src: "10.1.1.2".parse().unwrap(), dst: "10.1.2.2".parse().unwrap(), ttl: 64, sport: 4000, dport: 5000 }
    }

    fn udp_checksum_ok(ip: &ipv4::Packet<&[u8]>) -> bool {
        let udp = ip.payload();
        let mut buf = Vec::new();
        buf.extend_from_slice(&ip.src_addr().octets());
        buf.extend_from_slice(&ip.dst_addr().octets());
        buf.extend_from_slice(&[0, 17]);
        buf.extend_from_slice(&(udp.len() as u16).to_be_bytes());
        buf.extend_from_slice(udp);
        ipv4::checksum(&buf) == 0
    }

    #[test]
    fn concast_datagrams_carry_the_option_and_a_valid_udp_checksum() {
        let d = concast_datagram(&addressing(), 7, b"hello");
        let Ok(Datagram::Concast { ip, group }) = classify(&d) else { panic!("not concast") };
        assert_eq!(group, 7);
        assert_eq!(ip.header_len(), 28);
        assert!(ip.verify_checksum() && ip.dont_frag());
        assert!(udp_checksum_ok(&ip));
        let v = View::parse(ip.payload()).unwrap();
        assert_eq!((v.sport, v.dport, v.payload), (4000, 5000, &b"hello"[..]));
    }

    #[test]
    fn plain_datagrams_have_no_options() {
        let d = plain_datagram(&addressing(), b"x");
        let Ok(Datagram::Ipv4(ip)) = classify(&d) else { panic!("not plain") };
        assert_eq!(ip.header_len(), 20);
        assert!(udp_checksum_ok(&ip));
    }

    #[test]
    fn short_or_inconsistent_udp_is_refused() {
        assert!(View::parse(&[0; 7]).is_none());
        assert!(View::parse(&[0, 1, 0, 2, 0, 20, 0, 0, 1]).is_none()); // length 20 > 9 bytes
        assert!(View::parse(&[0, 1, 0, 2, 0, 4, 0, 0]).is_none()); // length below the header
        assert_eq!(View::parse(&[0, 1, 0, 2, 0, 9, 0, 0, 7, 99]).unwrap().payload, &[7]); // padding ignored
    }
}
