//! What a shard does when no input holds frames: poll for a short, adaptive while before it
//! sleeps, and arm the wake-up timer only for a sleep, and only when its deadline changed.
//!
//! Why poll at all: on this VM a sleeping thread's vCPU halts, and the next frame's wake-up
//! (an IPI from the sender's `tun_net_xmit`, the halted vCPU scheduled again, a context
//! switch) costs more than the frame's own work: perf put about 40 % of the emulator's
//! samples in its own sleep, wake and timer re-arm (docs/benchmarks.md, session 13). A frame
//! or a deadline that comes within the poll is taken without any of that.
//!
//! Why adaptive: a poll that finds nothing is CPU burnt, and the ACK study counts the
//! emulator's CPU per frame. The window grows (doubling, from `GROW_START_NS`, up to the
//! `max`) only after an idle period short enough that a poll of `max` would have caught it,
//! and halves after one longer than `max` (below `GROW_START_NS` it is 0: no poll). So polls
//! happen while work comes in gaps of at most `max`, and a poll costs at most the idle
//! period it replaces (the rule of the kernel's guest halt-polling, written anew here).
//!
//! No clock and no sockets: the shard implements `Wait` over its epoll set and timerfd, and
//! the tests drive it in virtual time.

/// The smallest non-zero poll window.
pub const GROW_START_NS: u64 = 2_000;
/// The daemon's default `max` (`--spin-us`): 0, no polling. A poll at real-time priority
/// holds the CPU against the processes that feed the emulator when they share its core, and
/// in two pairs of the ACK study's high-loss run a 20 us poll raised the emulator's CPU per
/// frame by 7 and 21 % and once pushed it into real-time throttling (docs/benchmarks.md,
/// session 14). It is for a machine where the emulator has a core of its own.
pub const DEFAULT_MAX_NS: u64 = 0;

pub trait Wait {
    fn now(&mut self) -> u64;
    /// Look for readable inputs or control jobs without sleeping; true if there are any.
    fn poll(&mut self) -> bool;
    /// Set the wake-up timer to `at` (None: disarm).
    fn arm(&mut self, at: Option<u64>);
    /// Sleep until an input, a job or the timer wakes us (or the daemon's idle tick).
    fn block(&mut self);
}

/// How an idle wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The poll found inputs or jobs.
    Polled,
    /// The earliest deadline passed during the poll (no timer was needed).
    Due,
    /// It slept (and the timer was armed for it when its deadline had changed).
    Slept,
}

pub struct Idle {
    max: u64,
    window: u64,
    /// What the timer is set to (None: disarmed).
    armed: Option<u64>,
}

impl Idle {
    /// `max_ns` 0: never poll, always sleep (the loop before session 14).
    pub fn new(max_ns: u64) -> Idle {
        Idle { max: max_ns, window: 0, armed: None }
    }

    pub fn window_ns(&self) -> u64 {
        self.window
    }

    /// Wait for work: poll for up to the window (or until `next`, the earliest pending event,
    /// has come), then sleep with the timer at `next`.
    pub fn wait(&mut self, w: &mut impl Wait, next: Option<u64>) -> Ended {
        if self.max == 0 {
            // No polling: not even the clock reads the window needs (the loop before session 14).
            self.sleep(w, next);
            return Ended::Slept;
        }
        let start = w.now();
        let until = start + self.window;
        let mut ended = None;
        if self.window > 0 {
            loop {
                if w.poll() {
                    ended = Some(Ended::Polled);
                    break;
                }
                let t = w.now();
                if next.is_some_and(|d| d <= t) {
                    ended = Some(Ended::Due);
                    break;
                }
                if t >= until {
                    break;
                }
            }
        }
        let ended = ended.unwrap_or_else(|| {
            self.sleep(w, next);
            Ended::Slept
        });
        self.adapt(w.now() - start);
        ended
    }

