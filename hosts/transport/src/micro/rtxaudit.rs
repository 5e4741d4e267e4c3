//! Why each retransmission was sent, and which were unnecessary: a resent segment whose
//! acknowledgement comes sooner after the resend than the path's minimum RTT was acknowledged
//! for its original (the test RACK uses, RFC 8985 §6.2 step 2). Counted per loss detector
//! (`Stats::rtx_by_cause`, `Stats::rtx_early`), to tell which one resends what had arrived
//! (issue #23). Bookkeeping only: it changes no decision.
use std::collections::HashMap;

/// What declared a segment lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Duplicate ACK counting and the recovery's declarations (`micro::dupack`).
    DupAck = 0,
    /// RACK, run on an arriving ACK.
    Rack = 1,
    /// RACK, run on its reordering timer.
    RackTimer = 2,
    /// The retransmission timer (`micro::retransmit`).
    Timeout = 3,
}

pub const CAUSES: usize = 4;
pub const CAUSE_NAMES: [&str; CAUSES] = ["dupack", "rack", "rack_timer", "timeout"];

#[derive(Debug, Default)]
pub struct RtxAudit {
    /// Declared lost, not resent yet.
    declared: HashMap<u32, Cause>,
    /// Resent, not acknowledged yet: when, and why.
    resent: HashMap<u32, (u64, Cause)>,
}

impl RtxAudit {
    pub fn declared(&mut self, seq: u32, cause: Cause) {
        self.declared.insert(seq, cause);
    }

    /// `seq` was sent again at `now`; its cause (a resend nothing declared is the timer's).
    pub fn resent(&mut self, seq: u32, now: u64) -> Cause {
        let c = self.declared.remove(&seq).unwrap_or(Cause::Timeout);
        self.resent.insert(seq, (now, c));
        c
    }

    /// `seq` was acknowledged at `now`: the cause of its latest resend when that resend was
    /// unnecessary (acknowledged sooner than `min_rtt_us` after it).
    pub fn delivered(&mut self, seq: u32, now: u64, min_rtt_us: f64) -> Option<Cause> {
        if !self.declared.is_empty() {
            self.declared.remove(&seq);
        }
        if self.resent.is_empty() {
            return None;
        }
        let (at, c) = self.resent.remove(&seq)?;
        ((now.saturating_sub(at) as f64) < min_rtt_us).then_some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resend_acknowledged_within_the_minimum_rtt_was_unnecessary() {
        let mut a = RtxAudit::default();
        a.declared(1, Cause::Rack);
        a.declared(2, Cause::DupAck);
        assert_eq!(a.resent(1, 1_000), Cause::Rack);
        assert_eq!(a.resent(2, 1_000), Cause::DupAck);
        assert_eq!(a.resent(3, 1_000), Cause::Timeout, "nothing declared it: the timer");
        assert_eq!(a.delivered(1, 5_000, 100_000.0), Some(Cause::Rack), "4 ms after: the original's ACK");
        assert_eq!(a.delivered(2, 101_000, 100_000.0), None, "a round trip after: the resend's");
        assert_eq!(a.delivered(3, 2_000, 100_000.0), Some(Cause::Timeout));
        assert_eq!(a.delivered(3, 2_000, 100_000.0), None, "counted once");
        a.declared(4, Cause::DupAck);
        assert_eq!(a.delivered(4, 2_000, 100_000.0), None, "acknowledged before the resend");
        assert!(a.declared.is_empty() && a.resent.is_empty());
    }
}
