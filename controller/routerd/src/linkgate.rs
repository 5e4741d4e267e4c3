//! The egress gate routerd gives the merge engine (docs/multiplex.md "Queue access"): which
//! link a flow's datagrams leave by (longest-prefix match of R over the config's
//! `egress_routes` entries that carry a `link_slot`) and when that link's transmitter will be
//! free (the link emulator's state file, [`crate::linkstate`]). One seqlock read per
//! finished state.

use std::net::Ipv4Addr;

use concast_engine::{EgressGate, FlowId};

use crate::config::{self, Prefix};
use crate::linkstate::LinkState;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkRoute {
    pub net: Prefix,
    /// The state file's slot of the link direction leaving through this route's port.
    pub slot: u32,
}

/// The `egress_routes` entries with a `link_slot` (others have no emulated link to ask),
/// longest prefix first.
pub fn parse_link_routes(list: &[config::Route]) -> Result<Vec<LinkRoute>, String> {
    let mut routes = Vec::new();
    for r in list {
        let Some(slot) = r.link_slot else { continue };
        routes.push(LinkRoute { net: r.net()?, slot });
    }
    routes.sort_by_key(|r| std::cmp::Reverse(r.net.len));
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
            return Err(format!("egress route {}: link_slot {} but the link state file has {} slots", r.net, r.slot, state.slot_count()));
        }
        Ok(LinkGate { state, routes, origin_ns })
    }

    fn slot_for(&self, dst: Ipv4Addr) -> Option<u32> {
        self.routes.iter().find(|r| r.net.covers(dst)).map(|r| r.slot)
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
        let routes = |v| serde_json::from_value::<Vec<config::Route>>(v).unwrap();
        let v = routes(json!([
            {"prefix": "10.0.0.0/8", "iface": "a", "mac": "02:00:00:00:00:01", "link_slot": 1},
            {"prefix": "10.0.3.0/24", "iface": "b", "mac": "02:00:00:00:00:02", "link_slot": 4},
            {"prefix": "10.9.0.0/16", "iface": "c", "mac": "02:00:00:00:00:03"},
        ]));
        let r = parse_link_routes(&v).unwrap();
        assert_eq!(r.iter().map(|r| (r.net.len, r.slot)).collect::<Vec<_>>(), [(24, 4), (8, 1)]);
        // A slot that is not a number is refused by the typed read, before this parser.
        assert!(serde_json::from_value::<Vec<config::Route>>(json!([{"prefix": "10.0.0.0/8", "iface": "a", "mac": "m", "link_slot": "x"}])).is_err());
        let bad = routes(json!([{"prefix": "10.0.0.0/33", "iface": "a", "mac": "m", "link_slot": 0}]));
        assert!(parse_link_routes(&bad).unwrap_err().contains("length"));
        // A route without a slot is not parsed at all (it has no link to ask).
        let none = routes(json!([{"prefix": "bad", "iface": "a", "mac": "m"}]));
        assert_eq!(parse_link_routes(&none).unwrap(), []);
    }
}
