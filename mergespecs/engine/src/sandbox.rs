//! One flow's sandbox: the spec's four functions (plus state lifecycle) behind one interface,
//! implemented by a wasmtime Store+Instance ([`WasmSandbox`]) and by native Rust
//! (`native::NativeSandbox`, the benchmark peer). Every method returns the raw ABI value;
//! `flow.rs` interprets it, so both paths share one per-datagram algorithm.

use concast_sdk::abi;
use wasmtime::{Instance, InstancePre, Memory, Module, ModuleExport, Store, TypedFunc};

use std::sync::{Arc, OnceLock};

use crate::config::CpuLimit;
use crate::fallback::{pool_full, Fallback};
use crate::cpu::{arm, install};
use crate::fault::Fault;
use crate::host::{FlowCtx, Phase};

/// A compiled, validated module, ready to instantiate per flow.
pub(crate) struct WasmSpec {
    /// Imports resolved against the linker once, at load.
    pub pre: InstancePre<FlowCtx>,
    /// The ABI version the module declared (1 until validation has asked).
    pub version: u32,
    /// Where each export sits in the module, looked up once by name at load.
    exports: ExportIndex,
    /// With a bounded pool: where flows go when the pool is full.
    overflow: Option<Overflow>,
}

/// The same module for a bounded pool's on-demand fallback, compiled when first needed.
struct Overflow {
    fallback: Arc<Fallback>,
    bytes: Box<[u8]>,
    compiled: OnceLock<Result<(InstancePre<FlowCtx>, ExportIndex), String>>,
}

impl Overflow {
    fn compiled(&self) -> wasmtime::Result<&(InstancePre<FlowCtx>, ExportIndex)> {
        let compiled = self.compiled.get_or_init(|| {
            let fb = &self.fallback;
            let module = Module::from_binary(&fb.engine, &self.bytes).map_err(|e| format!("{e:#}"))?;
            let pre = fb.linker.instantiate_pre(&module).map_err(|e| format!("{e:#}"))?;
            let exports = ExportIndex::of(&module);
            Ok((pre, exports))
        });
        compiled.as_ref().map_err(|e| wasmtime::format_err!("compiling for the pool's fallback: {e}"))
    }
}

/// The module's exports by index ([`ModuleExport`]): a flow fetches them from its instance
/// without a string lookup.
pub(crate) struct ExportIndex {
    memory: Option<ModuleExport>,
    init: Option<ModuleExport>,
    flags: Option<ModuleExport>,
    get_tag: Option<ModuleExport>,
    state_new: Option<ModuleExport>,
    merge: Option<ModuleExport>,
    run: Option<ModuleExport>,
    done: Option<ModuleExport>,
    build: Option<ModuleExport>,
    timeout: Option<ModuleExport>,
    state_free: Option<ModuleExport>,
}

impl ExportIndex {
    fn of(module: &Module) -> ExportIndex {
        let at = |name: &str| module.get_export_index(name);
        ExportIndex {
            memory: at("memory"),
            init: at("concast_init"),
            flags: at("concast_flags"),
            get_tag: at("concast_get_tag"),
            state_new: at("concast_state_new"),
            merge: at("concast_merge"),
            run: at("concast_run"),
            done: at("concast_done"),
            build: at("concast_build"),
            timeout: at("concast_timeout"),
            state_free: at("concast_state_free"),
        }
    }
}

/// The function at `export` typed as `P -> R`; `Ok(None)` when the module has no such export.
fn func<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
    store: &mut Store<FlowCtx>,
    instance: &Instance,
    export: Option<&ModuleExport>,
    name: &str,
) -> wasmtime::Result<Option<TypedFunc<P, R>>> {
    let Some(export) = export else { return Ok(None) };
    let f = instance
        .get_module_export(&mut *store, export)
        .and_then(wasmtime::Extern::into_func)
        .ok_or_else(|| wasmtime::format_err!("export `{name}` is not a function"))?;
    Ok(Some(f.typed(&*store)?))
}

/// As [`func`], for an export the ABI requires.
fn required<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
    store: &mut Store<FlowCtx>,
    instance: &Instance,
    export: Option<&ModuleExport>,
    name: &str,
) -> wasmtime::Result<TypedFunc<P, R>> {
    func(store, instance, export, name)?
        .ok_or_else(|| wasmtime::format_err!("failed to find function export `{name}`"))
}

