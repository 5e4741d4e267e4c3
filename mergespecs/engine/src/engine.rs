//! The engine: flows by (R, G), the spec cache, the timer wheel and the public API
//! (`ingest`, `advance`, flow lifecycle, stats).

use std::collections::HashMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::sync::Arc;

use wasmtime::{Enabled, InstanceAllocationStrategy, Linker, OptLevel, PoolingAllocationConfig};

use crate::budget::Stopwatch;
use crate::config::{bounded_guard, bounded_reservation, Allocator, CpuLimit, EngineConfig};
use crate::epoch::EpochTicker;
use crate::fallback::Fallback;
use crate::fault::Fault;
use crate::flow::{Env, Flow, FlowStats};
use crate::host::{FlowCtx, FlowInfo, LogLine};
use crate::ipv4::{self, FlowId};
use crate::output::{OutputKind, Outputs, Unmerged};
use crate::sandbox::{Sandbox, WasmSandbox};
use crate::spec::{self, SpecError, SpecKind, SpecRef};
use crate::gate::EgressGate;
use crate::timers::{TimerKey, TimerWheel};

/// Where the engine keeps a flow: a handle, stale once the flow is removed (the flow itself
/// is named by its [`FlowId`] (R, G)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowSlot {
    index: u32,
    generation: u32,
}

/// How to set up a flow.
#[derive(Debug, Clone)]
pub struct FlowConfig {
    pub key: FlowId,
    pub spec: SpecRef,
    /// Path MTU toward R (what `flow_mtu` reports).
    pub path_mtu: u32,
    /// Downstream children joined here (what `flow_children` reports; 0 = unknown).
    pub children: u32,
    /// Receiver-given parameters (opaque to the engine).
    pub params: Vec<u8>,
}

impl FlowConfig {
    pub fn new(key: FlowId, spec: SpecRef) -> FlowConfig {
        FlowConfig {
            key,
            spec,
            path_mtu: 1500,
            children: 0,
            params: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowError {
    Exists(FlowId),
    TooManyFlows {
        limit: usize,
    },
    ParamsTooLarge {
        len: usize,
        limit: usize,
    },
    /// The spec refused or failed to start the flow (`concast_init` aborted, trapped, ...).
    Refused {
        call: &'static str,
        fault: Fault,
    },
    /// The spec was loaded by another engine.
    ForeignSpec,
    UnknownFlow,
}

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowError::Exists(key) => write!(f, "flow {key} exists already"),
            FlowError::TooManyFlows { limit } => {
                write!(f, "the engine holds {limit} flows, its limit")
            }
            FlowError::ParamsTooLarge { len, limit } => {
                write!(f, "parameters are {len} bytes; the limit is {limit}")
            }
            FlowError::Refused { call, fault } => {
                write!(f, "the spec did not start the flow: {call} {fault}")
            }
            FlowError::ForeignSpec => f.write_str("the spec was loaded into another engine"),
            FlowError::UnknownFlow => f.write_str("no such flow (removed?)"),
        }
    }
}

impl std::error::Error for FlowError {}

#[derive(Debug)]
pub struct EngineError(String);

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot start the merge engine: {}", self.0)
    }
}

impl std::error::Error for EngineError {}

/// The allocator, a bounded pool's slots and the address space its memories reserve, and
/// the sandboxes made on demand because it was full.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PoolStats {
    pub allocator: &'static str,
    pub pool_slots: u32,
    pub pool_reserved_bytes: Option<u64>,
    pub pool_fallbacks: u64,
}

