//! The Concast Signalling Protocol (docs/protocol.md section 2) as sans-IO state machines.
//!
//! A [`Node`] takes decoded CSP messages and host API calls, and answers with [`Action`]s:
//! messages to send, flows to activate or tear down, fallbacks to report. It never touches a
//! socket or a clock: every call passes `now` in microseconds, so routerd and hostd drive it
//! with real time and the tests with virtual time. One node plays every role its address
//! calls for: a router intercepts joins for other receivers; a host joins flows as a sender
//! and answers joins for the groups it serves as receiver.

mod children;
pub mod codec;
mod config;
mod msg;
mod node;
pub mod sign;
mod store;

pub use config::Config;
pub use msg::{Body, ErrorCode, FlowId, JoinBody, Msg, Selector, SpecHash, SpecSig, NO_HASH};
pub use node::{Action, CspCounters, FlowStatus, LinkMtu, Node, Role, SpecCheck};
pub use store::{chunk_count, sha256, SpecStore, CHUNK_SIZE, MAX_SPEC_SIZE};
