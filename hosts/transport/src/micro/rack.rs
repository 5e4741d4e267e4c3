//! Time-based loss detection after RACK (RFC 8985): a segment is lost when a segment sent
//! after it has been delivered and it is still unacknowledged a reordering window later. The
//! mechanism is here (its state lives in `Shared::rack`, fed by Positive ACK's sends and
//! acknowledgements, and run by Duplicate ACK, which declares what it finds lost); whether an
//! algorithm uses it, and its reordering window, is policy (`cc::CcCtl::rack`, as the RTO
//! policy is).
//!
//! What it adds to duplicate ACKs: a retransmission that is lost again is found as soon as
//! data sent after it is acknowledged, where counting duplicate ACKs never declares the same
//! segment twice and leaves it to the retransmission timer (issue #23: after sixteen slow
//! starts overflowed one queue, every such loss cost an RTO of SRTT + 200 ms, backed off).
use std::collections::{HashMap, VecDeque};

/// An algorithm's use of RACK: the reordering window is this fraction of the minimum RTT,
/// never more than the SRTT (RFC 8985 §6.2 step 4, whose default fraction is 1/4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RackPolicy {
    pub reo_wnd_min_rtt: f64,
}

/// RFC 8985's default: a quarter of the minimum RTT.
pub const RACK_DEFAULT: RackPolicy = RackPolicy { reo_wnd_min_rtt: 0.25 };

/// A segment's latest transmission.
#[derive(Clone, Copy, Debug)]
struct Xmit {
    at_us: u64,
    /// Not the first transmission (an ACK of it may be for the original: RFC 8985 §6.2 step 2).
    rtx: bool,
    /// Declared lost since it was sent (by RACK or by duplicate ACKs): not declared again
    /// until it is sent again.
    lost: bool,
}

#[derive(Debug, Default)]
pub struct Rack {
    /// None: the algorithm does not use RACK and nothing is tracked.
    pub policy: Option<RackPolicy>,
    /// Each unacknowledged data segment's latest transmission, by sequence number.
    sent: HashMap<u32, Xmit>,
    /// Transmissions in the order sent, (time, seq); an entry whose segment was acknowledged,
    /// sent again or declared lost since is dropped when it reaches the front.
    order: VecDeque<(u64, u32)>,
    /// The latest-sent of the segments delivered so far, (send time, seq), and its RTT.
    latest: Option<(u64, u32)>,
    rtt_us: u64,
    /// Losses this detector found (the rest were found by duplicate ACKs or the timer).
    pub found: u64,
    /// The send time (µs, as the TS attribute carries it) the ACK being processed echoes;
    /// 0 when it echoes none. Set by Positive ACK for each ACK.
    pub ack_echo: u32,
}

impl Rack {
    /// A data segment left (`rtx`: not for the first time).
    pub fn sent(&mut self, seq: u32, now: u64, rtx: bool) {
        if self.policy.is_none() {
            return;
        }
        self.sent.insert(seq, Xmit { at_us: now, rtx, lost: false });
        self.order.push_back((now, seq));
    }

    /// A data segment was acknowledged, cumulatively or selectively, at `now`.
    pub fn delivered(&mut self, seq: u32, now: u64, min_rtt_us: f64) {
        if self.policy.is_none() {
            return;
        }
        let Some(x) = self.sent.remove(&seq) else { return };
        let rtt = now.saturating_sub(x.at_us);
        // a retransmission acknowledged sooner than the path allows, or by an ACK echoing a
        // timestamp older than it: the ACK was for an earlier transmission (RFC 8985 §6.2
        // step 2). Without the echo, an ACK delayed past the minimum RTT took a spurious
        // timeout's resend as delivered, and every retransmission sent before it, still on
        // its way, was declared lost at once (issue #23, tests/timeout_redeclare.rs)
        let echo_older = self.ack_echo != 0 && (x.at_us as u32).max(1).wrapping_sub(self.ack_echo) as i32 > 0;
        if x.rtx && ((rtt as f64) < min_rtt_us || echo_older) {
            return;
        }
        if self.latest.is_none_or(|l| (x.at_us, seq) > l) {
            self.latest = Some((x.at_us, seq));
            self.rtt_us = rtt;
        }
    }

    /// Duplicate ACKs declared `seq` lost: its current transmission is not declared again.
    pub fn declared(&mut self, seq: u32) {
        if let Some(x) = self.sent.get_mut(&seq) {
            x.lost = true;
        }
    }

