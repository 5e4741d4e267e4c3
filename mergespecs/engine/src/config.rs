//! Engine settings and the per-flow limits that keep one spec from hurting anything else.

use std::net::Ipv4Addr;
use std::time::Duration;

/// How a call into a spec is kept from running forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuLimit {
    /// Epoch interruption: a background thread ticks every `tick`; a call still running at
    /// the next tick is checked at every tick from then on and stopped once it has used
    /// `budget` of its thread's CPU time (preemption does not count). Cheapest for generated
    /// code; the default (1 ms ticks, 1 ms budget: an endless loop stops within about 2-3 ms
    /// when the machine is idle, later when the thread shares its core).
    Epoch { tick: Duration, budget: Duration },
    /// Fuel: a call may execute about this many Wasm operations. Deterministic, no thread,
    /// but every basic block pays for the accounting.
    Fuel(u64),
}

/// How many times the per-call budget a spec's `concast_init` gets (at least
/// [`INIT_MIN_BUDGET`]): it runs once per flow and may set up storage (the multiplex spec
/// writes its bundles' arena there), which is no reason to let `merge` run that long.
pub const INIT_BUDGET_FACTOR: u32 = 20;
pub const INIT_MIN_BUDGET: Duration = Duration::from_millis(20);

impl CpuLimit {
    pub fn describe(&self) -> String {
        match self {
            CpuLimit::Epoch { tick, budget } => {
                format!("{budget:?} of CPU time per call (concast_init: {:?}), checked every {tick:?}",
                    (*budget * INIT_BUDGET_FACTOR).max(INIT_MIN_BUDGET))
            }
            CpuLimit::Fuel(fuel) => format!("{fuel} fuel per call (concast_init: {}x)",
                                             INIT_BUDGET_FACTOR),
        }
    }
}

/// Limits, per flow unless said otherwise. Hitting one quarantines only that flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub cpu: CpuLimit,
    /// Linear memory of one flow's sandbox.
    pub memory_bytes: usize,
    /// Size of a module accepted by `load_spec` (engine-wide; CSP moves at most 1 MiB).
    pub module_bytes: usize,
    /// Open merge states (tags) at once.
    pub states: usize,
    /// Bytes of raw datagrams held for open states (what fail-open would forward).
    pub held_bytes: usize,
    /// Payload bytes of one emitted datagram.
    pub output_bytes: usize,
    /// `emit` calls in one `build`.
    pub emits_per_build: usize,
    /// Receiver-given parameter bytes.
    pub params_bytes: usize,
    /// Flows in one engine.
    pub flows: usize,
    /// CPU time one flow's merging may use per second of the engine clock (`budget.rs`);
    /// beyond it the flow is quarantined (`cpu_budget`). None: not measured. Off by default,
    /// because offline runs and benchmarks use virtual seconds; the daemons turn it on.
    pub cpu_per_second: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            cpu: CpuLimit::Epoch {
                tick: Duration::from_millis(1),
                budget: Duration::from_millis(1),
            },
            memory_bytes: 16 << 20,
            module_bytes: 1 << 20,
            states: 4096,
            held_bytes: 4 << 20,
            output_bytes: crate::ipv4::MAX_PAYLOAD,
            emits_per_build: 256,
            params_bytes: 4096,
            flows: 100_000,
            cpu_per_second: None,
        }
    }
}

/// How sandboxes get their memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocator {
    /// mmap per flow when it is created (no up-front reservation).
    OnDemand,
    /// wasmtime's pooling allocator with room for this many flows, reserved up front;
    /// faster instantiation, more address space.
    Pooling { flows: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// This node's address: the source of every merged datagram.
    pub node: Ipv4Addr,
    pub limits: Limits,
    pub allocator: Allocator,
    /// Timer-wheel slot width in microseconds (timers fire exactly; this only sizes buckets).
    pub timer_slot_us: u64,
    /// Log lines kept per flow (older ones are dropped and counted).
    pub log_lines: usize,
    /// Timers fire this long before their deadline ([`crate::Engine::set_timer_lead`]).
    pub timer_lead_us: u64,
    /// Bytes of datagrams all flows together may hold in open states: the node's buffer
    /// space for merging (paper 4.2.2). Beyond it the flow holding most builds its oldest
    /// states early until the node is back under budget.
    pub node_buffer_bytes: usize,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            node: Ipv4Addr::UNSPECIFIED,
            limits: Limits::default(),
            allocator: Allocator::OnDemand,
            timer_slot_us: 100,
            log_lines: 32,
            timer_lead_us: 0,
            node_buffer_bytes: 64 << 20,
        }
    }
}
