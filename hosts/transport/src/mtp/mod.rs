//! MTP transactions after Noble's "Development and Testing of a New Transport Protocol
//! Optimized for Multimedia Internet Transactions": the client pulls each object one reply
//! datagram per request through a non-contiguous window; the server answers every request from
//! the request alone and keeps no per-client state. Wire format and rules: docs/transport.md,
//! section "MTP".
//!
//! The API follows the spirit of the dissertation's mtp.h: `Client::new` (init),
//! `Client::request`, `Server::handle` with a `Responder` (respond), the sans-IO event loop
//! (`on_datagram`, `on_timer`, `next_timer`, `poll`) driven by `udp` or `sim`, and
//! `Client::abort` with its four modes.
pub mod blackbox;
pub mod client;
pub mod codes;
pub mod noble;
pub mod ranges;
pub mod server;
pub mod sim;
pub mod size;
pub mod tool;
pub mod udp;
pub mod window;
pub mod wire;

pub use client::{Abort, Client, ClientConfig, ClientStats, Output, RequestOpts};
pub use server::{Answer, Objects, Query, Responder, Server, ServerStats};
