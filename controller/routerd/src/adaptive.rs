//! routerd's adaptive wait (`--wait adaptive`, issue #26): spin only where the next frame is
//! expected, so routerd is already awake when a frame of regular traffic arrives, and an idle
//! or irregularly fed routerd sleeps in poll() as before.
//!
//! Why: a frame that finds routerd asleep waits for a wake-up, 7–14 µs at the median on this
//! 2-core VM (routerd's `cpu_port_read_delay`, docs/benchmarks.md session 13), a large part of
//! the hop's 20 µs goal. `--busy-poll-us 1000` removes it for a ping-pong but spins through
//! most of every gap (13–17× routerd's CPU). Here routerd learns the gaps between arrivals
//! (the kernel's ring stamps, so its own wake-up does not blur them) and, once it has a few,
//! sleeps until just before the earliest expected arrival and spins (yielding) until the
//! latest, or for [`MAX_SPIN_US`] when the gaps spread wider. A short tail after every turn with frames catches
//! the rest of a burst. The spin per arrival is bounded ([`MAX_SPIN_US`] + [`TAIL_US`]);
//! windows that miss back off exponentially, so traffic that only looks regular stops
//! costing spin.
//!
//! Sans-IO: the loop tells it the time, each turn's first arrival and whether it spun; it
//! says whether to sleep (and until when) or spin (until when). Times are µs of one clock.

/// Gaps remembered (the last ones between arrivals).
pub const GAPS: usize = 16;
/// Gaps needed before any window is planned.
pub const MIN_GAPS: usize = 4;
/// The window opens this long before the earliest expected arrival: it must cover the
/// timer wake-up that ends routerd's sleep (the same order as a frame's wake-up).
pub const LEAD_US: u64 = 40;
/// The window closes this long after the latest expected arrival.
pub const SLACK_US: u64 = 20;
/// The longest window (µs): where the recent gaps spread wider, the window covers their low
/// end only (round-trip times are skewed to the right: most arrivals come early).
pub const MAX_SPIN_US: u64 = 200;
/// Spin after every turn that read frames (the rest of a burst).
pub const TAIL_US: u64 = 20;
/// A longer gap is a pause, not a period: the history starts again.
pub const MAX_GAP_US: u64 = 20_000;
/// After consecutive misses, up to this many arrivals pass without a window.
pub const MAX_BACKOFF: u32 = 64;

/// What the loop does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Sleep in poll() until this time at the latest (None: no limit from the wait).
    Sleep(Option<u64>),
    /// Spin (no sleep) until a frame waits or this time.
    Spin(u64),
}

#[derive(Debug, Default, Clone)]
pub struct AdaptiveWait {
    on: bool,
    last_arrival: Option<u64>,
    gaps: [u64; GAPS],
    len: usize,
    next: usize,
    /// The window planned for the next arrival: [start, end).
    window: Option<(u64, u64)>,
    tail_until: Option<u64>,
    /// Arrivals to let pass without a window, and the next back-off after a miss.
    skip: u32,
    backoff: u32,
    /// Turns that began spinning and read frames (frames read without a poll() sleep).
    pub hits: u64,
    /// Windows that ended with no frame.
    pub misses: u64,
    /// µs spent spinning (the loop adds them).
    pub spun_us: u64,
}

impl AdaptiveWait {
    pub fn new(on: bool) -> AdaptiveWait {
        AdaptiveWait { on, ..AdaptiveWait::default() }
    }

    pub fn is_on(&self) -> bool {
        self.on
    }

    /// On or off from now on; switching forgets what was learnt.
    pub fn set(&mut self, on: bool) {
        *self = AdaptiveWait { on, hits: self.hits, misses: self.misses, spun_us: self.spun_us, ..AdaptiveWait::default() };
    }

    /// At the start of a turn at `now`, with the engine's next deadline: sleep or spin.
    pub fn plan(&self, now: u64, deadline: Option<u64>) -> Plan {
        let cap = |t: u64| deadline.map_or(t, |d| d.min(t));
        if !self.on {
            return Plan::Sleep(deadline);
        }
        if let Some(t) = self.tail_until.filter(|&t| now < t) {
            return Plan::Spin(cap(t));
        }
        match self.window {
            Some((start, end)) if now >= start && now < end => Plan::Spin(cap(end)),
            Some((start, _)) if now < start => Plan::Sleep(Some(cap(start))),
            _ => Plan::Sleep(deadline),
        }
    }

