//! The per-flow CPU budget: how much of the node's CPU one flow's merging may use per second.
//!
//! The per-call limit (`cpu.rs`) stops one endless call; it cannot stop a spec whose every
//! call is short but which makes a great many of them (a timer re-armed for the next
//! microsecond, an expensive merge under heavy traffic). This one can: the engine reads the
//! thread's CPU time around each piece of work it does for a flow (a batch of its datagrams,
//! a timer, a flush) and charges the flow; a flow that uses more than its budget within one
//! second of the engine clock is quarantined (fail-open), so the rest of the node's time
//! stays with the other flows. Two clock reads per piece of work (about 0.3 µs here), and
//! none at all with the budget off. Timers are charged at least a daemon's wake-up per
//! call that fires them ([`WAKE_UP`]): most of what a timer flood costs is outside the engine.

use std::time::Duration;

use crate::fault::Fault;

const WINDOW_US: u64 = 1_000_000;

/// The least a flow is charged for a call of `Engine::advance` in which its timers fired:
/// about what one pass of routerd's loop costs here (wake from ppoll, read the CPU port, run
/// CSP and engine timers, flush), an estimate on the safe side. Many timers firing in one
/// call share it; a timer re-armed for "now" pays it on every pass.
pub(crate) const WAKE_UP: Duration = Duration::from_micros(20);

/// One flow's account: CPU time used in the current one-second window, and in all.
#[derive(Debug, Clone, Default)]
pub(crate) struct CpuAccount {
    window_start: u64,
    window_used: Duration,
    /// All CPU time charged so far (shown as the `cpu_us` counter).
    pub total: Duration,
}

impl CpuAccount {
    /// Adds `used` at engine time `now`; the fault when the window's budget is exceeded.
    pub fn charge(&mut self, used: Duration, now: u64, budget: Duration) -> Result<(), Fault> {
        if now >= self.window_start + WINDOW_US {
            self.window_start = now;
            self.window_used = Duration::ZERO;
        }
        self.window_used += used;
        self.total += used;
        if self.window_used > budget {
            return Err(Fault::CpuBudget {
                used_us: self.window_used.as_micros() as u64,
                budget_us: budget.as_micros() as u64,
            });
        }
        Ok(())
    }
}

/// A stopwatch on this thread's CPU time, started only when a budget is set.
pub(crate) struct Stopwatch(Option<Duration>);

impl Stopwatch {
    #[inline]
    pub fn start(budget: Option<Duration>) -> Stopwatch {
        Stopwatch(budget.map(|_| crate::cpu::thread_cpu_time()))
    }

    /// CPU time since `start` (None when no budget is set).
    #[inline]
    pub fn elapsed(&self) -> Option<Duration> {
        self.0.map(|t0| crate::cpu::thread_cpu_time().saturating_sub(t0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_budget_is_per_second_of_engine_time() {
        let mut a = CpuAccount::default();
        let budget = 10 * MS;
        assert!(a.charge(6 * MS, 0, budget).is_ok());
        assert!(a.charge(4 * MS, 999_999, budget).is_ok(), "exactly the budget is allowed");
        // A new window starts: the 10 ms already used no longer count.
        assert!(a.charge(9 * MS, 1_000_000, budget).is_ok());
        let err = a.charge(2 * MS, 1_500_000, budget).unwrap_err();
        assert_eq!(err, Fault::CpuBudget { used_us: 11_000, budget_us: 10_000 });
        assert_eq!(a.total, 21 * MS);
    }

    #[test]
    fn a_stopwatch_without_a_budget_reads_no_clock() {
        assert_eq!(Stopwatch::start(None).elapsed(), None);
        let w = Stopwatch::start(Some(MS));
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(w.elapsed().is_some());
    }
}
