//! MTP's window and timers, in the framework's own terms: the window is a `cc::Ccc`
//! algorithm hosted in a `CcCtl` exactly as Windowed Congestion hosts one for Bulk (so any of
//! the crate's algorithms can drive MTP, and `MtpWindow` is MTP's own), and the flowtimeout is
//! Rtt Estimation's RFC 6298 smoothing (`micro::rtt::smooth`) with MTP's bounds and backoff.
use crate::cc::{Ccc, CcCtl};
use crate::micro::rtt::smooth;

/// Window before any reply, in datagrams (ours).
pub const INITIAL_WINDOW: f64 = 4.0;
/// The window never shrinks below this (ours): MTP keeps pulling through random loss.
pub const MIN_WINDOW: f64 = 2.0;

/// Queueing delay that marks a loss as congestion: a tenth of the path's minimum RTT, at
/// least 1 ms (ours).
pub const QUEUE_FLOOR_US: f64 = 1_000.0;

/// MTP's window rules (all "ours", docs/transport.md): one more datagram per reply in slow
/// start, one more per window of replies after. A loss cuts the window only when it comes
/// with a queue (smoothed RTT above the minimum by a tenth, at least 1 ms): that loss is
/// congestion, and the cut takes the window to what the path holds without the queue
/// ([`queue_free_share`]); a loss on an empty path is random and costs only its repeat. At most one
/// halving per smoothed RTT, so a burst of losses in one round costs one. A silent
/// flowtimeout (nothing answered at all) drops the window to the minimum.
pub struct MtpWindow {
    /// Cut to half and grow by one per round trip, whatever the queue (`--cc mtp-halve`: the
    /// rule before the queue-free cut, kept to compare against).
    halve: bool,
    ssthresh: Option<f64>,
    last_cut_us: Option<u64>,
    /// Datagrams added per round trip after slow start: set by the last cut so that the
    /// window's rate stays TCP-friendly ([`friendly_increase`]); 1 (Reno's) before any cut.
    increase: f64,
    /// Losses taken as random (no queue), for the record.
    pub random_losses: u64,
}

impl Default for MtpWindow {
    fn default() -> Self {
        MtpWindow { halve: false, ssthresh: None, last_cut_us: None, increase: 1.0, random_losses: 0 }
    }
}

impl MtpWindow {
    /// The window algorithm by its name: "mtp" (queue-free cut) or "mtp-halve".
    pub fn by_name(name: &str) -> Option<MtpWindow> {
        match name {
            "mtp" => Some(MtpWindow::default()),
            "mtp-halve" => Some(MtpWindow { halve: true, ..MtpWindow::default() }),
            _ => None,
        }
    }
}

/// The additive increase that makes an AIMD window cut to `share` of itself as fair to Reno
/// as Reno is to itself: 3(1 − share)/(1 + share) datagrams per round trip (1 at a half,
/// CUBIC's 0.53 at 0.7). A gentler cut must grow more slowly, or sharing a queue with TCP it
/// takes more than half (measured: 66 % against CUBIC with +1 per round trip).
pub fn friendly_increase(share: f64) -> f64 {
    3.0 * (1.0 - share) / (1.0 + share)
}

/// Whether the path is queueing: the smoothed RTT stands above the minimum.
pub fn congested(c: &CcCtl) -> bool {
    c.min_rtt_us <= 0.0 || c.rtt_us > c.min_rtt_us + (0.1 * c.min_rtt_us).max(QUEUE_FLOOR_US)
}

/// Pacing, as a share of the window per smoothed RTT (as Linux TCP paces: twice the window's
/// rate in slow start, 1.2 times after): after the first cut a window opened at once (a new
/// transaction, a burst of answers) leaves at about the path's rate, not at twice it, so its
/// replies do not overflow a queue the window already fills.
pub const PACE_SLOW_START: f64 = 2.0;
pub const PACE_AFTER: f64 = 1.0;

/// What share of the window the path holds without its queue: min RTT over smoothed RTT, so
/// a congestion loss drains the queue and keeps the pipe full (as Westwood+ sets its window to
/// the bandwidth-delay product) instead of emptying half of it; at least a half, so a deep
/// queue costs no more than Reno's cut.
pub fn queue_free_share(c: &CcCtl) -> f64 {
    if c.min_rtt_us <= 0.0 || c.rtt_us <= 0.0 {
        return 0.5;
    }
    (c.min_rtt_us / c.rtt_us).clamp(0.5, 1.0)
}

