//! Wire formats of concast: zero-copy views, a classifier and builders.
//!
//! `docs/protocol.md` is the byte-exact specification this crate implements; every check,
//! its order and its error name come from there, and `tests/vectors/vectors.json` (generated
//! from that text) is what the tests compare against. When this crate and the document
//! disagree, the crate is wrong.
//!
//! The crate is `#![no_std]` and never allocates, because the same code runs inside
//! WebAssembly merge specs (`wasm32-unknown-unknown`) and on the per-packet path of routerd
//! and hostd. The design follows smoltcp: a `Packet<T: AsRef<[u8]>>` view per header whose
//! `new_checked` validates once so that no accessor can panic afterwards, setters on
//! `T: AsMut<[u8]>`, field offsets declared once in a `field` module, and `Repr` values for
//! building.
//!
//! - [`ipv4`]: the IPv4 header, checksum, TTL decrement (section 1.2).
//! - [`options`]: the options-area walk (section 1.1), Concast ID and Router Alert.
//! - [`csp`]: the Concast Signalling Protocol messages (section 2).
//! - [`mplex`]: the MplexPkt body and its records (section 3).
//! - [`datagram`]: [`classify`], the one entry point that applies all checks in spec order.
//! - [`build`]: writing concast, CSP and MplexPkt datagrams into a caller's buffer.
//! - [`splitmix`]: splitmix64, the seeded generator every crate draws from.
//! - [`udp`]: the UDP header and its pseudo-header checksum (hosts and some specs use it).
//! - [`Error`]: one variant per error name of the spec.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]

#[cfg(feature = "std")]
extern crate std;

pub mod build;
pub mod csp;
pub mod datagram;
pub mod error;
pub mod ipv4;
pub mod mplex;
pub mod options;
pub mod splitmix;
pub mod udp;

pub use datagram::{classify, Datagram, FlowId, Kind};
pub use error::{BuildError, Error};

/// The well-known multiplex group (`G = 1`).
pub const MPLEX_GROUP: u32 = 1;

/// Lower-case hex of some bytes, written by `{}` without allocating: how every crate shows
/// spec hashes, keys and payloads.
#[derive(Debug, Clone, Copy)]
pub struct Hex<'a>(pub &'a [u8]);

impl core::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// `Hex(bytes)` as a String.
#[cfg(feature = "std")]
pub fn hex(bytes: &[u8]) -> std::string::String {
    use std::string::ToString;
    Hex(bytes).to_string()
}

// Big-endian field access. Callers have checked lengths; these index like slices do.

#[inline]
pub(crate) fn read_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(read_array(buf, at))
}

#[inline]
pub(crate) fn read_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(read_array(buf, at))
}

#[inline]
pub(crate) fn read_array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

#[inline]
pub(crate) fn write_u16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn write_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// One's-complement sum of `data` as 16-bit big-endian words (odd tail padded with zero),
/// folded to at most 0xFFFF.
pub(crate) fn ones_sum(data: &[u8]) -> u32 {
    let mut sum: u64 = 0;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u32
}

pub(crate) fn fold(mut sum: u32) -> u16 {
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// Declares a smoltcp-style view type: the struct and the methods every view shares.
/// The type must implement `fn check(&self) -> Result<(), Error>` itself.
macro_rules! view {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps a buffer without checking it; accessors may then panic on a short buffer.
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }

            /// Wraps a buffer after the spec's checks; accessors cannot panic afterwards.
            pub fn new_checked(buffer: T) -> Result<Self, $crate::error::Error> {
                let v = $name { buffer };
                v.check()?;
                Ok(v)
            }

            /// The wrapped buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// The bytes the view covers.
            pub fn as_bytes(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }
    };
}
pub(crate) use view;
