//! The concast API: JSON lines over a Unix stream socket (docs/hostd.md).

pub mod request;
pub mod server;

pub use request::{parse, Refusal, Request};
pub use server::{ClientId, Server};
