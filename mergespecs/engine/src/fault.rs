//! Why a spec stopped: every trap, limit and ABI misuse that quarantines a flow.

use std::fmt;

/// Something a spec did that ends its flow's merging (the flow is quarantined, fail-open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// A Wasm trap (unreachable, out-of-bounds access, stack overflow, ...).
    Trap(String),
    /// The per-call CPU budget (epoch deadline or fuel) ran out: an endless loop, say.
    CpuLimit(String),
    /// The flow used more than its CPU budget per second (many calls, each within the
    /// per-call limit: a timer flood, an expensive spec under heavy traffic).
    CpuBudget { used_us: u64, budget_us: u64 },
    /// `memory.grow` past the flow's linear-memory limit.
    MemoryLimit { limit: usize, requested: usize },
    /// `emit` of a payload larger than the output limit.
    OutputTooLarge { len: usize, limit: usize },
    /// More `emit` calls in one `build` than allowed.
    TooManyEmits { limit: usize },
    /// More open merge states than the flow may have.
    TooManyStates { limit: usize },
    /// The datagrams held for open states exceed the flow's limit.
    HeldBytes { limit: usize },
    /// The spec called `abort` (the SDK does so on a panic, or to refuse a flow).
    Aborted(String),
    /// The spec broke the ABI: a bad pointer, an import used where it is not allowed, an
    /// unknown return code, ...
    Abi(String),
    /// A native spec panicked.
    Panic(String),
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Trap(trap) => write!(f, "trapped: {trap}"),
            Fault::CpuLimit(limit) => write!(f, "ran out of CPU time ({limit})"),
            Fault::CpuBudget { used_us, budget_us } => write!(
                f,
                "CPU budget: used {used_us} µs of CPU time within one second, the budget is {budget_us} µs"
            ),
            Fault::MemoryLimit { limit, requested } => {
                write!(f, "memory limit: asked for {requested} bytes of linear memory, the limit is {limit}")
            }
            Fault::OutputTooLarge { len, limit } => {
                write!(
                    f,
                    "output limit: emitted a {len}-byte payload, the limit is {limit}"
                )
            }
            Fault::TooManyEmits { limit } => {
                write!(f, "output limit: more than {limit} emits in one build")
            }
            Fault::TooManyStates { limit } => {
                write!(f, "state limit: more than {limit} open merge states")
            }
            Fault::HeldBytes { limit } => write!(
                f,
                "held-bytes limit: open states hold more than {limit} bytes"
            ),
            Fault::Aborted(msg) => write!(f, "aborted: {msg}"),
            Fault::Abi(what) => write!(f, "ABI violation: {what}"),
            Fault::Panic(msg) => write!(f, "panicked: {msg}"),
        }
    }
}

impl std::error::Error for Fault {}

impl Fault {
    /// A short machine-readable name (counters, JSON output, CSP error reasons).
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Trap(_) => "trap",
            Fault::CpuLimit(_) => "cpu_limit",
            Fault::CpuBudget { .. } => "cpu_budget",
            Fault::MemoryLimit { .. } => "memory_limit",
            Fault::OutputTooLarge { .. } | Fault::TooManyEmits { .. } => "output_limit",
            Fault::TooManyStates { .. } => "state_limit",
            Fault::HeldBytes { .. } => "held_bytes_limit",
            Fault::Aborted(_) => "aborted",
            Fault::Abi(_) => "abi_violation",
            Fault::Panic(_) => "panic",
        }
    }

    /// The fault behind an error returned by a wasmtime call.
    pub(crate) fn from_wasmtime(err: wasmtime::Error, cpu_limit: &str) -> Fault {
        if let Some(fault) = err.downcast_ref::<Fault>() {
            return fault.clone();
        }
        match err.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt | wasmtime::Trap::OutOfFuel) => {
                Fault::CpuLimit(cpu_limit.to_string())
            }
            Some(trap) => Fault::Trap(trap.to_string()),
            None => Fault::Trap(format!("{err:#}")),
        }
    }
}

/// Why and when a flow was quarantined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantine {
    /// The export (or engine step) that was running, e.g. `concast_merge`.
    pub call: &'static str,
    pub fault: Fault,
    /// Engine clock when it happened.
    pub at_us: u64,
}

impl fmt::Display for Quarantine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.call, self.fault)
    }
}