    /// The segments now lost (RFC 8985 §6.2 step 5): sent before the latest delivered one
    /// and unacknowledged for its RTT plus the reordering window. Also how long until the
    /// next one would be, if any is pending (for a reordering timer).
    pub fn detect(&mut self, now: u64, srtt_us: f64, min_rtt_us: f64) -> (Vec<u32>, Option<u64>) {
        let (Some(p), Some(latest)) = (self.policy, self.latest) else { return (Vec::new(), None) };
        let reo = (min_rtt_us * p.reo_wnd_min_rtt).min(srtt_us).max(0.0) as u64;
        let mut lost = Vec::new();
        while let Some(&(at, q)) = self.order.front() {
            let Some(x) = self.sent.get_mut(&q).filter(|x| x.at_us == at && !x.lost) else {
                self.order.pop_front();
                continue;
            };
            if (at, q) >= latest {
                break; // sent after the latest delivered one: nothing to say yet
            }
            let due = at + self.rtt_us + reo;
            if due > now {
                return (lost, Some(due - now));
            }
            x.lost = true;
            self.order.pop_front();
            lost.push(q);
        }
        self.found += lost.len() as u64;
        (lost, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rack() -> Rack {
        Rack { policy: Some(RACK_DEFAULT), ..Rack::default() }
    }

    #[test]
    fn a_lost_retransmission_is_found_once_later_data_is_delivered() {
        let mut r = rack();
        // 1..=4 sent at 0 and 2..=4 delivered at 100 ms: 1 is lost once their RTT and a
        // quarter of the minimum RTT have passed
        for q in 1..=4 {
            r.sent(q, 0, false);
        }
        for q in 2..=4 {
            r.delivered(q, 100_000, 100_000.0);
        }
        assert_eq!(r.detect(100_000, 100_000.0, 100_000.0), (vec![], Some(25_000)), "within the window");
        assert_eq!(r.detect(125_000, 100_000.0, 100_000.0).0, vec![1]);
        // 1 resent at 125 ms, 5 sent at 126 ms; 5 arrives, the retransmission of 1 does not
        r.sent(1, 125_000, true);
        r.sent(5, 126_000, false);
        r.delivered(5, 226_000, 100_000.0);
        assert_eq!(r.detect(226_000, 100_000.0, 100_000.0), (vec![], Some(24_000)));
        assert_eq!(r.detect(250_000, 100_000.0, 100_000.0).0, vec![1], "the retransmission is lost");
        assert_eq!(r.detect(400_000, 100_000.0, 100_000.0).0, Vec::<u32>::new(), "declared once per transmission");
        assert_eq!(r.found, 2);
    }

    #[test]
    fn an_early_ack_of_a_retransmission_is_taken_for_the_original() {
        let mut r = rack();
        r.sent(1, 0, false);
        r.sent(2, 1_000, false);
        r.sent(1, 50_000, true); // a timeout resent 1
        r.delivered(1, 60_000, 100_000.0); // 10 ms later: the original's ACK, not this one's
        assert_eq!(r.latest, None);
        r.delivered(2, 101_000, 100_000.0);
        assert_eq!(r.latest, Some((1_000, 2)));
    }

    #[test]
    fn an_ack_echoing_an_earlier_transmission_is_not_the_retransmissions() {
        let mut r = rack();
        r.sent(1, 0, false);
        r.sent(2, 1_000, false);
        r.sent(1, 400_000, true); // a timeout resent 1
        // 150 ms later, past the minimum RTT, but echoing the first transmission's time
        r.ack_echo = 1;
        r.delivered(1, 550_000, 100_000.0);
        assert_eq!(r.latest, None, "taken for the first transmission's");
        r.sent(3, 410_000, true);
        r.ack_echo = 410_000;
        r.delivered(3, 560_000, 100_000.0);
        assert_eq!(r.latest, Some((410_000, 3)), "echoing its own time: this transmission's");
    }

    #[test]
    fn no_policy_tracks_nothing_and_duplicate_acks_count_as_declared() {
        let mut r = Rack::default();
        r.sent(1, 0, false);
        assert!(r.sent.is_empty() && r.order.is_empty());
        let mut r = rack();
        r.sent(1, 0, false);
        r.sent(2, 0, false);
        r.declared(1);
        r.delivered(2, 100_000, 100_000.0);
        assert_eq!(r.detect(1_000_000, 100_000.0, 100_000.0).0, Vec::<u32>::new());
    }
}