impl WasmSpec {
    pub(crate) fn new(pre: InstancePre<FlowCtx>) -> WasmSpec {
        let exports = ExportIndex::of(pre.module());
        WasmSpec {
            pre,
            version: abi::VERSION_1,
            exports,
            overflow: None,
        }
    }

    /// `perf` map lines of the compiled functions (see `SpecRef::perf_map`).
    pub(crate) fn code_map(&self) -> Vec<String> {
        let module = self.pre.module();
        let text = module.text().as_ptr() as usize;
        module
            .functions()
            .map(|f| {
                let name = f.name.unwrap_or_else(|| format!("wasm-function[{}]", f.index.as_u32()));
                format!("{:x} {:x} wasm::{name}", text + f.offset, f.len)
            })
            .collect()
    }

    /// Lets flows overflow a full bounded pool into `fallback` (the module's bytes are kept
    /// to compile it there when first needed).
    pub(crate) fn overflow_into(&mut self, fallback: Arc<Fallback>, bytes: &[u8]) {
        self.overflow = Some(Overflow { fallback, bytes: bytes.into(), compiled: OnceLock::new() });
    }

    /// The one way a Store is made for a spec: the flow's context as its data and its memory
    /// limiter, the CPU limit installed and armed for the start function; then instantiated
    /// (in the pool's fallback, counted, when a bounded pool is full). Also returns where
    /// the instance's exports are.
    pub(crate) fn instantiate(
        &self,
        ctx: FlowCtx,
        cpu: CpuLimit,
    ) -> wasmtime::Result<(Store<FlowCtx>, Instance, &ExportIndex)> {
        let (store, made) = instantiate_with(&self.pre, ctx, cpu);
        match (made, &self.overflow) {
            (Err(e), Some(overflow)) if pool_full(&e) => {
                let (pre, exports) = overflow.compiled()?;
                let (store, made) = instantiate_with(pre, store.into_data(), cpu);
                let instance = made?;
                overflow.fallback.count();
                Ok((store, instance, exports))
            }
            (made, _) => Ok((store, made?, &self.exports)),
        }
    }
}

/// A Store for `pre`'s engine with `ctx`, and the instance made in it.
fn instantiate_with(
    pre: &InstancePre<FlowCtx>,
    ctx: FlowCtx,
    cpu: CpuLimit,
) -> (Store<FlowCtx>, wasmtime::Result<Instance>) {
    let mut store = Store::new(pre.module().engine(), ctx);
    store.limiter(|cx| cx);
    install(&mut store, cpu);
    arm(&mut store, cpu);
    let instance = pre.instantiate(&mut store);
    (store, instance)
}

pub(crate) trait Sandbox: Send {
    fn ctx(&mut self) -> &mut FlowCtx;
    fn ctx_ref(&self) -> &FlowCtx;
    /// Copies the current pending datagram into the spec's message buffer; returns its length.
    fn load_current(&mut self) -> Result<u32, Fault>;
    fn get_tag(&mut self, len: u32) -> Result<u64, Fault>;
    fn state_new(&mut self, slot: u32, tag: u64) -> Result<(), Fault>;
    fn merge(&mut self, slot: u32, len: u32) -> Result<i32, Fault>;
    fn done(&mut self, slot: u32) -> Result<i32, Fault>;
    fn build(&mut self, slot: u32) -> Result<i32, Fault>;
    fn timeout(&mut self, slot: u32) -> Result<i32, Fault>;
    fn state_free(&mut self, slot: u32) -> Result<(), Fault>;
    fn memory_bytes(&self) -> usize;
    /// `abi::flags::ORDERED_STATES`: states are built in creation order.
    fn ordered_states(&self) -> bool;
    /// ABI v2: the spec tags and merges whole batches (`concast_run`).
    fn batched(&self) -> bool {
        false
    }
    /// ABI v2: writes the datagrams `ctx().layout` names into the batch area.
    fn lay_out(&mut self) {}
    /// ABI v2: `concast_run(first, count, slot, tag)`; returns the entry it stopped at.
    fn run(&mut self, _first: u32, _count: u32, _slot: i32, _tag: u64) -> Result<u32, Fault> {
        Err(Fault::Abi("concast_run on a version 1 spec".into()))
    }
    /// ABI v2: entry `i` of the table: (tag, result).
    fn entry(&mut self, _i: usize) -> (u64, u32) {
        (0, 0)
    }
    /// ABI v2: entries `from..from + out.len()` of the table, (tag, result) each: what
    /// [`Sandbox::entry`] gives, read in one go for a run's accounting.
    fn entries(&mut self, from: usize, out: &mut [(u64, u32)]) {
        for (k, e) in out.iter_mut().enumerate() {
            *e = self.entry(from + k);
        }
    }
    /// ABI v2: gives entry `i` its tag and marks it `TAG_KNOWN`.
    fn set_known(&mut self, _i: usize, _tag: u64) {}
    /// ABI v2: the entry the spec says it is working on.
    fn run_current(&mut self) -> usize {
        0
    }
}

