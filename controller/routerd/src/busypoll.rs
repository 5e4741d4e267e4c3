//! routerd's bounded busy-poll (`--busy-poll-us`, issue #26): after a turn that moved
//! frames, the loop keeps looking at the CPU port (and the engine's due timers) without
//! sleeping in poll() for up to the window, so a frame that arrives soon after is read
//! without a wake-up. Sleeping and being woken costs a loaded 2-core machine tens of µs
//! (routerd's `cpu_port_read_delay`); spinning costs a core for the window.
//!
//! Sans-IO: the loop tells it the time and what each turn did; it says whether the next turn
//! spins and until when. Never for many routers on few cores (the 220-router ACK study):
//! each one would spin a core's time away (docs/routerd.md).

/// The longest window routerd accepts (µs): the management socket waits at most this long
/// for an answer while routerd spins.
pub const MAX_WINDOW_US: u64 = 10_000;

/// The window and what it did: turns it caught frames in, and the time spent spinning.
#[derive(Debug, Default, Clone)]
pub struct BusyPoll {
    window_us: u64,
    /// End of the current window (µs of the loop's clock); None = not in one.
    until_us: Option<u64>,
    /// Turns that began inside a window and moved frames: frames read without a poll() sleep.
    pub hits: u64,
    /// µs spent spinning (each spin up to frames, a due timer or the window's end).
    pub spun_us: u64,
}

/// Parses a window in µs: 0 (off) ..= [`MAX_WINDOW_US`].
pub fn parse_window(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n <= MAX_WINDOW_US => Ok(n),
        _ => Err(format!("busy-poll window must be 0..={MAX_WINDOW_US} µs (0 = off), not {s:?}")),
    }
}

impl BusyPoll {
    pub fn new(window_us: u64) -> BusyPoll {
        BusyPoll { window_us: window_us.min(MAX_WINDOW_US), ..BusyPoll::default() }
    }

    pub fn window_us(&self) -> u64 {
        self.window_us
    }

    /// A new window length from now on (0 ends the current window at once).
    pub fn set_window(&mut self, window_us: u64) {
        self.window_us = window_us.min(MAX_WINDOW_US);
        if self.window_us == 0 {
            self.until_us = None;
        }
    }

    /// At the start of a turn: None = sleep in poll() as usual; Some(t) = spin (no sleep)
    /// until t at the latest, the window's end or the engine's next deadline if sooner.
    pub fn spin_until(&self, now_us: u64, deadline_us: Option<u64>) -> Option<u64> {
        let until = self.until_us.filter(|&u| now_us < u)?;
        Some(deadline_us.map_or(until, |d| d.min(until)))
    }

    /// After a turn that began at `began_us` (inside a window if `spun`) and ended at
    /// `now_us` having read `moved` frames: frames open a new window from now.
    pub fn after_turn(&mut self, now_us: u64, moved: usize, spun: bool) {
        if moved > 0 && spun {
            self.hits += 1;
        }
        if moved > 0 && self.window_us > 0 {
            self.until_us = Some(now_us + self.window_us);
        } else if self.until_us.is_some_and(|u| now_us >= u) {
            self.until_us = None;
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"busy_poll_us": self.window_us, "busy_poll_hits": self.hits, "busy_poll_spun_us": self.spun_us})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_never_spins() {
        let mut b = BusyPoll::new(0);
        b.after_turn(100, 5, false);
        assert_eq!(b.spin_until(101, None), None);
        assert_eq!(b.hits, 0);
    }

    #[test]
    fn a_turn_with_frames_opens_a_window_and_a_frame_inside_it_is_a_hit() {
        let mut b = BusyPoll::new(200);
        assert_eq!(b.spin_until(0, None), None, "no window before any frame");
        b.after_turn(1_000, 1, false);
        assert_eq!(b.spin_until(1_050, None), Some(1_200));
        // A frame read at 1_120, inside the window: a hit, and the window starts again.
        b.after_turn(1_120, 1, true);
        assert_eq!(b.hits, 1);
        assert_eq!(b.spin_until(1_130, None), Some(1_320));
        // Nothing until the window ends: back to sleeping.
        b.after_turn(1_320, 0, true);
        assert_eq!(b.spin_until(1_321, None), None);
        assert_eq!(b.hits, 1);
    }

    #[test]
    fn an_empty_turn_does_not_open_or_extend_a_window() {
        let mut b = BusyPoll::new(200);
        b.after_turn(1_000, 0, false);
        assert_eq!(b.spin_until(1_001, None), None);
        b.after_turn(2_000, 3, false);
        b.after_turn(2_100, 0, true); // a due timer's turn inside the window
        assert_eq!(b.spin_until(2_150, None), Some(2_200), "the window is not extended");
    }

    #[test]
    fn a_due_timer_ends_the_spin_first() {
        let mut b = BusyPoll::new(500);
        b.after_turn(0, 1, false);
        assert_eq!(b.spin_until(10, Some(60)), Some(60));
        assert_eq!(b.spin_until(10, Some(9_000)), Some(500));
    }

    #[test]
    fn switching_off_ends_the_window_and_windows_are_bounded() {
        let mut b = BusyPoll::new(300);
        b.after_turn(0, 1, false);
        b.set_window(0);
        assert_eq!(b.spin_until(1, None), None);
        assert_eq!(BusyPoll::new(u64::MAX).window_us(), MAX_WINDOW_US);
    }

    #[test]
    fn windows_parse_and_anything_else_is_refused() {
        assert_eq!(parse_window("0"), Ok(0));
        assert_eq!(parse_window("150"), Ok(150));
        assert_eq!(parse_window(&MAX_WINDOW_US.to_string()), Ok(MAX_WINDOW_US));
        for bad in ["-1", "x", "", "10001", "1.5"] {
            assert!(parse_window(bad).unwrap_err().contains("0..=10000"), "{bad}");
        }
    }
}
