//! The NAK payload (after the IPv4 header; big-endian):
//!
//! ```text
//!  0      2      4      6      8     10    11    12          16
//!  | sport| dport| len  | csum | "NK" | ver | rsv |  seq u32  | (optional, up to 48 bytes)
//!  \________ UDP header ______/ \_________ NAK header ________/
//! ```
//!
//! `ver` = 1, `rsv` = 0. `seq` is the sequence number the receiver of the multicast misses.
//! Bytes after the header (a session ID, a bitmap of further losses, ...) are the
//! application's; the forwarded NAK carries those of the first NAK of its window.

pub const MAGIC: [u8; 2] = *b"NK";
pub const VERSION: u8 = 1;
/// The NAK header after UDP.
pub const HEADER_LEN: usize = 8;
/// Longest NAK body (header and application bytes) this spec suppresses; longer ones pass.
pub const MAX_BODY: usize = 56;

/// The sequence number of a NAK body, if it is one this spec handles.
pub fn seq(body: &[u8]) -> Option<u32> {
    if body.len() < HEADER_LEN || body.len() > MAX_BODY || body[0..2] != MAGIC || body[2] != VERSION
    {
        return None;
    }
    Some(u32::from_be_bytes([body[4], body[5], body[6], body[7]]))
}

/// A NAK body for `seq` followed by `extra` application bytes.
pub fn encode(seq: u32, extra: &[u8], out: &mut [u8]) -> usize {
    let n = HEADER_LEN + extra.len();
    out[0..2].copy_from_slice(&MAGIC);
    out[2] = VERSION;
    out[3] = 0;
    out[4..8].copy_from_slice(&seq.to_be_bytes());
    out[HEADER_LEN..n].copy_from_slice(extra);
    n
}
