//! Configurable congestion control after UDT/CCC: a trait with the paper's callbacks, and
//! controls the algorithm sets (window, sending period, ACK policy, RTO, custom messages).
//! Windowed Congestion (`micro::ccwin`) hosts one algorithm per session and enforces its
//! window and sending period. Windows are in segments, times in microseconds.
mod bic;
mod blaster;
mod daimd;
mod fast;
pub mod group;
mod highspeed;
pub mod hystart;
pub mod monitor;
mod newreno;
mod scalable;
mod tfrc;
mod vegas;
mod westwood;

pub use bic::Bic;
pub use blaster::Blaster;
pub use daimd::Daimd;
pub use fast::Fast;
pub use highspeed::HighSpeed;
pub use newreno::NewReno;
pub use scalable::Scalable;
pub use tfrc::Tfrc;
pub use vegas::Vegas;
pub use westwood::Westwood;

pub use crate::micro::rack::{RackPolicy, RACK_DEFAULT};
pub use crate::micro::rtt::RtoPolicy;

/// CTCP's RTO policy: kernel TCP's, which it is measured against (UDT/CCC §4.2). Linux keeps
/// its 200 ms `TCP_RTO_MIN` as the floor of the variance term, so the RTO is SRTT + max(200
/// ms, 4 RTTVAR) (`tcp_rtt_estimator`/`tcp_set_rto`); the UDT/CCC paper's default is RFC 2988's
/// computation (§2.2.1, onTimeout), whose 1 s minimum Linux does not keep. Chosen by measurement (issue #23,
/// docs/experiments.md): the session's 20 ms margin fired spurious timeouts at 4-16 flows.
pub const TCP_RTO: RtoPolicy = RtoPolicy { g_us: 200_000, min_us: 200_000 };

/// What an algorithm sees and sets.
#[derive(Clone, Debug)]
pub struct CcCtl {
    // controls, written by the algorithm
    pub cwnd: f64,
    /// Gap between two sends; 0 sends as fast as the window allows.
    pub pkt_snd_period_us: f64,
    /// Acknowledge every `ack_interval` segments, or after `ack_period_us`, whichever is first.
    pub ack_interval: u32,
    pub ack_period_us: u64,
    pub rto_us: Option<u64>,
    /// The algorithm's RTO policy (margin G over SRTT and minimum RTO) for the session's own
    /// RTO computation (`micro::rtt`); None keeps the session's (`Config::min_rto_us`,
    /// `rto_g_us`). `rto_us` instead replaces the computed RTO altogether.
    pub rto_policy: Option<RtoPolicy>,
    /// Time-based loss detection (RACK, RFC 8985; `micro::rack`) and its reordering window;
    /// None leaves loss detection to duplicate ACKs and the timer.
    pub rack: Option<RackPolicy>,
    /// Proportional Rate Reduction in a loss recovery (RFC 6937; `micro::ccwin`): what is sent
    /// follows what is delivered, instead of the burst RFC 6675's pipe allows once the
    /// holes are declared lost. The window the algorithm set is PRR's ssthresh.
    pub prr: bool,
    /// Custom control messages to send to the peer's algorithm.
    pub custom_out: Vec<Vec<u8>>,
    // observations, written by the framework before each callback
    pub now_us: u64,
    pub rtt_us: f64,
    pub min_rtt_us: f64,
    /// The last RTT sample, of the ACK being handled when it gave one (0 before the first).
    pub latest_rtt_us: f64,
    pub mss: usize,
    pub snd_una: u32,
    pub snd_max: u32,
    pub inflight: u32,
    /// Segments newly acknowledged by the ACK being handled.
    pub acked: u32,
}

impl CcCtl {
    pub fn new(mss: usize) -> CcCtl {
        CcCtl {
            cwnd: 2.0,
            pkt_snd_period_us: 0.0,
            // TCP's delayed ACK: every second segment, or 10 ms after the first unacknowledged
            ack_interval: 2,
            ack_period_us: 10_000,
            rto_us: None,
            rto_policy: None,
            rack: None,
            prr: false,
            custom_out: Vec::new(),
            now_us: 0,
            rtt_us: 0.0,
            min_rtt_us: 0.0,
            latest_rtt_us: 0.0,
            mss,
            snd_una: 0,
            snd_max: 0,
            inflight: 0,
            acked: 0,
        }
    }
}

