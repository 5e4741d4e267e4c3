//! concast-hostd as a library: the daemon's parts, so tests can drive a [`Host`] in process
//! with real CSP and the real merge engine, and the binary stays a thin shell.
//!
//! - [`host`]: the per-event logic (CSP endpoint, sender-side merging, final merge, API ops).
//! - [`sender`], [`receiver`]: the two sides' state.
//! - [`api`]: the JSON-lines Unix socket (requests checked in `api::request`).
//! - [`rawsock`], [`udp`]: the network end: raw IPv4 sockets and the datagrams hostd builds.
//! - [`mplex`]: Mplex_Control, the multiplex module (`concast-mplex`) paired with CSP.
//! - [`reactor`], [`daemon`]: the poll loop that ties sockets, timers and clients together.

pub mod api;
pub mod counters;
pub mod daemon;
pub mod host;
pub mod mplex;
pub mod rawsock;
pub mod reactor;
pub mod receiver;
pub mod sender;
pub mod speckey;
pub mod udp;

pub use host::{Event, Host, Wire};

pub use concast_wire::hex;
