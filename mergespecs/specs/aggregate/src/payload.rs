//! The aggregate payload: a UDP header, then the 24-byte aggregate header (see the crate doc).

/// UDP header + aggregate header.
pub const LEN: usize = 8 + 24;
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

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Contribution {
    /// Reads an IPv4 payload; `None` unless it is long enough with the right magic and version.
    pub fn parse(udp: &[u8]) -> Option<Contribution> {
        if udp.len() < LEN || udp[8..10] != MAGIC || udp[10] != VERSION {
            return None;
        }
        let mut value = [0; 8];
        value.copy_from_slice(&udp[24..32]);
        Some(Contribution {
            sport: be_u16(udp, 0),
            dport: be_u16(udp, 2),
            key: be_u32(udp, 12),
            count: be_u32(udp, 16),
            value: i64::from_be_bytes(value),
        })
    }

    /// The IPv4 payload carrying this contribution (UDP checksum 0: none, as IPv4 allows).
    pub fn encode(&self) -> [u8; LEN] {
        let mut out = [0; LEN];
        out[0..2].copy_from_slice(&self.sport.to_be_bytes());
        out[2..4].copy_from_slice(&self.dport.to_be_bytes());
        out[4..6].copy_from_slice(&(LEN as u16).to_be_bytes());
        out[8..10].copy_from_slice(&MAGIC);
        out[10] = VERSION;
        out[12..16].copy_from_slice(&self.key.to_be_bytes());
        out[16..20].copy_from_slice(&self.count.to_be_bytes());
        out[24..32].copy_from_slice(&self.value.to_be_bytes());
        out
    }
}
