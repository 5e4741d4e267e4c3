//! hostd's counters, as `concast host stats` shows them (docs/hostd.md lists each one).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// Declared once: each field is shown under its own name (plus `malformed_dropped`, the sum
/// of `malformed`).
#[derive(Debug, Default, Clone, Serialize)]
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
        let mut v = serde_json::to_value(self).expect("counters serialize");
        v["malformed_dropped"] = self.malformed.values().sum::<u64>().into();
        v
    }
}
