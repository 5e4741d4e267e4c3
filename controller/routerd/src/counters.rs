//! routerd's own counters, as `concast router stats` shows them.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// Declared once: each field is shown under its own name (plus `malformed_dropped`, their sum).
#[derive(Debug, Default, Clone, Serialize)]
pub struct Counters {
    /// Frames read from the CPU port.
    pub frames_in: u64,
    /// Concast datagrams of an active flow, handed to the merge engine.
    pub diverted: u64,
    /// Of those, datagrams the engine took in (equal to `diverted` unless a flow vanished).
    pub merged_in: u64,
    /// Merged datagrams the engine built and routerd sent on.
    pub merged_out: u64,
    /// Concast datagrams sent on unmerged (spec passed them, quarantined flow, fail-open).
    pub forwarded_unmerged: u64,
    /// Frames sent back unchanged: no state for their flow, not concast, CSP for others.
    pub passed_through: u64,
    /// Fragments of a concast flow sent on unchanged, never shown to a spec (protocol.md 1.2).
    pub fragments_passed: u64,
    /// Datagrams addressed to this router that are not CSP.
    pub local_dropped: u64,
    pub csp_in: u64,
    pub csp_out: u64,
    /// Malformed frames dropped, by the error name of docs/protocol.md.
    pub malformed: BTreeMap<&'static str, u64>,
    pub flows_activated: u64,
    pub quarantined_flows: u64,
    /// Tries to install a flow's diversion that failed (each retry that failed counts too).
    pub divert_failures: u64,
    /// Retries that installed a diversion that had failed.
    pub divert_retries_installed: u64,
    /// MplexPkts this router sent with DelayedSoFar above MaxTotalDelay (protocol.md 3.2-2):
    /// it held them past their total budget (a timer that fired later than the lead).
    pub mplex_budget_overruns: u64,
    /// The largest such overrun, DelayedSoFar - MaxTotalDelay, in µs.
    pub mplex_budget_overrun_max_us: u64,
}

impl Counters {
    pub fn count_malformed(&mut self, error: &'static str) {
        *self.malformed.entry(error).or_default() += 1;
    }

    /// Counts an MplexPkt this router built, if it overran its total delay budget.
    pub fn count_mplex_sent(&mut self, max_total_delay: u32, delayed_so_far: u32) {
        if delayed_so_far > max_total_delay {
            self.mplex_budget_overruns += 1;
            let over = u64::from(delayed_so_far - max_total_delay);
            self.mplex_budget_overrun_max_us = self.mplex_budget_overrun_max_us.max(over);
        }
    }

    pub fn malformed_dropped(&self) -> u64 {
        self.malformed.values().sum()
    }

    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).expect("counters serialize");
        v["malformed_dropped"] = self.malformed_dropped().into();
        v
    }
}