pub struct Engine {
    wasm: wasmtime::Engine,
    linker: Linker<FlowCtx>,
    config: EngineConfig,
    specs: HashMap<[u8; 32], SpecRef>,
    flows: Vec<Option<Flow>>,
    generations: Vec<u32>,
    free: Vec<u32>,
    by_key: HashMap<FlowId, FlowSlot>,
    timers: TimerWheel,
    due: Vec<(u64, TimerKey)>,
    ticker: Option<EpochTicker>,
    /// A bounded pool's on-demand overflow.
    fallback: Option<Arc<Fallback>>,
    gate: Option<Box<dyn EgressGate>>,
    /// Timers fire this long before their deadline (sleep and send latency; 0 offline).
    lead_us: u64,
    /// Bytes all flows' open states hold (kept up to date by `with_flow` and `advance`).
    held_total: usize,
}

/// Bytes of a pooled sandbox's memory (and table) kept resident between flows: what a
/// bundled spec touches with a full batch in flight (stack, data, a 64 KiB batch area).
const POOL_KEEP_RESIDENT: usize = 256 << 10;

/// The wasmtime configuration the limits call for. `pooled` false: the same code
/// generation with the on-demand allocator (a bounded pool's fallback).
fn wasmtime_config(config: &EngineConfig, pooled: bool) -> wasmtime::Config {
    let mut c = wasmtime::Config::new();
    c.cranelift_opt_level(OptLevel::Speed);
    match config.limits.cpu {
        CpuLimit::Epoch { .. } => c.epoch_interruption(true),
        CpuLimit::Fuel(_) => c.consume_fuel(true),
    };
    let flows = match config.allocator {
        Allocator::OnDemand => return c,
        Allocator::Pooling { flows } => flows,
        Allocator::Bounded { slots } => {
            // Each memory reserves what the limit lets it grow to, never more, and never
            // moves; the guard after it covers the rest of the 32-bit index range, so the
            // compiled code relies on the guard pages instead of checking each access.
            c.memory_reservation(bounded_reservation(&config.limits))
                .memory_guard_size(bounded_guard(&config.limits))
                .memory_reservation_for_growth(0)
                .memory_may_move(false);
            slots
        }
    };
    if !pooled {
        return c;
    }
    let mut pool = PoolingAllocationConfig::new();
    pool.total_core_instances(flows)
        .total_memories(flows)
        .total_tables(flows)
        .max_memory_size(config.limits.memory_bytes)
        // A freed slot stays affine to its spec (its copy-on-write image stays mapped),
        // so a new flow of the same spec needs no mmap or mprotect.
        .max_unused_warm_slots(flows)
        // Dirty pages up to this much are zeroed in place when a flow goes (found with
        // the kernel's pagemap scan) instead of madvised away, so the next flow in the
        // slot does not fault them in again. The copy-on-write image is reset too:
        // nothing one flow wrote is seen by the next.
        .linear_memory_keep_resident(POOL_KEEP_RESIDENT)
        .table_keep_resident(POOL_KEEP_RESIDENT)
        // Without the scan, the whole kept-resident range is zeroed on every free.
        .pagemap_scan(Enabled::Auto);
    c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    c
}

impl Engine {
    pub fn new(config: EngineConfig) -> Result<Engine, EngineError> {
        let wasm = wasmtime::Engine::new(&wasmtime_config(&config, true))
            .map_err(|e| EngineError(format!("{e:#}")))?;
        let linker =
            crate::linker::concast_linker(&wasm).map_err(|e| EngineError(format!("{e:#}")))?;
        let fallback = match config.allocator {
            Allocator::Bounded { .. } => {
                let on_demand = wasmtime::Engine::new(&wasmtime_config(&config, false))
                    .and_then(Fallback::new)
                    .map_err(|e| EngineError(format!("the pool's fallback: {e:#}")))?;
                Some(Arc::new(on_demand))
            }
            _ => None,
        };
        let mut engines = vec![wasm.clone()];
        engines.extend(fallback.as_ref().map(|f| f.engine.clone()));
        let ticker = match config.limits.cpu {
            CpuLimit::Epoch { tick, .. } => Some(
                EpochTicker::start(engines, tick).map_err(|e| EngineError(e.to_string()))?,
            ),
            CpuLimit::Fuel(_) => None,
        };
        let timers = TimerWheel::new(config.timer_slot_us, 0);
        let lead_us = config.timer_lead_us;
        Ok(Engine {
            wasm,
            linker,
            config,
            specs: HashMap::new(),
            flows: Vec::new(),
            generations: Vec::new(),
            free: Vec::new(),
            by_key: HashMap::new(),
            timers,
            due: Vec::new(),
            ticker,
            fallback,
            gate: None,
            lead_us,
            held_total: 0,
        })
    }