    fn sleep(&mut self, w: &mut impl Wait, next: Option<u64>) {
        // A timer re-arm is a syscall and, on this VM, a reprogrammed APIC timer: only when
        // the deadline moved.
        if next != self.armed {
            w.arm(next);
            self.armed = next;
        }
        w.block();
    }

    /// An idle period (poll and sleep) lasted `idle_ns`.
    fn adapt(&mut self, idle_ns: u64) {
        if idle_ns > self.max {
            self.window /= 2;
            if self.window < GROW_START_NS {
                self.window = 0;
            }
        } else if idle_ns > self.window {
            self.window = (self.window * 2).clamp(GROW_START_NS, self.max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1000;
    /// The window's cap in these tests (`--spin-us 20`).
    const MAX: u64 = 20 * US;

    /// Virtual time: work arrives at the given times; a poll costs `poll_ns`; a sleep ends at
    /// the next arrival or the armed timer, whichever is first.
    struct Sim {
        t: u64,
        poll_ns: u64,
        arrivals: Vec<u64>,
        timer: Option<u64>,
        arms: usize,
        polls: usize,
        sleeps: usize,
        /// Time spent polling (CPU) and sleeping.
        polled_ns: u64,
    }

    impl Sim {
        fn new(arrivals: Vec<u64>) -> Sim {
            Sim { t: 0, poll_ns: 200, arrivals, timer: None, arms: 0, polls: 0, sleeps: 0, polled_ns: 0 }
        }
        /// Take the arrivals that have come by now; true if any.
        fn take(&mut self) -> bool {
            let n = self.arrivals.iter().take_while(|&&a| a <= self.t).count();
            self.arrivals.drain(..n);
            n > 0
        }
    }

    impl Wait for Sim {
        fn now(&mut self) -> u64 {
            self.t
        }
        fn poll(&mut self) -> bool {
            self.polls += 1;
            self.t += self.poll_ns;
            self.polled_ns += self.poll_ns;
            self.take()
        }
        fn arm(&mut self, at: Option<u64>) {
            self.arms += 1;
            self.timer = at;
        }
        fn block(&mut self) {
            self.sleeps += 1;
            let wake = [self.arrivals.first().copied(), self.timer.filter(|&t| t > self.t)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(self.t + 1_000_000 * US);
            self.t = self.t.max(wake);
            self.take();
        }
    }

    #[test]
    fn by_default_every_wait_sleeps_as_before() {
        let mut sim = Sim::new((1..=100).map(|i| i * 3 * US).collect());
        let mut idle = Idle::new(DEFAULT_MAX_NS);
        for _ in 0..100 {
            assert_eq!(idle.wait(&mut sim, None), Ended::Slept);
        }
        assert_eq!((sim.sleeps, sim.polls, sim.arms), (100, 0, 0));
    }

    #[test]
    fn frames_in_short_gaps_are_caught_by_the_poll_after_a_few_sleeps() {
        // A frame every 3 us (a sender flooding the TAP): the window grows until the poll
        // catches each frame, and then no wait sleeps any more.
        let mut sim = Sim::new((1..=1000).map(|i| i * 3 * US).collect());
        let mut idle = Idle::new(MAX);
        let ended: Vec<Ended> = (0..1000).map(|_| idle.wait(&mut sim, None)).collect();
        let first_poll = ended.iter().position(|&e| e == Ended::Polled).unwrap();
        assert!(first_poll <= 3, "{first_poll} sleeps before the first caught frame");
        assert!(ended[first_poll..].iter().all(|&e| e == Ended::Polled));
        assert!(idle.window_ns() >= 3 * US && idle.window_ns() <= MAX);
    }

    #[test]
    fn long_gaps_stop_the_polling_so_it_costs_no_cpu() {
        // Busy first (2 us gaps), then a frame every 1 ms: after a few sleeps the window is 0
        // and no more time goes into polls.
        let mut arrivals: Vec<u64> = (1..=50).map(|i| i * 2 * US).collect();
        arrivals.extend((1..=50).map(|i| 100 * US + i * 1000 * US));
        let mut sim = Sim::new(arrivals);
        let mut idle = Idle::new(MAX);
        for _ in 0..50 {
            idle.wait(&mut sim, None);
        }
        assert!(idle.window_ns() > 0);
        let mut shrunk_after = None;
        for k in 0..50 {
            idle.wait(&mut sim, None);
            if shrunk_after.is_none() && idle.window_ns() == 0 {
                shrunk_after = Some(k);
            }
        }
        let k = shrunk_after.expect("the window shrinks to 0 with 1 ms gaps");
        assert!(k <= 4, "{k} long waits before the window closed");
        // Each poll cost at most the window, which never exceeds max, and stopped at k.
        assert!(sim.polled_ns <= 50 * 2 * US + (k as u64 + 1) * MAX, "{}", sim.polled_ns);
    }

    #[test]
    fn a_poll_lasts_at_most_its_gap_and_at_most_max() {
        // Gaps spread over 1..40 us, about half longer than max: the time spent polling is
        // bounded by min(gap, max) per idle period (plus the one poll that overshoots).
        let mut t = 0;
        let gaps: Vec<u64> = (0..2000u64).map(|i| (i * 7919 % 40 + 1) * US).collect();
        let arrivals: Vec<u64> = gaps
            .iter()
            .map(|g| {
                t += g;
                t
            })
            .collect();
        let mut sim = Sim::new(arrivals);
        let bound: u64 = gaps.iter().map(|&g| g.min(MAX) + sim.poll_ns).sum();
        let mut idle = Idle::new(MAX);
        let mut polled = 0;
        while !sim.arrivals.is_empty() {
            if idle.wait(&mut sim, None) == Ended::Polled {
                polled += 1;
            }
            assert!(idle.window_ns() <= MAX);
        }
        assert!(sim.polled_ns <= bound, "{} ns polled, bound {bound}", sim.polled_ns);
        assert!(polled > 0 && sim.sleeps > 0, "{polled} caught by a poll, {} slept", sim.sleeps);
    }

    #[test]
    fn a_deadline_within_the_poll_is_met_without_the_timer() {
        let mut sim = Sim::new((1..=20).map(|i| i * 3 * US).collect());
        let mut idle = Idle::new(MAX);
        while !sim.arrivals.is_empty() {
            idle.wait(&mut sim, None);
        }
        let w = idle.window_ns();
        assert!(w >= 3 * US);
        let arms = sim.arms;
        let due = sim.t + w / 2;
        assert_eq!(idle.wait(&mut sim, Some(due)), Ended::Due);
        assert!(sim.t >= due && sim.t < due + sim.poll_ns + 1, "left the poll at {} for {due}", sim.t);
        assert_eq!(sim.arms, arms, "no timer for a deadline inside the poll");
    }

    #[test]
    fn the_timer_is_armed_only_when_the_deadline_moves() {
        // No poll (max 0): every wait sleeps; the same deadline twice arms once.
        let mut sim = Sim::new(vec![10 * US, 20 * US]);
        let mut idle = Idle::new(0);
        assert_eq!(idle.wait(&mut sim, Some(500 * US)), Ended::Slept);
        assert_eq!(sim.t, 10 * US, "woken by the frame, before the deadline");
        assert_eq!(idle.wait(&mut sim, Some(500 * US)), Ended::Slept);
        assert_eq!(sim.arms, 1);
        // The deadline wakes the sleep exactly when it comes.
        assert_eq!(idle.wait(&mut sim, Some(500 * US)), Ended::Slept);
        assert_eq!(sim.t, 500 * US);
        assert_eq!(idle.wait(&mut sim, Some(900 * US)), Ended::Slept);
        assert_eq!((sim.arms, sim.t), (2, 900 * US));
        assert_eq!(idle.wait(&mut sim, None), Ended::Slept);
        assert_eq!(sim.arms, 3, "disarmed when nothing is pending");
    }
}
