//! What a store remembers of the call being timed, read and written by `cpu.rs` (the budget
//! checks) and kept in each flow's context (`host.rs`).

use std::time::Duration;

/// Per-store bookkeeping of the call being timed.
#[derive(Debug, Default)]
pub(crate) struct CallClock {
    /// Calls made so far (tells one call's callbacks from the next call's).
    pub calls: u64,
    /// (call, step, thread CPU time) at the call's first deadline callback for that step.
    pub mark: Option<(u64, u32, Duration)>,
    /// ABI v2: the batch area while a `concast_run` is running; each datagram of the run
    /// (the entry index the spec writes into the header) is a step with its own budget.
    pub run_area: Option<usize>,
    /// The CPU budget of the call in progress.
    pub budget: Duration,
    /// The engine's ticker, told of every call (None: no ticker, e.g. fuel or a probe).
    pub activity: Option<std::sync::Arc<crate::epoch::Activity>>,
}
