//! The aggregate payload: a UDP header, then the 24-byte aggregate header (see the crate doc).

use concast_sdk::wire::udp;

/// UDP header + aggregate header.
pub const LEN: usize = udp::HEADER_LEN + 24;
pub const MAGIC: [u8; 2] = *b"CA";
pub const VERSION: u8 = 1;

/// One contribution (or a merged set of them) as carried on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contribution {
    pub sport: u16,
    pub dport: u16,
    pub key: u32,
    pub count: u32,
    pub value: i64,
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Contribution {
    /// Reads an IPv4 payload; `None` unless it is long enough with the right magic and version.
    pub fn parse(payload: &[u8]) -> Option<Contribution> {
        if payload.len() < LEN || payload[8..10] != MAGIC || payload[10] != VERSION {
            return None;
        }
        let mut value = [0; 8];
        value.copy_from_slice(&payload[24..32]);
        let header = udp::Packet::new_unchecked(payload);
        Some(Contribution {
            sport: header.src_port(),
            dport: header.dst_port(),
            key: be_u32(payload, 12),
            count: be_u32(payload, 16),
            value: i64::from_be_bytes(value),
        })
    }

    /// The IPv4 payload carrying this contribution (UDP checksum 0: none, as IPv4 allows).
    pub fn encode(&self) -> [u8; LEN] {
        let mut out = [0; LEN];
        udp::emit_header(&mut out, self.sport, self.dport, LEN - udp::HEADER_LEN);
        out[8..10].copy_from_slice(&MAGIC);
        out[10] = VERSION;
        out[12..16].copy_from_slice(&self.key.to_be_bytes());
        out[16..20].copy_from_slice(&self.count.to_be_bytes());
        out[24..32].copy_from_slice(&self.value.to_be_bytes());
        out
    }
}
