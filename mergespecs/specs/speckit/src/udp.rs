//! The UDP header (RFC 768) in front of the NAK and gather payloads. The wire crate has no
//! UDP view because concast itself never looks inside UDP; these specs do.

use concast_sdk::wire::ipv4::{protocol, Packet};

pub const HEADER_LEN: usize = 8;

/// A UDP datagram carried by an unfragmented IPv4 datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    /// The UDP payload (after the 8-byte header, cut at the UDP length).
    pub body: &'a [u8],
}

/// The IPv4 view and the UDP datagram of `msg`, if it is a well-formed, unfragmented UDP
/// datagram whose UDP length fits the IPv4 payload. Anything else is not these specs' input.
pub fn parse(msg: &[u8]) -> Option<(Packet<&[u8]>, Udp<'_>)> {
    let ip = Packet::new_checked(msg).ok()?;
    if ip.is_fragment() || ip.protocol() != protocol::UDP {
        return None;
    }
    let range = ip.payload_range();
    let payload = &msg[range];
    if payload.len() < HEADER_LEN {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([payload[4], payload[5]]));
    if len < HEADER_LEN || len > payload.len() {
        return None;
    }
    let udp = Udp {
        src_port: u16::from_be_bytes([payload[0], payload[1]]),
        dst_port: u16::from_be_bytes([payload[2], payload[3]]),
        body: &payload[HEADER_LEN..len],
    };
    Some((ip, udp))
}

/// Writes a UDP header for `body_len` bytes of payload into `out[..8]`. The checksum is 0
/// (none, as IPv4 allows): a merged datagram's source is the merging node, so the senders'
/// checksums no longer apply.
pub fn write_header(out: &mut [u8], src_port: u16, dst_port: u16, body_len: usize) {
    out[0..2].copy_from_slice(&src_port.to_be_bytes());
    out[2..4].copy_from_slice(&dst_port.to_be_bytes());
    out[4..6].copy_from_slice(&((HEADER_LEN + body_len) as u16).to_be_bytes());
    out[6..8].fill(0);
}
