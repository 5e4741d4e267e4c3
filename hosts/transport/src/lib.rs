//! The hosts' own transport stack, after CTP (Bridges et al., a configurable transport built from
//! microprotocols on the Cactus event framework) and UDT/CCC (Gu and Grossman, configurable
//! congestion control).
//!
//! The core is sans-IO: a [`Session`] never reads a clock or a socket. The caller passes the time
//! (microseconds, any origin) and the datagrams in, and takes [`Output`]s out; [`udp`] is a thin
//! driver doing that over a real UDP socket, and [`sim`] does it in virtual time over a seeded
//! lossy link for tests.
pub mod attr;
pub mod cc;
pub mod composite;
pub mod event;
pub mod ffi;
pub mod ffi_mtp;
pub mod micro;
pub mod mtp;
pub mod segment;
pub mod segtable;
pub mod session;
pub mod sim;
pub mod udp;

pub use composite::{Composite, MicroId, Preset};
pub use event::{Arg, Barrier, Event};
pub use session::{Config, Output, Session};
/// Payloads and messages handed over without a copy (`Session::send_shared`).
pub use bytes::Bytes;