/// The exports of one instance, typed once at instantiation.
struct Exports {
    /// `get_tag`, `merge` and `done` are the engine's to call in ABI v1 only (v2's
    /// `concast_run` calls them inside the guest), so a v2 flow does not fetch them: `None`.
    get_tag: Option<TypedFunc<i32, i64>>,
    state_new: TypedFunc<(i32, i64), ()>,
    merge: Option<TypedFunc<(i32, i32), i32>>,
    run: Option<TypedFunc<(i32, i32, i32, i64), i32>>,
    done: Option<TypedFunc<i32, i32>>,
    build: TypedFunc<i32, i32>,
    timeout: Option<TypedFunc<i32, i32>>,
    state_free: Option<TypedFunc<i32, ()>>,
}

pub(crate) struct WasmSandbox {
    store: Store<FlowCtx>,
    memory: Memory,
    msg_ptr: usize,
    exports: Exports,
    cpu: CpuLimit,
    /// `concast_flags`, read once after init (0 without the export).
    flags: i32,
}

/// One call into the guest with a fresh CPU budget.
#[inline]
fn call<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
    store: &mut Store<FlowCtx>,
    cpu: CpuLimit,
    f: &TypedFunc<P, R>,
    args: P,
) -> Result<R, Fault> {
    arm(store, cpu);
    f.call(store, args)
        .map_err(|e| Fault::from_wasmtime(e, &cpu.describe()))
}

impl WasmSandbox {
    /// Instantiates `spec` for one flow and runs `concast_init`.
    pub fn new(
        spec: &WasmSpec,
        ctx: FlowCtx,
        cpu: CpuLimit,
    ) -> Result<(WasmSandbox, &'static str), (Fault, &'static str)> {
        let fail = |call: &'static str| {
            move |e: wasmtime::Error| (Fault::from_wasmtime(e, &cpu.describe()), call)
        };
        let (mut store, instance, at) = spec.instantiate(ctx, cpu).map_err(fail("instantiation"))?;
        let memory = at
            .memory
            .as_ref()
            .and_then(|e| instance.get_module_export(&mut store, e))
            .and_then(wasmtime::Extern::into_memory)
            .ok_or((Fault::Abi("no memory export".into()), "instantiation"))?;
        store.data_mut().memory = Some(memory);
        let s = &mut store;
        let i = &instance;
        // Fetching and typing an export is a good part of a pooled flow's instantiation
        // (docs/benchmarks.md, session 10): a v2 flow leaves the v1-only ones alone.
        let v1 = spec.version < abi::VERSION_2;
        let exports = (|| -> wasmtime::Result<Exports> {
            Ok(Exports {
                get_tag: if v1 { func(s, i, at.get_tag.as_ref(), "concast_get_tag")? } else { None },
                state_new: required(s, i, at.state_new.as_ref(), "concast_state_new")?,
                merge: if v1 { func(s, i, at.merge.as_ref(), "concast_merge")? } else { None },
                run: func(s, i, at.run.as_ref(), "concast_run")?,
                done: if v1 { Some(required(s, i, at.done.as_ref(), "concast_done")?) } else { None },
                build: required(s, i, at.build.as_ref(), "concast_build")?,
                timeout: func(s, i, at.timeout.as_ref(), "concast_timeout")?,
                state_free: func(s, i, at.state_free.as_ref(), "concast_state_free")?,
            })
        })()
        .map_err(fail("instantiation"))?;
        let init: TypedFunc<(), i32> = required(s, i, at.init.as_ref(), "concast_init")
            .map_err(fail("instantiation"))?;

