//! The egress gate: how an embedder lets finished merge states wait for a busy output link
//! (the paper's "queue access", docs/multiplex.md). The engine asks once before each `done`
//! or `timeout` call of a flow; the spec sees the answer (`egress_free_at`) and, if the call
//! says build and the spec gave a hold limit, the engine holds the state by the same answer.
//! The embedder answers from whatever knows the link's transmitter (routerd: the link
//! emulator's shared state file).

use crate::ipv4::FlowId;

pub trait EgressGate: Send {
    /// When the transmitter that datagrams of `flow` leave by will have sent everything
    /// queued on it, on the engine's clock (µs); `None` when it is idle or unknown. A
    /// datagram built now would wait in that queue until then anyway, so the engine may keep
    /// the state open (still merging) until that time, never past the spec's hold limit.
    fn busy_until(&mut self, flow: FlowId, now: u64) -> Option<u64>;
}
