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
    /// A pool of `slots` sandboxes, each reserving what a flow may use
    /// ([`Limits::memory_bytes`]) followed by a guard that makes the slot span
    /// [`POOL_SLOT_SPAN`] (the 32-bit index range plus 32 MiB), so compiled code needs no
    /// bounds check for an access with a constant offset up to 32 MiB: any
    /// address a 32-bit index can form lands in the memory or in `PROT_NONE` guard pages,
    /// which trap. The reservation is address space, not memory
    /// ([`Allocator::reserved_bytes`]). When every slot is taken, a flow gets an on-demand
    /// sandbox instead (same layout, same code) and the engine counts it
    /// (`Engine::pool_fallbacks`). What routerd and hostd use.
    Bounded { slots: u32 },
}

/// Address space one slot of an [`Allocator::Bounded`] pool spans, memory and guard
/// together: wasmtime's default slot (4 GiB reservation, 32 MiB guard). Compiled code may
/// then skip the bounds check of any access whose constant offset plus size stays within
/// `memory reservation + guard - 4 GiB` = 32 MiB (wasmtime's `can_elide_bounds_check`);
/// larger offsets are checked explicitly.
pub const POOL_SLOT_SPAN: u64 = (4 << 30) + (32 << 20);

/// The least guard after a slot's memory, whatever the memory limit.
pub const POOL_MIN_GUARD_BYTES: u64 = 64 << 10;

/// Slots of the daemons' pool unless configured (routerd's `flow_pool_slots`, hostd's
/// `--flow-pool-slots`): 64 slots and the guard before the first ≈ 262 GiB of address
/// space, reserved `PROT_NONE` (no memory, no commit charge, no page tables until touched);
/// a router rarely merges more flows at once, and more fall back, counted (docs/benchmarks.md
/// "session 12": pool sizes measured).
pub const DAEMON_POOL_SLOTS: u32 = 64;

impl Allocator {
    /// What the daemons run with `slots` pool slots (0: on-demand only).
    pub fn for_daemon(slots: u32) -> Allocator {
        match slots {
            0 => Allocator::OnDemand,
            slots => Allocator::Bounded { slots },
        }
    }

    /// Bytes of address space a [`Allocator::Bounded`] pool reserves for linear memories
    /// with these limits: its slots and the guard before the first (None for the other
    /// allocators: on-demand reserves per flow, the plain pool 4 GiB plus guard per slot).
    pub fn reserved_bytes(&self, limits: &Limits) -> Option<u64> {
        match *self {
            Allocator::Bounded { slots } => {
                let slot = bounded_reservation(limits) + bounded_guard(limits);
                Some(u64::from(slots) * slot + bounded_guard(limits))
            }
            _ => None,
        }
    }
}

/// The linear-memory reservation of a bounded pool's slot: the memory limit rounded up to
/// whole Wasm pages.
pub(crate) fn bounded_reservation(limits: &Limits) -> u64 {
    const PAGE: u64 = 64 << 10;
    (limits.memory_bytes as u64).div_ceil(PAGE).max(1) * PAGE
}

/// The guard after a bounded pool's slot (and before the first): the rest of
/// [`POOL_SLOT_SPAN`], at least [`POOL_MIN_GUARD_BYTES`].
pub(crate) fn bounded_guard(limits: &Limits) -> u64 {
    POOL_SLOT_SPAN
        .saturating_sub(bounded_reservation(limits))
        .max(POOL_MIN_GUARD_BYTES)
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
