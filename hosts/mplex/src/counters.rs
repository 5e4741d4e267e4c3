//! Per-flow counters of the multiplex module, as `concast mplex status` and hostd's `stats`
//! show them (docs/multiplex.md lists each one).

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};
use serde_json::Value;

/// A sender flow (this host multiplexing its ACKs toward one receiver). Each field is shown
/// under its own name, plus `passed_untouched` (the sum of `passed`).
#[derive(Debug, Default, Clone, Serialize)]
pub struct SenderCounters {
    /// Packets the queue handed us for this flow.
    pub captured: u64,
    /// Of those, turned into one-record MplexPkts.
    pub encapsulated: u64,
    /// MplexPkts written to the raw socket (the kernel dropped the original).
    pub sent: u64,
    /// MplexPkts the socket refused; their original went out plain instead.
    pub send_errors: u64,
    /// Captured packets let through unchanged, by reason (`select::PassReason` names).
    pub passed: BTreeMap<&'static str, u64>,
}

impl SenderCounters {
    pub fn pass(&mut self, reason: &'static str) {
        *self.passed.entry(reason).or_default() += 1;
    }

    pub fn passed_untouched(&self) -> u64 {
        self.passed.values().sum()
    }

    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).expect("counters serialize");
        v["passed_untouched"] = self.passed_untouched().into();
        v
    }
}

/// A receiver group (this host unbundling MplexPkts of group G). Each field is shown under
/// its own name, plus `mean_bundle` (records per MplexPkt).
#[derive(Debug, Default, Clone, Serialize)]
pub struct ReceiverCounters {
    /// MplexPkts of the group that arrived well-formed.
    pub mplex_received: u64,
    /// Records in them.
    pub records: u64,
    /// Rebuilt datagrams written into the TUN device.
    pub delivered: u64,
    /// Records dropped by the TTL rule (TTL' <= 0).
    pub expired_ttl: u64,
    /// Malformed MplexPkts of the group, dropped whole.
    pub malformed_dropped: u64,
    /// Rebuilt datagrams the TUN device refused.
    pub inject_errors: u64,
    /// Records per MplexPkt: how many packets arrived with each bundle size.
    pub bundle_sizes: BTreeMap<u32, u64>,
    /// MplexPkts that arrived with DelayedSoFar > MaxTotalDelay (a node held them past the
    /// budget), and the records in them.
    pub late_packets: u64,
    pub late_records: u64,
    /// The largest overshoot seen (DelayedSoFar - MaxTotalDelay, µs).
    pub max_late_us: u32,
    /// Late MplexPkts by overshoot: [`LATE_BUCKETS`] upper bounds in µs, then the rest
    /// (shown as `{"0-10us": n, ..., ">100000us": n}`).
    #[serde(serialize_with = "named_buckets")]
    pub late_hist: [u64; LATE_BUCKETS.len() + 1],
}

/// Upper bounds (µs, inclusive) of the lateness histogram's buckets.
pub const LATE_BUCKETS: [u32; 5] = [10, 100, 1_000, 10_000, 100_000];

impl ReceiverCounters {
    pub fn note_bundle(&mut self, records: u32) {
        *self.bundle_sizes.entry(records).or_default() += 1;
    }

    /// Checks an arrived MplexPkt's delay fields against its budget.
    pub fn note_delay(&mut self, max_total_delay: u32, delayed_so_far: u32, records: u32) {
        let Some(late) = delayed_so_far.checked_sub(max_total_delay).filter(|&l| l > 0) else {
            return;
        };
        self.late_packets += 1;
        self.late_records += u64::from(records);
        self.max_late_us = self.max_late_us.max(late);
        let bucket = LATE_BUCKETS.iter().position(|&b| late <= b).unwrap_or(LATE_BUCKETS.len());
        self.late_hist[bucket] += 1;
    }

    pub fn to_json(&self) -> Value {
        let mean = if self.mplex_received == 0 {
            0.0
        } else {
            self.records as f64 / self.mplex_received as f64
        };
        let mut v = serde_json::to_value(self).expect("counters serialize");
        v["mean_bundle"] = ((mean * 100.0).round() / 100.0).into();
        v
    }
}

/// The lateness histogram by bucket name: `lower-upperus`, then `>lowerus` for the rest.
fn named_buckets<S: Serializer>(hist: &[u64; LATE_BUCKETS.len() + 1], s: S) -> Result<S::Ok, S::Error> {
    let mut lower = 0;
    let mut out = BTreeMap::new();
    for (i, n) in hist.iter().enumerate() {
        let name = match LATE_BUCKETS.get(i) {
            Some(&upper) => format!("{lower}-{upper}us"),
            None => format!(">{lower}us"),
        };
        out.insert(name, *n);
        lower = LATE_BUCKETS.get(i).copied().unwrap_or(lower);
    }
    out.serialize(s)
}

/// What belongs to no enabled flow.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Unmatched {
    /// Queued packets toward a receiver with no capturing flow (a rule left behind): passed.
    pub queued_no_flow: u64,
    /// MplexPkts of a group this host does not receive: dropped.
    pub mplex_other_group: u64,
    /// Protocol-254 datagrams that are not valid MplexPkts, by protocol.md error name.
    pub malformed: BTreeMap<&'static str, u64>,
}

impl Unmatched {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("counters serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shapes() {
        let mut s = SenderCounters::default();
        s.pass("too_large");
        s.pass("too_large");
        s.pass("fragment");
        assert_eq!(s.to_json()["passed_untouched"], 3);
        assert_eq!(s.to_json()["passed"]["too_large"], 2);
        let mut r = ReceiverCounters {
            mplex_received: 2,
            records: 5,
            ..Default::default()
        };
        r.note_bundle(2);
        r.note_bundle(3);
        assert_eq!(r.to_json()["mean_bundle"], 2.5);
        assert_eq!(r.to_json()["bundle_sizes"]["3"], 1);
    }

    #[test]
    fn lateness_counts_only_bundles_past_their_budget() {
        let mut r = ReceiverCounters::default();
        r.note_delay(150_000, 150_000, 4); // exactly at the budget: in time
        r.note_delay(150_000, 149_000, 2);
        assert_eq!((r.late_packets, r.late_records), (0, 0));
        r.note_delay(150_000, 150_163, 3);
        r.note_delay(10_000, 10_005, 1);
        r.note_delay(10_000, 500_000, 1);
        assert_eq!((r.late_packets, r.late_records, r.max_late_us), (3, 5, 490_000));
        let j = r.to_json();
        assert_eq!(j["late_hist"]["0-10us"], 1);
        assert_eq!(j["late_hist"]["100-1000us"], 1);
        assert_eq!(j["late_hist"][">100000us"], 1);
        assert_eq!(j["late_records"], 5);
    }
}
