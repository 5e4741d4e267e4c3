//! Transport checksums over the IPv4 pseudo-header (RFC 793 / RFC 768).
//!
//! A packet taken from NFQUEUE may carry a *partial* TCP checksum: with checksum offload the
//! kernel leaves only the pseudo-header sum in the field for the NIC to finish, and the
//! packet never reaches a NIC once we take it. The receiver's kernel verifies the checksum of
//! what we inject (TUN packets arrive with `CHECKSUM_NONE`), so a partial one would be
//! dropped there. Recomputing costs one pass over ~32–60 bytes, so the sender always does it
//! instead of trying to tell partial from complete.

use std::net::Ipv4Addr;

use concast_wire::ipv4;

/// Where each protocol keeps its checksum, from the start of its header.
fn checksum_offset(protocol: u8) -> Option<usize> {
    match protocol {
        ipv4::protocol::TCP => Some(16),
        ipv4::protocol::UDP => Some(6),
        _ => None,
    }
}

/// The checksum a TCP or UDP `segment` (header and data, its checksum field as it is) should
/// carry between `src` and `dst`, computed with the field taken as zero.
pub fn transport_checksum(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    segment: &[u8],
) -> Option<u16> {
    let at = checksum_offset(protocol)?;
    segment.get(at..at + 2)?;
    Some(ipv4::transport_checksum(src, dst, protocol, segment, at))
}

/// Rewrites the transport checksum of a whole IPv4 datagram (TCP, or UDP that has one).
/// Returns false when the datagram has no checksum we know how to fix.
pub fn fix_transport_checksum(datagram: &mut [u8]) -> bool {
    let Ok(ip) = ipv4::Packet::new_checked(&*datagram) else {
        return false;
    };
    let (src, dst, protocol, range) = (
        ip.src_addr(),
        ip.dst_addr(),
        ip.protocol(),
        ip.payload_range(),
    );
    let Some(at) = checksum_offset(protocol) else {
        return false;
    };
    let segment = &datagram[range.clone()];
    if protocol == ipv4::protocol::UDP && segment.get(6..8) == Some(&[0, 0]) {
        return false; // the sender chose no checksum
    }
    let Some(c) = transport_checksum(src, dst, protocol, segment) else {
        return false;
    };
    datagram[range.start + at..range.start + at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// True if the segment's checksum verifies (what the receiving kernel checks).
pub fn transport_checksum_ok(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, segment: &[u8]) -> bool {
    let Some(at) = checksum_offset(protocol) else {
        return false;
    };
    segment.len() >= at + 2 && ipv4::transport_checksum_ok(src, dst, protocol, segment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpkt;

    #[test]
    fn partial_checksums_are_completed() {
        let mut d = testpkt::tcp_ack(testpkt::C1, testpkt::R, 64, 1000);
        let ip = ipv4::Packet::new_checked(&d[..]).unwrap();
        let (src, dst, range) = (ip.src_addr(), ip.dst_addr(), ip.payload_range());
        assert!(transport_checksum_ok(src, dst, 6, &d[range.clone()]));
        // What offload leaves: the folded pseudo-header sum, not inverted.
        let pseudo = ipv4::pseudo_header_sum(src, dst, 6, range.len());
        d[range.start + 16..range.start + 18].copy_from_slice(&pseudo.to_be_bytes());
        assert!(!transport_checksum_ok(src, dst, 6, &d[range.clone()]));
        assert!(fix_transport_checksum(&mut d));
        assert!(transport_checksum_ok(src, dst, 6, &d[range.clone()]));
        // A correct checksum is left as it is.
        let before = d.clone();
        assert!(fix_transport_checksum(&mut d));
        assert_eq!(before, d);
    }

    #[test]
    fn known_value() {
        // A pure ACK 10.1.1.2:45678 -> 10.2.1.2:8000, seq 1, ack 1, window 502, 20-byte
        // header, checked against RFC 1071 over a pseudo-header written out by hand.
        let seg = [
            0xb2, 0x6e, 0x1f, 0x40, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x10, 0x01, 0xf6, 0, 0, 0, 0,
        ];
        let c = transport_checksum(
            Ipv4Addr::new(10, 1, 1, 2),
            Ipv4Addr::new(10, 2, 1, 2),
            6,
            &seg,
        )
        .unwrap();
        let mut full = seg;
        full[16..18].copy_from_slice(&c.to_be_bytes());
        assert!(transport_checksum_ok(
            Ipv4Addr::new(10, 1, 1, 2),
            Ipv4Addr::new(10, 2, 1, 2),
            6,
            &full
        ));
        // Independent check: RFC 1071 over pseudo-header and segment, by hand.
        let mut pseudo = vec![10, 1, 1, 2, 10, 2, 1, 2, 0, 6, 0, 20];
        pseudo.extend_from_slice(&seg);
        assert_eq!(c, ipv4::checksum(&pseudo));
    }

    #[test]
    fn udp_zero_means_none() {
        let mut d = testpkt::udp(testpkt::C1, testpkt::R, b"x");
        let at = 20 + 6;
        d[at..at + 2].copy_from_slice(&[0, 0]);
        assert!(!fix_transport_checksum(&mut d));
        assert_eq!(&d[at..at + 2], &[0, 0]);
        assert!(!fix_transport_checksum(&mut [0x45, 0, 0, 3]));
    }
}