    /// After a turn that ended at `now`: `arrival` = when its first frame reached the CPU
    /// port (None: the turn read none), `spun` = the turn began with a spin.
    pub fn after_turn(&mut self, now: u64, arrival: Option<u64>, spun: bool) {
        if !self.on {
            return;
        }
        let Some(a) = arrival else {
            if self.window.is_some_and(|(_, end)| now >= end) {
                self.window = None;
                self.misses += 1;
                self.skip = self.backoff;
                self.backoff = (self.backoff * 2).clamp(1, MAX_BACKOFF);
            }
            if self.tail_until.is_some_and(|t| now >= t) {
                self.tail_until = None;
            }
            return;
        };
        if spun {
            self.hits += 1;
        }
        if self.window.take().is_some() && spun {
            self.backoff = 0; // the window caught it
        }
        match self.last_arrival.map(|l| a.saturating_sub(l)) {
            Some(g) if g <= MAX_GAP_US => self.push(g),
            Some(_) => self.len = 0,
            None => {}
        }
        self.last_arrival = Some(a);
        self.tail_until = Some(now + TAIL_US);
        if self.skip > 0 {
            self.skip -= 1;
        } else {
            self.window = self.predict(a).filter(|&(_, end)| end > now);
        }
    }

    fn push(&mut self, gap: u64) {
        self.gaps[self.next] = gap;
        self.next = (self.next + 1) % GAPS;
        self.len = (self.len + 1).min(GAPS);
    }

    /// The window for the arrival after one at `a`: from the recent gaps' low end to their
    /// high end (the outer eighth of them left out at each end: one outlier in 8, two in
    /// 16), at most [`MAX_SPIN_US`] long.
    fn predict(&self, a: u64) -> Option<(u64, u64)> {
        if self.len < MIN_GAPS {
            return None;
        }
        let mut gaps = self.gaps; // a copy on the stack: no allocation per arrival
        let g = &mut gaps[..self.len];
        g.sort_unstable();
        let trim = self.len / 8;
        let (lo, hi) = (g[trim], g[self.len - 1 - trim]);
        let start = (a + lo).saturating_sub(LEAD_US);
        Some((start, (a + hi + SLACK_US).min(start + MAX_SPIN_US)))
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"wait": if self.on { "adaptive" } else { "sleep" }, "adaptive_hits": self.hits,
                           "adaptive_misses": self.misses, "adaptive_spun_us": self.spun_us})
    }
}

