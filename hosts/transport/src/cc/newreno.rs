//! NewReno (RFC 6582): slow start, additive increase, halve once per loss window.
use super::hystart::{Grow, HyStart};
use super::{reno_increase, CcCtl, Ccc, RackPolicy, RtoPolicy};

pub struct NewReno {
    pub ssthresh: f64,
    recover: Option<u32>,
    /// ssthresh before the first of a run of timeouts, until an ACK advances (for the undo).
    before_timeout: Option<f64>,
    /// The RTO policy set at init; None keeps the session's.
    rto: Option<RtoPolicy>,
    /// RACK's reordering window, set at init; None: duplicate ACKs and the timer only.
    rack: Option<RackPolicy>,
    /// HyStart++ (RFC 9406) during the initial slow start; dropped at its end, at the first
    /// loss or timeout (standard slow start after them, §4.2).
    hystart: Option<HyStart>,
    /// Pace the initial slow start at `SS_PACE_RATIO` times cwnd per SRTT (`ctcp_hs`; see `pace`).
    pace_ss: bool,
    name: &'static str,
}

/// Slow start's pacing rate over cwnd/SRTT: the window doubles each round, so the ACKs of one
/// round clock out twice what they acknowledge; Linux's default for its own paced slow start
/// (`tcp_pacing_ss_ratio`, 200 %) is the same.
const SS_PACE_RATIO: f64 = 2.0;

impl Default for NewReno {
    fn default() -> Self {
        NewReno {
            ssthresh: f64::INFINITY,
            recover: None,
            before_timeout: None,
            rto: None,
            rack: None,
            hystart: None,
            pace_ss: false,
            name: "newreno",
        }
    }
}

impl NewReno {
    pub fn with_rto(p: RtoPolicy) -> NewReno {
        NewReno { rto: Some(p), ..NewReno::default() }
    }

    /// UDT/CCC's CTCP (§4.2), measured against kernel TCP: NewReno with that RTO policy and
    /// RACK's loss detection (`cc::by_name("ctcp")`).
    pub fn ctcp(p: RtoPolicy, r: RackPolicy) -> NewReno {
        NewReno { rto: Some(p), rack: Some(r), name: "ctcp", ..NewReno::default() }
    }

    /// CTCP whose initial slow start is paced and ends on the round trip's rise (HyStart++,
    /// RFC 9406), `cc::by_name("ctcp_hs")`: in virtual time its parallel flows leave slow start
    /// in step where CTCP's do not (issue #23, `tests/parallel_slow_start.rs`); over the
    /// emulated path it was the fairer of the two in ten 60 s runs, and is the ccc2 table's
    /// CTCP since session 18 (docs/experiments.md). Congestion avoidance is not paced.
    pub fn ctcp_hs(p: RtoPolicy, r: RackPolicy) -> NewReno {
        NewReno { hystart: Some(HyStart::new(true)), pace_ss: true, name: "ctcp_hs", ..NewReno::ctcp(p, r) }
    }

    /// `ctcp_hs`'s sending period (`CcCtl::pkt_snd_period_us`): in the initial slow start (while
    /// HyStart++ runs) the window's segments spread over SRTT / `SS_PACE_RATIO`, so the flows
    /// sharing a queue interleave there instead of queueing a window's burst each, and their
    /// rounds stay in step (issue #23); unpaced (ACK-clocked) from its end, the first loss or
    /// timeout on.
    /// (`newreno` and `ctcp` leave the period alone.)
    fn pace(&self, c: &mut CcCtl) {
        if !self.pace_ss {
            return;
        }
        let initial_ss = self.hystart.is_some() && self.recover.is_none();
        c.pkt_snd_period_us = if initial_ss && c.rtt_us > 0.0 { c.rtt_us / (SS_PACE_RATIO * c.cwnd.max(1.0)) } else { 0.0 };
    }
}

