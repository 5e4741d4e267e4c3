//! The shared-window alternatives to the dissertation's window (`noble`), kept for comparison
//! (`--cc mtp-cubic`, `mtp-halve`), and their repeat timer, in the framework's own terms: the window is a `cc::Ccc`
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
/// start; after the first cut, [`friendly_increase`] per window of replies. A loss cuts the
/// window only when it comes with a queue (smoothed RTT above the minimum by a tenth, at
/// least 1 ms): that loss is congestion, and the window is multiplied by `beta` (0.7, as
/// CUBIC cuts); a loss on an empty path is random and costs only its repeat. At most one cut
/// per smoothed RTT, so a burst of losses in one round costs one. A silent flowtimeout
/// (nothing answered at all) drops the window to the minimum.
pub struct MtpWindow {
    /// What a congestion cut keeps of the window.
    beta: f64,
    ssthresh: Option<f64>,
    last_cut_us: Option<u64>,
    /// Losses taken as random (no queue), for the record.
    pub random_losses: u64,
}

/// What MTP's own window keeps at a congestion cut: CUBIC's 0.7. A shallow queue (the study's
/// is a fifth of the path) then stays nearly full after a cut, where halving left the path
/// 40 % idle; with the matching increase it shares a queue with CUBIC evenly (measured).
pub const BETA: f64 = 0.7;

impl Default for MtpWindow {
    fn default() -> Self {
        MtpWindow { beta: BETA, ssthresh: None, last_cut_us: None, random_losses: 0 }
    }
}

/// The shared-window algorithms kept to compare against the dissertation's (`noble`, named
/// "mtp"), by name and the share a cut keeps: "mtp-cubic" (0.7, our rule before the
/// dissertation was at hand) and "mtp-halve" (a half and one more per round trip: Reno's AIMD).
const WINDOWS: [(&str, f64); 2] = [("mtp-cubic", BETA), ("mtp-halve", 0.5)];

impl MtpWindow {
    /// The window algorithm by its name (`WINDOWS`).
    pub fn by_name(name: &str) -> Option<MtpWindow> {
        let &(_, beta) = WINDOWS.iter().find(|(n, _)| *n == name)?;
        Some(MtpWindow { beta, ..MtpWindow::default() })
    }
}

/// The additive increase that makes an AIMD window multiplied by `beta` at a cut as fair to
/// Reno as Reno is to itself: 3(1 − beta)/(1 + beta) datagrams per round trip (1 at a half,
/// 0.53 at 0.7, the increase of CUBIC's TCP-friendly region). A gentler cut must grow more
/// slowly, or sharing a queue with TCP it takes more than half.
pub fn friendly_increase(beta: f64) -> f64 {
    3.0 * (1.0 - beta) / (1.0 + beta)
}

/// Whether the path is queueing: the smoothed RTT stands above the minimum.
pub fn congested(c: &CcCtl) -> bool {
    c.min_rtt_us <= 0.0 || c.rtt_us > c.min_rtt_us + (0.1 * c.min_rtt_us).max(QUEUE_FLOOR_US)
}

/// Pacing, as windows per smoothed RTT: twice the window's rate in slow start (as Linux TCP
/// paces), once after the first cut, so that a window opened at once (a new transaction, a
/// burst of answers) leaves at about the path's rate and its replies do not overflow a queue
/// the window already fills.
pub const PACE_SLOW_START: f64 = 2.0;
pub const PACE_AFTER: f64 = 1.0;

impl Ccc for MtpWindow {
    fn name(&self) -> &'static str {
        WINDOWS.iter().find(|(_, b)| *b == self.beta).map_or("mtp-cubic", |(n, _)| n)
    }

    fn init(&mut self, c: &mut CcCtl) {
        c.cwnd = INITIAL_WINDOW;
    }

    fn on_ack(&mut self, c: &mut CcCtl, _ack: u32) {
        crate::cc::reno_increase(c, self.ssthresh.unwrap_or(f64::INFINITY), friendly_increase(self.beta));
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
        let cut = (c.cwnd * self.beta).max(MIN_WINDOW);
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
        c.rtt_us = 11_100.0;
        lose(&mut w, &mut c);
        assert!((c.cwnd - 28.0).abs() < 1e-9, "{}", c.cwnd);
    }

    #[test]
    fn a_congestion_cut_keeps_seven_tenths_then_grows_tcp_friendly() {
        assert!((friendly_increase(0.5) - 1.0).abs() < 1e-12);
        assert!((friendly_increase(0.7) - 0.9 / 1.7).abs() < 1e-12);
        let (mut w, mut c) = (MtpWindow::default(), queueing());
        c.cwnd = 60.0;
        lose(&mut w, &mut c);
        assert!((c.cwnd - 42.0).abs() < 1e-9, "{}", c.cwnd);
        ack_round(&mut w, &mut c);
        assert!((c.cwnd - 42.0 - 0.9 / 1.7).abs() < 0.01, "{}", c.cwnd);
    }

    #[test]
    fn mtp_halve_is_renos_aimd() {
        let mut w = MtpWindow::by_name("mtp-halve").unwrap();
        let mut c = queueing();
        c.cwnd = 60.0;
        lose(&mut w, &mut c);
        assert_eq!(c.cwnd, 30.0);
        ack_round(&mut w, &mut c);
        assert!((c.cwnd - 31.0).abs() < 0.05, "{}", c.cwnd);
        assert!(MtpWindow::by_name("reno").is_none());
        assert_eq!((w.name(), MtpWindow::default().name()), ("mtp-halve", "mtp-cubic"));
    }

    #[test]
    fn slow_start_doubles_per_round_until_the_first_cut() {
        let (mut w, mut c) = (MtpWindow::default(), queueing());
        w.init(&mut c);
        assert_eq!(c.cwnd, 4.0);
        ack_round(&mut w, &mut c);
        assert_eq!(c.cwnd, 8.0);
        ack_round(&mut w, &mut c);
        assert_eq!(c.cwnd, 16.0);
        c.now_us += 1_000_000;
        lose(&mut w, &mut c);
        assert!((c.cwnd - 11.2).abs() < 1e-9, "{}", c.cwnd);
        ack_round(&mut w, &mut c);
        assert!(c.cwnd > 11.2 + 0.45 && c.cwnd < 11.2 + 0.53, "{}", c.cwnd);
    }

    #[test]
    fn pacing_is_two_windows_per_rtt_in_slow_start_and_one_after() {
        let (mut w, mut c) = (MtpWindow::default(), queueing());
        w.init(&mut c);
        ack_round(&mut w, &mut c);
        assert!((c.pkt_snd_period_us - c.rtt_us / (2.0 * c.cwnd)).abs() < 1e-6);
        c.now_us += 1_000_000;
        lose(&mut w, &mut c);
        assert!((c.pkt_snd_period_us - c.rtt_us / c.cwnd).abs() < 1e-6);
    }

    #[test]
    fn losses_within_one_rtt_cut_once_and_never_below_two() {
        let (mut w, mut c) = (MtpWindow::default(), queueing());
        c.cwnd = 40.0;
        c.now_us = 1_000_000;
        for _ in 0..5 {
            lose(&mut w, &mut c);
            c.now_us += 1_000; // smoothed RTT is 13 ms
        }
        assert!((c.cwnd - 28.0).abs() < 1e-9, "{}", c.cwnd);
        for _ in 0..20 {
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
