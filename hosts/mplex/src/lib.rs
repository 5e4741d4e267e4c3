//! The host side of the multiplex service (docs/multiplex.md; Calvert et al., ICNP 2000).
//!
//! On a sender, the kernel's own pure TCP ACKs toward an enabled receiver R (or the small
//! datagrams of an application flow turned on by port) are taken from
//! an NFQUEUE, each becomes a one-record MplexPkt of flow (R, G), and concast routers bundle
//! those of several hosts on the way. At R, MplexPkts arrive on a protocol-254 raw socket,
//! are unbundled (TTL rule, rebuilt headers) and injected through a TUN device, so R's TCP
//! sees exactly the ACKs its peers sent.
//!
//! - [`selection`]: what one sender flow takes (the kernel's ACKs toward R, or one
//!   application's flow by protocol and ports); [`select`]: which of those are multiplexed
//!   (protocol.md 3.4);
//! - [`checksum`]: completing partial TCP checksums;
//! - [`encap`]: a datagram into a one-record MplexPkt;
//! - [`unbundle`]: an MplexPkt into datagrams (protocol.md 3.3);
//! - [`netlink`], [`nfqueue`]: the NFQUEUE listener; [`iptables`]: its rule;
//! - [`tun`]: the injection device; [`sockets`]: raw sockets;
//! - [`config`]: Mplex_Control's parameters; [`counters`]; [`service`]: all of it as one
//!   value an event loop owns.

pub mod checksum;
pub mod config;
pub mod counters;
pub mod encap;
pub mod iptables;
pub mod netlink;
pub mod nfqueue;
pub mod select;
pub mod selection;
pub mod service;
pub mod sockets;
pub mod tun;
pub mod unbundle;

#[cfg(test)]
mod testpkt;

pub use config::SenderConfig;
pub use selection::{FlowProto, Selection};
pub use service::{Forward, Mplex, Options, SenderState, Source};
