//! Per-flow counters of the multiplex module, as `concast mplex status` and hostd's `stats`
//! show them (docs/multiplex.md lists each one).

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// A sender flow (this host multiplexing its ACKs toward one receiver).
#[derive(Debug, Default, Clone)]
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
        json!({
            "captured": self.captured,
            "encapsulated": self.encapsulated,
            "sent": self.sent,
            "send_errors": self.send_errors,
            "passed_untouched": self.passed_untouched(),
            "passed": self.passed,
        })
    }
}

/// A receiver group (this host unbundling MplexPkts of group G).
#[derive(Debug, Default, Clone)]
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
}

impl ReceiverCounters {
    pub fn note_bundle(&mut self, records: u32) {
        *self.bundle_sizes.entry(records).or_default() += 1;
    }

    pub fn to_json(&self) -> Value {
        let mean = if self.mplex_received == 0 {
            0.0
        } else {
            self.records as f64 / self.mplex_received as f64
        };
        json!({
            "mplex_received": self.mplex_received,
            "records": self.records,
            "delivered": self.delivered,
            "expired_ttl": self.expired_ttl,
            "malformed_dropped": self.malformed_dropped,
            "inject_errors": self.inject_errors,
            "mean_bundle": (mean * 100.0).round() / 100.0,
            "bundle_sizes": self.bundle_sizes.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>(),
        })
    }
}

/// What belongs to no enabled flow.
#[derive(Debug, Default, Clone)]
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
        json!({
            "queued_no_flow": self.queued_no_flow,
            "mplex_other_group": self.mplex_other_group,
            "malformed": self.malformed,
        })
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
}