/// Parses `--wait`: `sleep` (poll() at once) or `adaptive`.
pub fn parse_mode(s: &str) -> Result<bool, String> {
    match s.trim() {
        "sleep" => Ok(false),
        "adaptive" => Ok(true),
        _ => Err(format!("wait must be sleep or adaptive, not {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds arrivals at these times, each read at once (a turn ending 5 µs after it).
    fn feed(w: &mut AdaptiveWait, arrivals: &[u64]) {
        for &a in arrivals {
            w.after_turn(a + 5, Some(a), false);
        }
    }

    #[test]
    fn off_always_sleeps_to_the_deadline() {
        let mut w = AdaptiveWait::new(false);
        feed(&mut w, &[0, 500, 1000, 1500, 2000, 2500]);
        assert_eq!(w.plan(2505, Some(9000)), Plan::Sleep(Some(9000)));
        assert_eq!(w.plan(2900, None), Plan::Sleep(None));
    }

    #[test]
    fn idle_or_new_traffic_spins_only_the_short_tail() {
        let mut w = AdaptiveWait::new(true);
        assert_eq!(w.plan(0, None), Plan::Sleep(None), "nothing learnt: sleep");
        feed(&mut w, &[1000, 1500, 2000]); // two gaps: too few to plan a window
        assert_eq!(w.plan(2006, None), Plan::Spin(2005 + TAIL_US));
        w.after_turn(2030, None, true);
        assert_eq!(w.plan(2031, None), Plan::Sleep(None));
    }

    #[test]
    fn regular_gaps_give_a_window_around_the_next_arrival_and_a_sleep_before_it() {
        let mut w = AdaptiveWait::new(true);
        feed(&mut w, &[0, 500, 990, 1500, 2010]); // gaps 500, 490, 510, 510
        w.after_turn(2040, None, true); // the tail ends
        // Earliest expected 2010 + 490, latest 2010 + 510.
        let (start, end) = (2010 + 490 - LEAD_US, 2010 + 510 + SLACK_US);
        assert_eq!(w.plan(2041, None), Plan::Sleep(Some(start)));
        assert_eq!(w.plan(2041, Some(2300)), Plan::Sleep(Some(2300)), "a merge timer first");
        assert_eq!(w.plan(start, None), Plan::Spin(end));
        assert_eq!(w.plan(start + 10, Some(start + 20)), Plan::Spin(start + 20));
        // The frame comes inside the window: a hit, and the next window is planned from it.
        w.after_turn(2512, Some(2505), true);
        assert_eq!(w.hits, 1);
        assert_eq!(w.misses, 0);
        w.after_turn(2540, None, true);
        assert!(matches!(w.plan(2541, None), Plan::Sleep(Some(s)) if s == 2505 + 490 - LEAD_US));
    }

    #[test]
    fn a_spread_wider_than_the_bound_gets_a_window_over_its_low_end_only() {
        let mut w = AdaptiveWait::new(true);
        feed(&mut w, &[0, 200, 700, 900, 1400, 1600]); // gaps 200 and 500: spread 300
        w.after_turn(1700, None, false);
        let start = 1600 + 200 - LEAD_US;
        assert_eq!(w.window, Some((start, start + MAX_SPIN_US)));
        assert_eq!(w.plan(1701, None), Plan::Sleep(Some(start)));
    }

    #[test]
    fn one_outlier_among_eight_gaps_is_trimmed() {
        let mut w = AdaptiveWait::new(true);
        let mut t = 0;
        let mut arrivals = vec![0];
        for g in [500, 500, 500, 3000, 500, 500, 500, 500] {
            t += g;
            arrivals.push(t);
        }
        feed(&mut w, &arrivals);
        w.after_turn(t + 100, None, false);
        assert_eq!(w.plan(t + 101, None), Plan::Sleep(Some(t + 500 - LEAD_US)));
    }

    #[test]
    fn a_late_gap_widens_the_spread_and_a_long_pause_starts_the_history_again() {
        let mut w = AdaptiveWait::new(true);
        feed(&mut w, &[0, 500, 1000, 1500, 2000]);
        assert!(w.window.is_some());
        feed(&mut w, &[2700]); // gaps 500 x 4 and 700: the window is cut to its low end
        assert_eq!(w.window, Some((3200 - LEAD_US, 3200 - LEAD_US + MAX_SPIN_US)));
        let base = 2700 + MAX_GAP_US + 1;
        feed(&mut w, &[base]);
        assert_eq!(w.len, 0, "a pause is not a gap");
        feed(&mut w, &[base + 500, base + 1000, base + 1500, base + 2000]);
        assert_eq!(w.len, 4);
        assert_eq!(w.window, Some((base + 2500 - LEAD_US, base + 2500 + SLACK_US)));
    }

    #[test]
    fn a_miss_skips_windows_for_the_back_off_then_plans_again() {
        let mut w = AdaptiveWait::new(true);
        feed(&mut w, &[0, 500, 1000, 1500, 2000]);
        assert!(w.window.is_some());
        w.after_turn(2600, None, true); // window [2450, 2520) passed empty
        assert_eq!((w.misses, w.skip, w.backoff), (1, 0, 1));
        feed(&mut w, &[2500]); // read late, after sleeping: a window for the next
        assert!(w.window.is_some());
        w.after_turn(3100, None, true); // missed again
        assert_eq!((w.misses, w.skip, w.backoff), (2, 1, 2));
        feed(&mut w, &[3000]);
        assert_eq!(w.window, None, "skipped: backing off");
        feed(&mut w, &[3500]);
        assert!(w.window.is_some());
        // Caught: the back-off is over.
        w.after_turn(4010, Some(4000), true);
        assert_eq!((w.backoff, w.hits), (0, 1));
    }

    #[test]
    fn switching_forgets_the_history_but_keeps_the_counters() {
        let mut w = AdaptiveWait::new(true);
        feed(&mut w, &[0, 500, 1000, 1500, 2000]);
        w.after_turn(2600, None, true);
        w.set(true);
        assert_eq!((w.len, w.window, w.misses), (0, None, 1));
        w.set(false);
        assert_eq!(w.plan(0, None), Plan::Sleep(None));
    }

    #[test]
    fn modes_parse_and_anything_else_is_refused() {
        assert_eq!(parse_mode("sleep"), Ok(false));
        assert_eq!(parse_mode("adaptive"), Ok(true));
        assert!(parse_mode("spin").unwrap_err().contains("sleep or adaptive"));
    }
}