impl Ccc for MtpWindow {
    fn name(&self) -> &'static str {
        if self.halve { "mtp-halve" } else { "mtp" }
    }

    fn init(&mut self, c: &mut CcCtl) {
        c.cwnd = INITIAL_WINDOW;
    }

    fn on_ack(&mut self, c: &mut CcCtl, _ack: u32) {
        crate::cc::reno_increase(c, self.ssthresh.unwrap_or(f64::INFINITY), self.increase);
        self.pace(c);
    }

    fn on_loss(&mut self, c: &mut CcCtl, _l: &[(u32, u32)]) {
        if !congested(c) {
            self.random_losses += 1;
            return;
        }
        self.cut(c);
        self.pace(c);
    }

    fn on_timeout(&mut self, c: &mut CcCtl) {
        self.ssthresh = Some((c.cwnd / 2.0).max(MIN_WINDOW));
        self.increase = friendly_increase(0.5);
        c.cwnd = MIN_WINDOW;
        self.last_cut_us = Some(c.now_us);
        self.pace(c);
    }
}

impl MtpWindow {
    fn cut(&mut self, c: &mut CcCtl) {
        // once per round trip at most: the smoothed RTT, as TCP cuts once per window
        let rtt = (c.rtt_us as u64).max(1);
        if self.last_cut_us.is_some_and(|t| c.now_us < t + rtt) {
            return;
        }
        self.last_cut_us = Some(c.now_us);
        let share = if self.halve { 0.5 } else { queue_free_share(c) };
        let cut = (c.cwnd * share).max(MIN_WINDOW);
        self.increase = friendly_increase(share);
        self.ssthresh = Some(cut);
        c.cwnd = cut;
    }

    /// The gap between requests the client keeps (`CcCtl::pkt_snd_period_us`, CCC's sending
    /// period): 0 before an RTT sample (unpaced).
    fn pace(&self, c: &mut CcCtl) {
        let slow_start = self.ssthresh.is_none_or(|t| c.cwnd < t);
        let ratio = if slow_start { PACE_SLOW_START } else { PACE_AFTER };
        c.pkt_snd_period_us = c.rtt_us.max(0.0) / (ratio * c.cwnd.max(1.0));
    }
}

/// Flowtimeout before the first RTT sample: RFC 6298's initial RTO (a shorter guess fires on
/// any longer path before its first answer, and the silence rule then starts the window at 2).
pub const INITIAL_FLOWTIMEOUT_US: u64 = 1_000_000;
/// Bounds (ours): the floor keeps scheduler noise from reading as loss; the ceiling keeps a
/// restarted server noticed within a second.
pub const MIN_FLOWTIMEOUT_US: u64 = 5_000;
pub const MAX_FLOWTIMEOUT_US: u64 = 1_000_000;

/// The flowtimeout: how long a request may go unanswered before it is repeated.
#[derive(Clone, Debug)]
pub struct Flowtimeout {
    pub srtt_us: f64,
    pub rttvar_us: f64,
    pub min_rtt_us: f64,
    /// Doublings since the last sample (silent timeouts).
    pub backoff: u32,
}

impl Default for Flowtimeout {
    fn default() -> Self {
        Flowtimeout { srtt_us: 0.0, rttvar_us: 0.0, min_rtt_us: 0.0, backoff: 0 }
    }
}

impl Flowtimeout {
    pub fn sample(&mut self, rtt_us: f64) {
        smooth(&mut self.srtt_us, &mut self.rttvar_us, &mut self.min_rtt_us, rtt_us.max(1.0));
        self.backoff = 0;
    }

    /// A flowtimeout passed with nothing answered: the next one is twice as long.
    pub fn back_off(&mut self) {
        self.backoff = (self.backoff + 1).min(16);
    }

