//! What a store remembers of the call being timed, read and written by `cpu.rs` (the budget
//! checks) and kept in each flow's context (`host.rs`).

use std::time::Duration;

/// Per-store bookkeeping of the call being timed.
#[derive(Debug, Default)]
pub(crate) struct CallClock {
    /// Calls made so far (tells one call's callbacks from the next call's).
    pub calls: u64,
    /// (call, thread CPU time) at the call's first deadline callback.
    pub mark: Option<(u64, Duration)>,
    /// The CPU budget of the call in progress.
    pub budget: Duration,
    /// The engine's ticker, told of every call (None: no ticker, e.g. fuel or a probe).
    pub activity: Option<std::sync::Arc<crate::epoch::Activity>>,
}
