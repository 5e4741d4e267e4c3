//! Pieces the bundled `multiplex`, `nak-suppress` and `gather` specs share, so no spec
//! carries a copy of another's code. Everything is `no_std` and allocation-free: a spec's
//! memory is a few fixed buffers, and arenas sized once at init.
//!
//! - [`arena::Arena`]: storage set up once at init, outside the spec value (several bundles).
//! - [`buf::Buf`]: a byte buffer with a capacity (inline or in an arena) and a run-time limit
//!   (the MTU).
//! - [`sources::SourceSet`]: which IPv4 sources are in a bundle, O(1) lookup, O(1) clear.
//! - [`bundle::Bundle`]: one open bundle of a flow (buffer, sources, timer), for the specs
//!   that forward one datagram per round (`multiplex`, `gather`).
//! - [`udp`]: the UDP header the NAK and gather payloads ride in.
//! - [`config`]: reading numeric flow parameters with range checks.
//! - [`log::log`]: formatted log lines from a fixed buffer.
//! - [`test_host::TestHost`] (feature `test-host`): a [`concast_sdk::Host`] for native tests.
#![no_std]

// The arena's native side and the test host use std; a .wasm build never links it.
#[cfg(any(feature = "test-host", not(target_arch = "wasm32")))]
extern crate std;

pub mod arena;
pub mod buf;
pub mod bundle;
pub mod config;
pub mod log;
pub mod sources;
pub mod udp;

#[cfg(feature = "test-host")]
pub mod test_host;

use concast_sdk::wire::build::CONCAST_HEADER_LEN;

/// Largest payload a spec that keeps its one bundle inline in the spec value builds
/// (`gather`): the value is returned by value from [`concast_sdk::MergeSpec::init`] on a
/// 64 KiB Wasm stack. Specs whose bundles live in an [`arena::Arena`] (`multiplex`) go up to
/// [`MAX_PAYLOAD`].
pub const MAX_BUNDLE: usize = 4096;

/// Largest payload of any emitted datagram: an IPv4 total length of 65535 less the 28-byte
/// header the engine writes (IHL 7, the Concast ID option).
pub const MAX_PAYLOAD: usize = 65_535 - CONCAST_HEADER_LEN;

/// Payload bytes an emitted datagram may carry on a path of `path_mtu` bytes: the engine
/// writes a 28-byte header (IHL 7, the Concast ID option) in front of what a spec emits.
/// A spec's own buffer may cap it further ([`buf::Buf::reset`] never passes its capacity).
pub fn payload_limit(path_mtu: u32) -> usize {
    (path_mtu as usize)
        .saturating_sub(CONCAST_HEADER_LEN)
        .min(MAX_PAYLOAD)
}