    /// Fires every timer `lead_us` before its deadline, so what a timer builds leaves just
    /// before the delay bound rather than just after it (paper 4.2.4). Daemons set it to
    /// their wake-up and send latency; offline runs keep 0 (virtual time has none).
    pub fn set_timer_lead(&mut self, lead_us: u64) {
        self.lead_us = lead_us;
    }

    pub fn timer_lead(&self) -> u64 {
        self.lead_us
    }

    /// Installs the egress gate (`None` removes it): finished states whose spec gave a hold
    /// limit wait while the gate says their output link is busy.
    pub fn set_egress_gate(&mut self, gate: Option<Box<dyn EgressGate>>) {
        self.gate = gate;
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// How this engine's sandboxes get memory (routerd's and hostd's `stats`).
    pub fn pool_stats(&self) -> PoolStats {
        let (allocator, pool_slots) = match self.config.allocator {
            Allocator::OnDemand => ("on-demand", 0),
            Allocator::Pooling { flows } => ("pooling", flows),
            Allocator::Bounded { slots } => ("bounded-pool", slots),
        };
        PoolStats {
            allocator,
            pool_slots,
            pool_reserved_bytes: self.config.allocator.reserved_bytes(&self.config.limits),
            pool_fallbacks: self.pool_fallbacks(),
        }
    }

    /// Sandboxes made on demand because the bounded pool was full (flows, and the
    /// throwaway sandbox that asks a new spec its ABI version); 0 without a bounded pool.
    pub fn pool_fallbacks(&self) -> u64 {
        self.fallback.as_ref().map_or(0, |f| f.used())
    }

    /// Validates and compiles a module, or returns the cached one with the same SHA-256.
    pub fn load_spec(&mut self, bytes: &[u8]) -> Result<SpecRef, SpecError> {
        if bytes.len() > self.config.limits.module_bytes {
            return Err(SpecError::TooLarge {
                size: bytes.len(),
                limit: self.config.limits.module_bytes,
            });
        }
        let hash = spec::sha256(bytes);
        if let Some(spec) = self.specs.get(&hash) {
            return Ok(spec.clone());
        }
        let inner = spec::compile(&self.wasm, &self.linker, bytes, &self.config.limits, self.fallback.as_ref())?;
        let spec = SpecRef(std::sync::Arc::new(inner));
        self.specs.insert(hash, spec.clone());
        Ok(spec)
    }

    /// The cached spec with this SHA-256, if loaded.
    pub fn cached_spec(&self, sha256: &[u8; 32]) -> Option<SpecRef> {
        self.specs.get(sha256).cloned()
    }

    /// Drops a spec from the cache (flows using it keep running).
    pub fn forget_spec(&mut self, sha256: &[u8; 32]) {
        self.specs.remove(sha256);
    }

    pub fn add_flow(&mut self, cfg: FlowConfig, now: u64) -> Result<FlowSlot, FlowError> {
        let limits = &self.config.limits;
        if self.by_key.contains_key(&cfg.key) {
            return Err(FlowError::Exists(cfg.key));
        }
        if self.by_key.len() >= limits.flows {
            return Err(FlowError::TooManyFlows {
                limit: limits.flows,
            });
        }
        let mut cfg = cfg;
        if cfg.params.is_empty() {
            cfg.params = cfg.spec.info().params.clone(); // the receiver's, from the module
        }
        if cfg.params.len() > limits.params_bytes {
            return Err(FlowError::ParamsTooLarge {
                len: cfg.params.len(),
                limit: limits.params_bytes,
            });
        }
        let info = FlowInfo {
            receiver: u32::from(cfg.key.receiver),
            group: cfg.key.group,
            node: u32::from(self.config.node),
            path_mtu: cfg.path_mtu,
            children: cfg.children,
            params: cfg.params,
        };
        let mut ctx = FlowCtx::new(info, limits, self.config.log_lines);
        ctx.now_us = now;
        ctx.clock.activity = self.ticker.as_ref().map(|t| t.activity.clone());
        let sandbox: Box<dyn Sandbox> = match &cfg.spec.0.kind {
            SpecKind::Wasm(ws) => {
                if !wasmtime::Engine::same(ws.pre.module().engine(), &self.wasm) {
                    return Err(FlowError::ForeignSpec);
                }
                let (sb, _) = WasmSandbox::new(ws, ctx, limits.cpu)
                    .map_err(|(fault, call)| FlowError::Refused { call, fault })?;
                Box::new(sb)
            }
            SpecKind::Native(factory) => {
                factory
                    .instantiate(ctx)
                    .map_err(|fault| FlowError::Refused {
                        call: "init",
                        fault,
                    })?
            }
        };
        let index = self.free.pop().unwrap_or_else(|| {
            self.flows.push(None);
            self.generations.push(0);
            (self.flows.len() - 1) as u32
        });
        let id = FlowSlot {
            index,
            generation: self.generations[index as usize],
        };
        self.flows[index as usize] = Some(Flow::new(cfg.key, index, cfg.spec, sandbox));
        self.by_key.insert(cfg.key, id);
        Ok(id)
    }

    pub fn flow_slot(&self, key: FlowId) -> Option<FlowSlot> {
        self.by_key.get(&key).copied()
    }

    pub fn flow_slots(&self) -> Vec<FlowSlot> {
        let mut ids: Vec<FlowSlot> = self.by_key.values().copied().collect();
        ids.sort();
        ids
    }

    pub fn flow_count(&self) -> usize {
        self.by_key.len()
    }

    fn flow_mut(&mut self, id: FlowSlot) -> Result<&mut Flow, FlowError> {
        match self.flows.get_mut(id.index as usize) {
            Some(Some(flow)) if self.generations[id.index as usize] == id.generation => Ok(flow),
            _ => Err(FlowError::UnknownFlow),
        }
    }

    fn flow(&self, id: FlowSlot) -> Option<&Flow> {
        match self.flows.get(id.index as usize) {
            Some(Some(flow)) if self.generations[id.index as usize] == id.generation => Some(flow),
            _ => None,
        }
    }

    /// Runs `f` on one flow with the engine's shared parts lent to it.
    fn with_flow<R>(
        &mut self,
        id: FlowSlot,
        now: u64,
        out: &mut Outputs,
        f: impl FnOnce(&mut Flow, &mut Env) -> R,
    ) -> Result<R, FlowError> {
        let Engine {
            flows,
            generations,
            timers,
            config,
            gate,
            lead_us,
            held_total,
            ..
        } = self;
        let flow = match flows.get_mut(id.index as usize) {
            Some(Some(flow)) if generations[id.index as usize] == id.generation => flow,
            _ => return Err(FlowError::UnknownFlow),
        };
        let before = flow.held_bytes();
        let watch = Stopwatch::start(config.limits.cpu_per_second);
        let mut e = env(timers, out, now, config, gate, *lead_us);
        let r = f(flow, &mut e);
        if let Some(used) = watch.elapsed() {
            flow.charge_cpu(used, &mut e);
        }
        *held_total = *held_total + flow.held_bytes() - before;
        Ok(r)
    }

    /// Bytes of datagrams held in open states, all flows together.
    pub fn held_bytes(&self) -> usize {
        self.held_total
    }

    /// Over the node's buffer budget: the flow holding most builds its oldest state, again
    /// and again, until the node is back under it (paper 4.2.2, condition 3).
    fn keep_to_budget(&mut self, now: u64, out: &mut Outputs) {
        while self.held_total > self.config.node_buffer_bytes {
            let largest = self
                .flows
                .iter()
                .enumerate()
                .filter_map(|(i, f)| Some((i, f.as_ref()?.held_bytes())))
                .filter(|&(_, held)| held > 0)
                .max_by_key(|&(_, held)| held);
            let Some((index, _)) = largest else { break };
            let id = FlowSlot { index: index as u32, generation: self.generations[index] };
            if !matches!(self.with_flow(id, now, out, |flow, env| flow.build_oldest(env)), Ok(true)) {
                break;
            }
        }
    }

    /// Merges a batch of datagrams of one flow, received by `now`. Due timers fire first.
    /// Datagrams later in the batch are the spec's pending queue while earlier ones merge.
    pub fn ingest<D: AsRef<[u8]>>(
        &mut self,
        flow: FlowSlot,
        batch: &[D],
        now: u64,
        out: &mut Outputs,
    ) -> Result<(), FlowError> {
        self.advance(now, out);
        self.with_flow(flow, now, out, |flow, env| flow.ingest(batch, env))?;
        self.keep_to_budget(now, out);
        Ok(())
    }

    /// Like [`Engine::ingest`] for datagrams of any flows: each goes to the flow of its
    /// (R, G); ones that are not concast datagrams of a flow here come back as `NoFlow`.
    pub fn ingest_mixed<D: AsRef<[u8]>>(&mut self, batch: &[D], now: u64, out: &mut Outputs) {
        self.advance(now, out);
        let mut groups: Vec<(FlowSlot, Vec<&[u8]>)> = Vec::new();
        for d in batch {
            let d = d.as_ref();
            match ipv4::flow_key(d).ok().and_then(|key| self.flow_slot(key)) {
                Some(id) => match groups.iter_mut().find(|(g, _)| *g == id) {
                    Some((_, list)) => list.push(d),
                    None => groups.push((id, vec![d])),
                },
                None => {
                    let dst = if d.len() >= 20 {
                        Ipv4Addr::new(d[16], d[17], d[18], d[19])
                    } else {
                        Ipv4Addr::UNSPECIFIED
                    };
                    out.push(
                        FlowId::new(dst, 0),
                        now,
                        OutputKind::Unmerged(Unmerged::NoFlow),
                        d,
                    );
                }
            }
        }
        for (id, list) in groups {
            let _ = self.with_flow(id, now, out, |flow, env| flow.ingest(&list, env));
        }
        self.keep_to_budget(now, out);
    }

    /// Fires every timer due by `now` (plus the timer lead), in deadline order; each
    /// callback sees `now`.
    pub fn advance(&mut self, now: u64, out: &mut Outputs) {
        let mut due = std::mem::take(&mut self.due);
        self.timers.expire(now + self.lead_us, &mut due);
        let budget = self.config.limits.cpu_per_second;
        // With a CPU budget: the time each flow's timers took in this call.
        let mut spent: Vec<(u32, std::time::Duration)> = Vec::new();
        for &(_, key) in &due {
            let Engine {
                flows,
                timers,
                config,
                gate,
                lead_us,
                held_total,
                ..
            } = self;
            if let Some(Some(flow)) = flows.get_mut(key.flow as usize) {
                let before = flow.held_bytes();
                let watch = Stopwatch::start(budget);
                flow.fire_timer(key.slot, &mut env(timers, out, now, config, gate, *lead_us));
                if let Some(used) = watch.elapsed() {
                    match spent.iter_mut().find(|(f, _)| *f == key.flow) {
                        Some((_, t)) => *t += used,
                        None => spent.push((key.flow, used)),
                    }
                }
                *held_total = *held_total + flow.held_bytes() - before;
            }
        }
        self.due = due;
        // A flow whose timers fired is charged at least a daemon's wake-up: a spec that
        // re-arms its timer for "now" costs one loop of routerd per firing, mostly outside
        // the engine, and would otherwise look almost free.
        for (index, used) in spent {
            let Engine { flows, timers, config, gate, lead_us, held_total, .. } = self;
            if let Some(Some(flow)) = flows.get_mut(index as usize) {
                let before = flow.held_bytes();
                let mut e = env(timers, out, now, config, gate, *lead_us);
                flow.charge_cpu(used.max(crate::budget::WAKE_UP), &mut e);
                *held_total = *held_total + flow.held_bytes() - before;
            }
        }
    }

    /// Virtual time: steps the clock from deadline to deadline up to `until`, so every timer
    /// callback sees its own deadline as `now`, then advances to `until`.
    pub fn advance_until(&mut self, until: u64, out: &mut Outputs) {
        while let Some(deadline) = self.next_deadline().filter(|&d| d <= until) {
            self.advance(deadline, out);
        }
        self.advance(until, out);
    }

    /// When [`Engine::advance`] must next be called: the earliest armed timer less the
    /// timer lead, for a daemon's sleep or a virtual clock's next step.
    pub fn next_deadline(&self) -> Option<u64> {
        self.timers
            .next_deadline()
            .map(|d| d.saturating_sub(self.lead_us))
    }

    /// Builds and forwards every open state of a flow now.
    pub fn flush_flow(
        &mut self,
        flow: FlowSlot,
        now: u64,
        out: &mut Outputs,
    ) -> Result<(), FlowError> {
        self.with_flow(flow, now, out, |flow, env| flow.flush(env))
    }

    /// Flushes a flow, then forgets it.
    pub fn remove_flow(
        &mut self,
        id: FlowSlot,
        now: u64,
        out: &mut Outputs,
    ) -> Result<FlowStats, FlowError> {
        self.with_flow(id, now, out, |flow, env| {
            flow.flush(env);
            flow.cancel_timers(env);
        })?;
        let flow = self.flows[id.index as usize]
            .take()
            .expect("checked by with_flow");
        self.generations[id.index as usize] += 1;
        self.free.push(id.index);
        self.by_key.remove(&flow.key);
        self.held_total -= flow.held_bytes(); // 0 after the flush; never leave a stale total
        Ok(flow.stats())
    }

    pub fn set_children(&mut self, flow: FlowSlot, children: u32) -> Result<(), FlowError> {
        self.flow_mut(flow).map(|f| f.set_children(children))
    }

    pub fn set_path_mtu(&mut self, flow: FlowSlot, mtu: u32) -> Result<(), FlowError> {
        self.flow_mut(flow).map(|f| f.set_path_mtu(mtu))
    }

    pub fn stats(&self, flow: FlowSlot) -> Option<FlowStats> {
        self.flow(flow).map(Flow::stats)
    }

    /// The last lines the flow's spec logged (kept after quarantine).
    pub fn logs(&self, flow: FlowSlot) -> Vec<LogLine> {
        self.flow(flow).map(Flow::logs).unwrap_or_default()
    }

    /// Armed timers, all flows.
    pub fn timers_armed(&self) -> usize {
        self.timers.len()
    }
}

/// routerd and hostd move the engine into their worker threads.
const _: () = {
    const fn send<T: Send>() {}
    send::<Engine>();
    send::<Outputs>();
};

/// What a flow borrows from the engine for one call (the engine's fields split apart, so
/// the flow itself can be borrowed at the same time).
fn env<'a>(
    timers: &'a mut TimerWheel,
    out: &'a mut Outputs,
    now: u64,
    config: &'a EngineConfig,
    gate: &'a mut Option<Box<dyn EgressGate>>,
    lead_us: u64,
) -> Env<'a> {
    Env { timers, out, now, node: config.node, limits: &config.limits, gate: gate.as_deref_mut(), lead_us }
}
