//! hostd's counters, as `concast host stats` shows them (docs/hostd.md lists each one).

use std::collections::BTreeMap;

use serde_json::{json, Value};

#[derive(Debug, Default, Clone)]
pub struct Counters {
    // --- the application's datagrams (API `send`): each lands in exactly one of these four
    /// Handed to this host's merge engine (flow joined, spec active here).
    pub app_merging: u64,
    /// Sent as concast datagrams without merging here (not joined, joining, spec not usable).
    pub app_unmerged: u64,
    /// Sent as plain UDP: the flow fell back to unicast.
    pub app_plain: u64,
    /// Refused with an error reply (bad request, or the socket would not take it).
    pub app_rejected: u64,

    // --- what went onto the wire
    /// Datagrams written: merged, unmerged and plain data (not CSP).
    pub data_out: u64,
    /// Of those, merged datagrams built by this host's engine (sender-side merging).
    pub merged_out: u64,
    /// Datagrams the engine built or released that the socket refused (logged).
    pub send_errors: u64,
    /// Datagrams the multiplex module captured and handed to this host's engine to bundle.
    pub mplex_bundling: u64,

    // --- arriving data (this host as receiver R)
    /// Concast datagrams addressed to this host.
    pub concast_in: u64,
    /// Plain UDP datagrams to a port a subscription names.
    pub plain_in: u64,
    /// Of `concast_in`, those fed to the group's spec for the final merge.
    pub final_merge_in: u64,
    /// Datagrams the final merge built.
    pub final_merge_out: u64,
    /// Datagrams streamed to subscribers (one per datagram, however many subscribers).
    pub delivered: u64,
    /// Datagrams nobody subscribed to (counted, then dropped).
    pub undelivered: u64,
    /// Duplicates the kernel queued on held ports, discarded.
    pub kernel_copies: u64,

    // --- signalling
    pub csp_in: u64,
    pub csp_out: u64,
    pub fallbacks: u64,
    pub quarantined_flows: u64,
    /// ERROR FLOW_QUARANTINED from routers about groups this host serves (as R).
    pub upstream_quarantines: u64,

    // --- API clients
    pub api_requests: u64,
    pub api_errors: u64,
    /// Events not written because a client stopped reading (its queue was full).
    pub events_dropped: u64,

    /// Malformed datagrams dropped, by the error name of docs/protocol.md.
    pub malformed: BTreeMap<&'static str, u64>,
}

impl Counters {
    pub fn count_malformed(&mut self, error: &'static str) {
        *self.malformed.entry(error).or_default() += 1;
    }

    pub fn to_json(&self) -> Value {
        json!({
            "app_merging": self.app_merging,
            "app_unmerged": self.app_unmerged,
            "app_plain": self.app_plain,
            "app_rejected": self.app_rejected,
            "data_out": self.data_out,
            "merged_out": self.merged_out,
            "send_errors": self.send_errors,
            "mplex_bundling": self.mplex_bundling,
            "concast_in": self.concast_in,
            "plain_in": self.plain_in,
            "final_merge_in": self.final_merge_in,
            "final_merge_out": self.final_merge_out,
            "delivered": self.delivered,
            "undelivered": self.undelivered,
            "kernel_copies": self.kernel_copies,
            "csp_in": self.csp_in,
            "csp_out": self.csp_out,
            "fallbacks": self.fallbacks,
            "quarantined_flows": self.quarantined_flows,
            "upstream_quarantines": self.upstream_quarantines,
            "api_requests": self.api_requests,
            "api_errors": self.api_errors,
            "events_dropped": self.events_dropped,
            "malformed_dropped": self.malformed.values().sum::<u64>(),
            "malformed": self.malformed,
        })
    }
}
