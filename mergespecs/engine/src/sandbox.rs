//! One flow's sandbox: the spec's four functions (plus state lifecycle) behind one interface,
//! implemented by a wasmtime Store+Instance ([`WasmSandbox`]) and by native Rust
//! (`native::NativeSandbox`, the benchmark peer). Every method returns the raw ABI value;
//! `flow.rs` interprets it, so both paths share one per-datagram algorithm.

use concast_sdk::abi;
use wasmtime::{Instance, InstancePre, Memory, Store, TypedFunc};

use crate::config::CpuLimit;
use crate::cpu::{arm, install};
use crate::fault::Fault;
use crate::host::{FlowCtx, Phase};

/// A compiled, validated module, ready to instantiate per flow.
pub(crate) struct WasmSpec {
    pub pre: InstancePre<FlowCtx>,
}

impl WasmSpec {
    /// The one way a Store is made for a spec: the flow's context as its data and its memory
    /// limiter, the CPU limit installed and armed for the start function; then instantiated.
    pub(crate) fn instantiate(
        &self,
        ctx: FlowCtx,
        cpu: CpuLimit,
    ) -> wasmtime::Result<(Store<FlowCtx>, Instance)> {
        let mut store = Store::new(self.pre.module().engine(), ctx);
        store.limiter(|cx| cx);
        install(&mut store, cpu);
        arm(&mut store, cpu);
        let instance = self.pre.instantiate(&mut store)?;
        Ok((store, instance))
    }
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
}

/// The exports of one instance, typed once at instantiation.
struct Exports {
    get_tag: TypedFunc<i32, i64>,
    state_new: TypedFunc<(i32, i64), ()>,
    merge: TypedFunc<(i32, i32), i32>,
    done: TypedFunc<i32, i32>,
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
        let (mut store, instance) = spec.instantiate(ctx, cpu).map_err(fail("instantiation"))?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or((Fault::Abi("no memory export".into()), "instantiation"))?;
        store.data_mut().memory = Some(memory);
        let typed = |store: &mut Store<FlowCtx>, name: &str| instance.get_func(&mut *store, name);
        let exports = (|| -> wasmtime::Result<Exports> {
            Ok(Exports {
                get_tag: instance.get_typed_func(&mut store, "concast_get_tag")?,
                state_new: instance.get_typed_func(&mut store, "concast_state_new")?,
                merge: instance.get_typed_func(&mut store, "concast_merge")?,
                done: instance.get_typed_func(&mut store, "concast_done")?,
                build: instance.get_typed_func(&mut store, "concast_build")?,
                timeout: typed(&mut store, "concast_timeout")
                    .map(|f| f.typed(&store))
                    .transpose()?,
                state_free: typed(&mut store, "concast_state_free")
                    .map(|f| f.typed(&store))
                    .transpose()?,
            })
        })()
        .map_err(fail("instantiation"))?;
        let init: TypedFunc<(), i32> = instance
            .get_typed_func(&mut store, "concast_init")
            .map_err(fail("instantiation"))?;

        store.data_mut().begin_call(Phase::Init);
        crate::cpu::arm_init(&mut store, cpu);
        let msg_ptr = init.call(&mut store, ()).map_err(fail("concast_init"))? as u32 as usize;
        store.data_mut().phase = Phase::Outside;
        if msg_ptr + abi::MSG_BUFFER_LEN > memory.data_size(&store) {
            let why = format!("concast_init returned message buffer {msg_ptr}, which is not {} bytes inside linear memory", abi::MSG_BUFFER_LEN);
            return Err((Fault::Abi(why), "concast_init"));
        }
        let flags = match instance.get_typed_func::<(), i32>(&mut store, "concast_flags") {
            Ok(f) => {
                arm(&mut store, cpu);
                f.call(&mut store, ()).map_err(fail("concast_flags"))?
            }
            Err(_) => 0,
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
        Ok(call(&mut self.store, self.cpu, &self.exports.get_tag, len as i32)? as u64)
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
        call(
            &mut self.store,
            self.cpu,
            &self.exports.merge,
            (slot as i32, len as i32),
        )
    }
    fn done(&mut self, slot: u32) -> Result<i32, Fault> {
        call(&mut self.store, self.cpu, &self.exports.done, slot as i32)
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