        store.data_mut().begin_call(Phase::Init);
        crate::cpu::arm_init(&mut store, cpu);
        let msg_ptr = init.call(&mut store, ()).map_err(fail("concast_init"))? as u32 as usize;
        store.data_mut().phase = Phase::Outside;
        let batched = spec.version >= abi::VERSION_2;
        let (buffer, what) = if batched {
            (abi::batch::AREA_LEN, "batch area")
        } else {
            (abi::MSG_BUFFER_LEN, "message buffer")
        };
        if msg_ptr + buffer > memory.data_size(&store) {
            let why = format!("concast_init returned {what} {msg_ptr}, which is not {buffer} bytes inside linear memory");
            return Err((Fault::Abi(why), "concast_init"));
        }
        if batched {
            store.data_mut().batch_area = Some(msg_ptr);
        }
        // A `concast_flags` of another type is ignored, as a missing one is.
        let flags = match func::<(), i32>(&mut store, &instance, at.flags.as_ref(), "concast_flags") {
            Ok(Some(f)) => {
                arm(&mut store, cpu);
                f.call(&mut store, ()).map_err(fail("concast_flags"))?
            }
            _ => 0,
        };
        Ok((
            WasmSandbox {
                store,
                memory,
                msg_ptr,
                exports,
                cpu,
                flags,
            },
            "concast_init",
        ))
    }
}

