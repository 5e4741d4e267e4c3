//! The UDP datagram in front of the NAK and gather payloads, read and written with the wire
//! crate's UDP view (`concast_wire::udp`).

use concast_sdk::wire::ipv4::{protocol, Packet};
use concast_sdk::wire::udp;

pub use udp::HEADER_LEN;

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
    let payload = &msg[ip.payload_range()];
    let u = udp::Packet::new_checked(payload)?;
    let body = &payload[HEADER_LEN..usize::from(u.len())];
    Some((ip, Udp { src_port: u.src_port(), dst_port: u.dst_port(), body }))
}

/// Writes a UDP header for `body_len` bytes of payload into `out[..8]`. The checksum is 0
/// (none, as IPv4 allows): a merged datagram's source is the merging node, so the senders'
/// checksums no longer apply.
pub fn write_header(out: &mut [u8], src_port: u16, dst_port: u16, body_len: usize) {
    udp::emit_header(out, src_port, dst_port, body_len);
}
