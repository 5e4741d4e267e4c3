//! The egress gate routerd gives the merge engine (docs/multiplex.md "Queue access"): which
//! link a flow's datagrams leave by (longest-prefix match of R over the config's
//! `egress_routes` entries that carry a `link_slot`) and when that link's transmitter will be
//! free (the link emulator's state file, [`crate::linkstate`]). One seqlock read per
//! finished state.

use std::net::Ipv4Addr;

use concast_engine::{EgressGate, FlowId};
use serde_json::Value;

use crate::linkstate::LinkState;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkRoute {
    pub prefix: Ipv4Addr,
    pub len: u8,
    /// The state file's slot of the link direction leaving through this route's port.
    pub slot: u32,
}

impl LinkRoute {
    fn covers(&self, dst: u32) -> bool {
        let mask = if self.len == 0 { 0 } else { u32::MAX << (32 - u32::from(self.len)) };
        dst & mask == u32::from(self.prefix) & mask
    }
}

/// The `egress_routes` entries with a `link_slot` (others have no emulated link to ask).
pub fn parse_link_routes(v: &Value) -> Result<Vec<LinkRoute>, String> {
    let list = v.as_array().ok_or("egress_routes is not a list")?;
    let mut routes = Vec::new();
    for r in list {
        let Some(slot) = r.get("link_slot") else { continue };
        let slot = slot.as_u64().and_then(|s| u32::try_from(s).ok()).ok_or_else(|| format!("egress route {r}: link_slot is not a slot number"))?;
        let text = r.get("prefix").and_then(Value::as_str).ok_or_else(|| format!("egress route {r} has no prefix"))?;
        let (prefix, len) = text.split_once('/').ok_or_else(|| format!("egress route {r}: prefix is not A.B.C.D/LEN"))?;
        let prefix = prefix.parse().map_err(|_| format!("egress route {r}: bad prefix"))?;
        let len = len.parse().ok().filter(|l| *l <= 32).ok_or_else(|| format!("egress route {r}: bad prefix length"))?;
        routes.push(LinkRoute { prefix, len, slot });
    }
    routes.sort_by_key(|r| std::cmp::Reverse(r.len));
    Ok(routes)
}

pub struct LinkGate {
    state: LinkState,
    routes: Vec<LinkRoute>,
    /// CLOCK_MONOTONIC ns at the engine's time 0 (routerd's clock start).
    origin_ns: u64,
}

impl LinkGate {
    /// A gate over `state` for `routes`; slots the file lacks are refused here, so a typo
    /// in the config is an error at start rather than a gate that never holds.
    pub fn new(state: LinkState, routes: Vec<LinkRoute>, origin_ns: u64) -> Result<LinkGate, String> {
        if let Some(r) = routes.iter().find(|r| r.slot >= state.slot_count()) {
            return Err(format!("egress route {}/{}: link_slot {} but the link state file has {} slots", r.prefix, r.len, r.slot, state.slot_count()));
        }
        Ok(LinkGate { state, routes, origin_ns })
    }

    fn slot_for(&self, dst: Ipv4Addr) -> Option<u32> {
        let dst = u32::from(dst);
        self.routes.iter().find(|r| r.covers(dst)).map(|r| r.slot)
    }
}

impl EgressGate for LinkGate {
    fn busy_until(&mut self, flow: FlowId, now: u64) -> Option<u64> {
        let slot = self.slot_for(flow.receiver)?;
        let free_ns = self.state.read(slot)?.tx_free_at_ns.checked_sub(self.origin_ns)?;
        let free_us = free_ns.div_ceil(1_000);
        (free_us > now).then_some(free_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_routes_with_a_link_slot_and_longest_prefix_first() {
        let v = json!([
            {"prefix": "10.0.0.0/8", "iface": "a", "mac": "02:00:00:00:00:01", "link_slot": 1},
            {"prefix": "10.0.3.0/24", "iface": "b", "mac": "02:00:00:00:00:02", "link_slot": 4},
            {"prefix": "10.9.0.0/16", "iface": "c", "mac": "02:00:00:00:00:03"},
        ]);
        let r = parse_link_routes(&v).unwrap();
        assert_eq!(r.iter().map(|r| (r.len, r.slot)).collect::<Vec<_>>(), [(24, 4), (8, 1)]);
        assert!(parse_link_routes(&json!([{"prefix": "10.0.0.0/8", "link_slot": "x"}])).unwrap_err().contains("link_slot"));
        assert!(parse_link_routes(&json!([{"prefix": "10.0.0.0/33", "link_slot": 0}])).unwrap_err().contains("length"));
    }
}