/// The CCC callbacks. Every one has an empty default, so an algorithm writes only what it uses.
pub trait Ccc: Send {
    fn name(&self) -> &'static str;
    fn init(&mut self, _c: &mut CcCtl) {}
    fn close(&mut self, _c: &mut CcCtl) {}
    /// A cumulative acknowledgement advanced to `ack` (the next expected sequence number).
    fn on_ack(&mut self, _c: &mut CcCtl, _ack: u32) {}
    /// Segments declared lost, as inclusive (first, last) ranges.
    fn on_loss(&mut self, _c: &mut CcCtl, _losses: &[(u32, u32)]) {}
    fn on_timeout(&mut self, _c: &mut CcCtl) {}
    /// Not one of the paper's callbacks: the timeout just reported was spurious (Eifel
    /// detection in `micro::ccwin`, RFC 3522), so undo what `on_timeout`, and any loss
    /// response since, did to the algorithm's own state (RFC 4015 §2); the host gives the
    /// window back itself. Called before the `on_ack` of the ACK that showed it.
    fn on_spurious_timeout(&mut self, _c: &mut CcCtl) {}
    fn on_pkt_sent(&mut self, _c: &mut CcCtl, _seq: u32) {}
    fn on_pkt_received(&mut self, _c: &mut CcCtl, _seq: u32) {}
    fn process_custom_msg(&mut self, _c: &mut CcCtl, _msg: &[u8]) {}
}

pub const NAMES: [&str; 12] =
    ["newreno", "ctcp", "ctcp_hs", "daimd", "blaster", "scalable", "highspeed", "bic", "westwood", "vegas", "fast",
     "tfrc"];

/// An algorithm by name; `rate_bps` is the blaster's fixed rate.
pub fn by_name(name: &str, rate_bps: f64) -> Result<Box<dyn Ccc>, String> {
    Ok(match name {
        "newreno" => Box::new(NewReno::default()),
        // UDT/CCC's CTCP: NewReno with kernel TCP's RTO policy (CTP-Bulk keeps fine timers) and
        // its time-based detection of lost retransmissions (Linux's RACK, RFC 8985)
        "ctcp" => Box::new(NewReno::ctcp(TCP_RTO, RACK_DEFAULT)),
        // CTCP with a paced initial slow start that HyStart++ ends (RFC 9406; issue #23)
        "ctcp_hs" => Box::new(NewReno::ctcp_hs(TCP_RTO, RACK_DEFAULT)),
        "daimd" | "udt" => Box::new(Daimd::default()),
        "blaster" => Box::new(Blaster::new(rate_bps)),
        "scalable" => Box::new(Scalable::default()),
        "highspeed" => Box::new(HighSpeed::default()),
        "bic" => Box::new(Bic::default()),
        "westwood" => Box::new(Westwood::default()),
        "vegas" => Box::new(Vegas::default()),
        "fast" => Box::new(Fast::default()),
        "tfrc" => Box::new(Tfrc::default()),
        _ => return Err(format!("unknown congestion control {name:?}; known: {}", NAMES.join(", "))),
    })
}

/// Reno's additive increase and slow start, shared by the loss-based window algorithms.
pub(crate) fn reno_increase(c: &mut CcCtl, ssthresh: f64, per_ack_ca: f64) {
    for _ in 0..c.acked.max(1) {
        if c.cwnd < ssthresh {
            c.cwnd += 1.0;
        } else {
            c.cwnd += per_ack_ca / c.cwnd;
        }
    }
}

#[cfg(test)]
pub(crate) mod testkit {
    use super::*;

    pub fn ctl() -> CcCtl {
        let mut c = CcCtl::new(1400);
        c.rtt_us = 10_000.0;
        c.min_rtt_us = 10_000.0;
        c
    }

    /// One window's worth of ACKs, one segment each, `rtt_us` apart in total.
    pub fn ack_round(a: &mut dyn Ccc, c: &mut CcCtl) {
        let n = c.cwnd.floor().max(1.0) as u32;
        c.snd_max = c.snd_una + n;
        for _ in 0..n {
            c.snd_una += 1;
            c.acked = 1;
            c.now_us += (c.rtt_us / n as f64) as u64;
            let una = c.snd_una;
            a.on_ack(c, una);
        }
    }

    pub fn lose(a: &mut dyn Ccc, c: &mut CcCtl) {
        c.snd_max = c.snd_una + c.cwnd as u32;
        let s = c.snd_una;
        a.on_loss(c, &[(s, s)]);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_name_builds_and_unknown_is_refused() {
        for n in super::NAMES {
            assert_eq!(super::by_name(n, 1e6).unwrap().name(), n);
        }
        let e = super::by_name("cubic", 1e6).err().unwrap();
        assert!(e.contains("unknown congestion control"), "{e}");
    }
}