impl Ccc for NewReno {
    fn name(&self) -> &'static str {
        self.name
    }

    fn init(&mut self, c: &mut CcCtl) {
        c.rto_policy = self.rto;
        c.rack = self.rack;
        // CTCP recovers as the Linux TCP it is measured against does (RFC 6937's PRR): RFC
        // 6675's pipe alone sent half a window at once after a slow-start overflow and lost
        // it again (issue #23)
        c.prr = self.rack.is_some();
    }

    fn on_ack(&mut self, c: &mut CcCtl, ack: u32) {
        self.before_timeout = None;
        match self.recover {
            Some(r) if ack < r => {} // partial ack: stay in recovery, window unchanged
            Some(_) => {
                self.recover = None;
                c.cwnd = self.ssthresh;
            }
            None if c.cwnd < self.ssthresh && self.hystart.is_some() => {
                match self.hystart.as_mut().unwrap().on_ack(c, ack) {
                    Grow::Slow(n) | Grow::Css(n) => c.cwnd += n,
                    Grow::Exit => {
                        self.ssthresh = c.cwnd;
                        self.hystart = None;
                    }
                }
            }
            None => reno_increase(c, self.ssthresh, 1.0),
        }
        self.pace(c);
    }

    fn on_loss(&mut self, c: &mut CcCtl, _losses: &[(u32, u32)]) {
        self.hystart = None;
        if self.recover.is_none() {
            self.ssthresh = (c.cwnd / 2.0).max(2.0);
            c.cwnd = self.ssthresh;
            self.recover = Some(c.snd_max);
        }
        self.pace(c);
    }

    fn on_timeout(&mut self, c: &mut CcCtl) {
        self.hystart = None;
        self.before_timeout.get_or_insert(self.ssthresh);
        self.ssthresh = (c.cwnd / 2.0).max(2.0);
        c.cwnd = 1.0;
        self.recover = None;
        self.pace(c);
    }

    fn on_spurious_timeout(&mut self, _c: &mut CcCtl) {
        // dupacks after the timeout found the holes of the recovery the timeout cut into and
        // halved a window of 1 to ssthresh 2: without this the flow grew from 2 segments by
        // one per RTT (issue #23, 110 ms RTT)
        if let Some(s) = self.before_timeout.take() {
            self.ssthresh = s;
            self.recover = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::*;

    #[test]
    fn slow_start_doubles_then_linear_then_halves_and_timeout_resets() {
        let (mut a, mut c) = (NewReno::default(), ctl());
        ack_round(&mut a, &mut c);
        assert_eq!(c.cwnd, 4.0);
        ack_round(&mut a, &mut c);
        assert_eq!(c.cwnd, 8.0);
        a.ssthresh = 8.0;
        ack_round(&mut a, &mut c);
        assert!((c.cwnd - 9.0).abs() < 0.1, "{}", c.cwnd);
        lose(&mut a, &mut c);
        assert!((c.cwnd - 4.5).abs() < 0.1, "{}", c.cwnd);
        let w = c.cwnd;
        lose(&mut a, &mut c); // same loss window: no second halving
        assert_eq!(c.cwnd, w);
        a.on_timeout(&mut c);
        assert_eq!(c.cwnd, 1.0);
        assert!((a.ssthresh - 2.25).abs() < 0.1);
    }

    #[test]
    fn a_spurious_timeout_is_undone_with_the_losses_declared_after_it() {
        // in recovery at 500 (halved from 1000), a timeout, then dupacks declare holes lost
        // while the window is 1: ssthresh would end at 2
        let (mut a, mut c) = (NewReno::default(), ctl());
        c.cwnd = 1000.0;
        lose(&mut a, &mut c);
        assert_eq!((c.cwnd, a.ssthresh), (500.0, 500.0));
        a.on_timeout(&mut c);
        lose(&mut a, &mut c);
        assert_eq!(a.ssthresh, 2.0);
        a.on_spurious_timeout(&mut c);
        assert_eq!(a.ssthresh, 500.0, "the ssthresh before the timeout");
        c.cwnd = 500.0; // the host gives the window back
        ack_round(&mut a, &mut c);
        assert!(c.cwnd > 500.0 && c.cwnd < 502.0, "congestion avoidance from 500, not recovery's exit to 2: {}", c.cwnd);
        // an advancing ACK in between: a later undo has nothing to restore
        a.on_timeout(&mut c);
        let s = a.ssthresh;
        ack_round(&mut a, &mut c);
        a.on_spurious_timeout(&mut c);
        assert_eq!(a.ssthresh, s);
    }
}