impl Sandbox for WasmSandbox {
    fn ctx(&mut self) -> &mut FlowCtx {
        self.store.data_mut()
    }
    fn ctx_ref(&self) -> &FlowCtx {
        self.store.data()
    }
    fn load_current(&mut self) -> Result<u32, Fault> {
        let (mem, cx) = self.memory.data_and_store_mut(&mut self.store);
        let span = cx.pending.current().expect("a current datagram");
        let bytes = cx.pending.bytes(span);
        // init checked the buffer is in memory, and memory never shrinks
        mem[self.msg_ptr..self.msg_ptr + bytes.len()].copy_from_slice(bytes);
        Ok(bytes.len() as u32)
    }
    fn get_tag(&mut self, len: u32) -> Result<u64, Fault> {
        let f = self.exports.get_tag.as_ref().ok_or_else(|| Fault::Abi("no concast_get_tag".into()))?;
        Ok(call(&mut self.store, self.cpu, f, len as i32)? as u64)
    }
    fn state_new(&mut self, slot: u32, tag: u64) -> Result<(), Fault> {
        call(
            &mut self.store,
            self.cpu,
            &self.exports.state_new,
            (slot as i32, tag as i64),
        )
    }
    fn merge(&mut self, slot: u32, len: u32) -> Result<i32, Fault> {
        let f = self.exports.merge.as_ref().ok_or_else(|| Fault::Abi("no concast_merge".into()))?;
        call(&mut self.store, self.cpu, f, (slot as i32, len as i32))
    }
    fn batched(&self) -> bool {
        self.exports.run.is_some() && self.store.data().batch_area.is_some()
    }
    fn lay_out(&mut self) {
        use abi::batch;
        let (mem, cx) = self.memory.data_and_store_mut(&mut self.store);
        let area = cx.batch_area.expect("a batched spec");
        // The table and the data region borrowed once each (init checked that the area is
        // in memory; the layout holds at most `MAX` entries of `MSG_BUFFER_LEN` bytes in
        // all); each entry written whole: off, len, then tag, flags and result zeroed.
        let (head, data) = mem[area..area + batch::AREA_LEN].split_at_mut(batch::DATA);
        let table = &mut head[batch::TABLE..batch::TABLE + cx.layout.len() * batch::ENTRY_LEN];
        let mut off = 0usize;
        for (raw, &index) in table.chunks_exact_mut(batch::ENTRY_LEN).zip(&cx.layout) {
            let bytes = cx.pending.bytes(cx.pending.span(index as usize));
            let mut entry = [0u8; batch::ENTRY_LEN];
            entry[batch::OFF..batch::OFF + 4].copy_from_slice(&(off as u32).to_le_bytes());
            entry[batch::LEN..batch::LEN + 4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
            raw.copy_from_slice(&entry);
            data[off..off + bytes.len()].copy_from_slice(bytes);
            off += bytes.len();
        }
    }
    fn run(&mut self, first: u32, count: u32, slot: i32, tag: u64) -> Result<u32, Fault> {
        let f = self.exports.run.as_ref().expect("a batched spec");
        crate::cpu::arm_run(&mut self.store, self.cpu, count - first);
        f.call(&mut self.store, (first as i32, count as i32, slot, tag as i64))
            .map(|stop| stop as u32)
            .map_err(|e| Fault::from_wasmtime(e, &self.cpu.describe()))
    }
    fn entry(&mut self, i: usize) -> (u64, u32) {
        use abi::batch;
        let area = self.store.data().batch_area.expect("a batched spec");
        let mem = self.memory.data(&self.store);
        let e = area + batch::TABLE + i * batch::ENTRY_LEN;
        let tag = u64::from_le_bytes(mem[e + batch::TAG..e + batch::TAG + 8].try_into().expect("8"));
        let result =
            u32::from_le_bytes(mem[e + batch::RESULT..e + batch::RESULT + 4].try_into().expect("4"));
        (tag, result)
    }
    fn entries(&mut self, from: usize, out: &mut [(u64, u32)]) {
        use abi::batch;
        let area = self.store.data().batch_area.expect("a batched spec");
        let start = area + batch::TABLE + from * batch::ENTRY_LEN;
        // One borrow and one bounds check for the whole range (init checked that the area
        // is in memory, and memory never shrinks).
        let table = &self.memory.data(&self.store)[start..start + out.len() * batch::ENTRY_LEN];
        for (e, raw) in out.iter_mut().zip(table.chunks_exact(batch::ENTRY_LEN)) {
            let tag = u64::from_le_bytes(raw[batch::TAG..batch::TAG + 8].try_into().expect("8"));
            let result =
                u32::from_le_bytes(raw[batch::RESULT..batch::RESULT + 4].try_into().expect("4"));
            *e = (tag, result);
        }
    }
    fn set_known(&mut self, i: usize, tag: u64) {
        use abi::batch;
        let area = self.store.data().batch_area.expect("a batched spec");
        let mem = self.memory.data_mut(&mut self.store);
        let e = area + batch::TABLE + i * batch::ENTRY_LEN;
        mem[e + batch::TAG..e + batch::TAG + 8].copy_from_slice(&tag.to_le_bytes());
        mem[e + batch::FLAGS..e + batch::FLAGS + 4]
            .copy_from_slice(&batch::TAG_KNOWN.to_le_bytes());
    }
    fn run_current(&mut self) -> usize {
        let area = self.store.data().batch_area.expect("a batched spec");
        let mem = self.memory.data(&self.store);
        u32::from_le_bytes(mem[area..area + 4].try_into().expect("4")) as usize
    }
    fn done(&mut self, slot: u32) -> Result<i32, Fault> {
        let f = self.exports.done.as_ref().ok_or_else(|| Fault::Abi("no concast_done".into()))?;
        call(&mut self.store, self.cpu, f, slot as i32)
    }
    fn build(&mut self, slot: u32) -> Result<i32, Fault> {
        call(&mut self.store, self.cpu, &self.exports.build, slot as i32)
    }
    fn timeout(&mut self, slot: u32) -> Result<i32, Fault> {
        match &self.exports.timeout {
            Some(f) => call(&mut self.store, self.cpu, f, slot as i32),
            None => Ok(1),
        }
    }
    fn state_free(&mut self, slot: u32) -> Result<(), Fault> {
        match &self.exports.state_free {
            Some(f) => call(&mut self.store, self.cpu, f, slot as i32),
            None => Ok(()),
        }
    }
    fn memory_bytes(&self) -> usize {
        self.memory.data_size(&self.store)
    }
    fn ordered_states(&self) -> bool {
        self.flags & abi::flags::ORDERED_STATES != 0
    }
}
