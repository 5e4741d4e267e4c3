//! The gathered payload (after the IPv4 header; big-endian):
//!
//! ```text
//!  0      2      4      6      8     10    11    12        14
//!  | sport| dport| len  | csum | "GA" | ver | rsv | count u16 | entry 1 | entry 2 | ...
//!  \________ UDP header ______/ \______ gather header ______/
//!
//!  entry:  | src u32 (IPv4 source of the message) | len u16 | len bytes of message |
//! ```
//!
//! `ver` = 1, `rsv` = 0, the UDP checksum 0. A message is a sender's UDP payload. Entries
//! follow back to back and exactly fill the UDP length. A gathered datagram arriving at the
//! next router is unpacked into its entries, so gathering composes along the tree.

pub const MAGIC: [u8; 2] = *b"GA";
pub const VERSION: u8 = 1;
/// The gather header after UDP.
pub const HEADER_LEN: usize = 6;
/// An entry's header.
pub const ENTRY_HEADER_LEN: usize = 6;

/// The entries of a gathered body (after UDP), if `body` is one: the magic and version, and
/// `count` entries that exactly fill it.
pub fn entries(body: &[u8]) -> Option<Entries<'_>> {
    if body.len() < HEADER_LEN || body[0..2] != MAGIC || body[2] != VERSION {
        return None;
    }
    let count = u16::from_be_bytes([body[4], body[5]]);
    let entries = Entries {
        rest: &body[HEADER_LEN..],
        left: count,
    };
    let mut walk = entries.clone();
    walk.by_ref().for_each(drop);
    (walk.left == 0 && walk.rest.is_empty()).then_some(entries)
}

/// Walks entries: `(source, message)`.
#[derive(Debug, Clone)]
pub struct Entries<'a> {
    rest: &'a [u8],
    left: u16,
}

impl<'a> Entries<'a> {
    pub fn count(&self) -> u16 {
        self.left
    }
    /// The entries' bytes, as they are appended to a bundle.
    pub fn bytes(&self) -> &'a [u8] {
        self.rest
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = (u32, &'a [u8]);

    fn next(&mut self) -> Option<(u32, &'a [u8])> {
        if self.left == 0 || self.rest.len() < ENTRY_HEADER_LEN {
            return None;
        }
        let r = self.rest;
        let len = usize::from(u16::from_be_bytes([r[4], r[5]]));
        let end = ENTRY_HEADER_LEN + len;
        if end > r.len() {
            return None;
        }
        self.rest = &r[end..];
        self.left -= 1;
        Some((
            u32::from_be_bytes([r[0], r[1], r[2], r[3]]),
            &r[ENTRY_HEADER_LEN..end],
        ))
    }
}

/// Writes the gather header for `count` entries into `out[..6]`.
pub fn write_header(out: &mut [u8], count: u16) {
    out[0..2].copy_from_slice(&MAGIC);
    out[2] = VERSION;
    out[3] = 0;
    out[4..6].copy_from_slice(&count.to_be_bytes());
}

/// Writes one entry into `out` (exactly `ENTRY_HEADER_LEN + message.len()` bytes).
pub fn write_entry(out: &mut [u8], src: u32, message: &[u8]) {
    out[0..4].copy_from_slice(&src.to_be_bytes());
    out[4..6].copy_from_slice(&(message.len() as u16).to_be_bytes());
    out[ENTRY_HEADER_LEN..].copy_from_slice(message);
}