    pub fn get_us(&self) -> u64 {
        // RFC 6298's srtt + 4 rttvar, plus half an srtt (ours): on a steady path rttvar decays
        // toward 0 and a queue that then fills would make every request look lost
        let base = if self.srtt_us == 0.0 {
            INITIAL_FLOWTIMEOUT_US
        } else {
            (1.5 * self.srtt_us + 4.0 * self.rttvar_us) as u64
        };
        (base.max(MIN_FLOWTIMEOUT_US) << self.backoff).min(MAX_FLOWTIMEOUT_US)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testkit::{ack_round, ctl, lose};

    /// A path whose smoothed RTT stands 30% above its minimum: a queue.
    fn queueing() -> CcCtl {
        let mut c = ctl();
        c.min_rtt_us = 10_000.0;
        c.rtt_us = 13_000.0;
        c
    }

    #[test]
    fn a_loss_on_an_empty_path_is_random_and_keeps_the_window() {
        let (mut w, mut c) = (MtpWindow::default(), ctl());
        c.cwnd = 40.0;
        for _ in 0..50 {
            c.now_us += 20_000;
            lose(&mut w, &mut c);
        }
        assert_eq!((c.cwnd, w.random_losses), (40.0, 50));
        c.rtt_us = 10_900.0; // under a tenth above: still no queue
        lose(&mut w, &mut c);
        assert_eq!(c.cwnd, 40.0);
        c.rtt_us = 12_500.0;
        lose(&mut w, &mut c);
        assert_eq!(c.cwnd, 32.0); // the queue's fifth of the round trip is cut
    }

    #[test]
    fn after_a_gentle_cut_the_window_grows_tcp_friendly() {
        assert!((friendly_increase(0.5) - 1.0).abs() < 1e-12);
        assert!((friendly_increase(0.7) - 0.9 / 1.7).abs() < 1e-12);
        let (mut w, mut c) = (MtpWindow::default(), ctl());
        c.min_rtt_us = 10_000.0;
        c.rtt_us = 12_000.0; // cut to 5/6: 3(1/6)/(11/6) = 3/11 per round trip
        c.cwnd = 60.0;
        lose(&mut w, &mut c);
        assert!((c.cwnd - 50.0).abs() < 1e-9, "{}", c.cwnd);
        ack_round(&mut w, &mut c);
        assert!((c.cwnd - 50.0 - 3.0 / 11.0).abs() < 0.01, "{}", c.cwnd);
    }

    #[test]
    fn mtp_halve_halves_whatever_the_queue() {
        let mut w = MtpWindow::by_name("mtp-halve").unwrap();
        let mut c = ctl();
        c.min_rtt_us = 10_000.0;
        c.rtt_us = 12_000.0;
        c.cwnd = 60.0;
        lose(&mut w, &mut c);
        assert_eq!(c.cwnd, 30.0);
        ack_round(&mut w, &mut c);
        assert!((c.cwnd - 31.0).abs() < 0.05, "{}", c.cwnd);
        assert!(MtpWindow::by_name("reno").is_none());
    }

    #[test]
    fn a_congestion_cut_drains_the_queue_and_never_more_than_half() {
        for (rtt, want) in [(12_000.0, 40.0 / 1.2), (20_000.0, 20.0), (50_000.0, 20.0)] {
            let (mut w, mut c) = (MtpWindow::default(), ctl());
            c.min_rtt_us = 10_000.0;
            c.rtt_us = rtt;
            c.cwnd = 40.0;
            lose(&mut w, &mut c);
            assert!((c.cwnd - want).abs() < 1e-9, "srtt {rtt}: {} != {want}", c.cwnd);
        }
    }

    #[test]
    fn slow_start_doubles_per_round_then_one_per_round_after_a_loss() {
        let (mut w, mut c) = (MtpWindow::default(), queueing());
        w.init(&mut c);
        assert_eq!(c.cwnd, 4.0);
        ack_round(&mut w, &mut c);
        assert_eq!(c.cwnd, 8.0);
        c.now_us += 1_000_000;
        c.rtt_us = 20_000.0; // a queue as long as the path: the cut is a half
        lose(&mut w, &mut c);
        assert_eq!(c.cwnd, 4.0);
        ack_round(&mut w, &mut c);
        // about one more per window: 4 + 1/4 + 1/4.25 + ...
        assert!(c.cwnd > 4.9 && c.cwnd < 5.0, "{}", c.cwnd);
    }

    #[test]
    fn losses_within_one_rtt_cut_once_and_never_below_two() {
        let (mut w, mut c) = (MtpWindow::default(), queueing());
        c.rtt_us = 20_000.0;
        c.cwnd = 32.0;
        c.now_us = 1_000_000;
        for _ in 0..5 {
            lose(&mut w, &mut c);
            c.now_us += 1_000; // smoothed RTT is 20 ms
        }
        assert_eq!(c.cwnd, 16.0);
        for _ in 0..10 {
            c.now_us += 20_000;
            lose(&mut w, &mut c);
        }
        assert_eq!(c.cwnd, MIN_WINDOW);
        w.on_timeout(&mut c);
        assert_eq!(c.cwnd, MIN_WINDOW);
    }

    #[test]
    fn flowtimeout_is_rto_like_bounded_and_backs_off() {
        let mut f = Flowtimeout::default();
        assert_eq!(f.get_us(), INITIAL_FLOWTIMEOUT_US);
        f.sample(10_000.0);
        assert_eq!(f.get_us(), 35_000); // 1.5 srtt + 4 * srtt/2
        f.back_off();
        assert_eq!(f.get_us(), 70_000);
        for _ in 0..20 {
            f.back_off();
        }
        assert_eq!(f.get_us(), MAX_FLOWTIMEOUT_US);
        f.sample(10.0);
        assert_eq!(f.backoff, 0);
        for _ in 0..50 {
            f.sample(10.0);
        }
        assert_eq!(f.get_us(), MIN_FLOWTIMEOUT_US);
    }
}
