//! The NativeSpec path: a [`MergeSpec`] compiled into the engine, run behind the same
//! [`Sandbox`] interface and host rules as a Wasm module. It is the benchmark peer ("the
//! same logic in native Rust") and a way to ship trusted specs without Wasm.

use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};

use concast_sdk::{abi, Host, Level, MergeSpec, OutHeader};

use crate::fault::Fault;
use crate::host::{FlowCtx, Phase};
use crate::sandbox::Sandbox;

/// Makes sandboxes for one native spec type.
pub(crate) trait NativeFactory: Send + Sync {
    fn instantiate(&self, ctx: FlowCtx) -> Result<Box<dyn Sandbox>, Fault>;
}

/// `batched`: run flows as ABI v2 does (laid-out batches through the SDK's run loop, with
/// [`MergeSpec::tag_and_merge`]), not one call per datagram as ABI v1.
pub(crate) struct Factory<S> {
    batched: bool,
    spec: PhantomData<fn() -> S>,
}

impl<S> Factory<S> {
    pub fn new(batched: bool) -> Factory<S> {
        Factory { batched, spec: PhantomData }
    }
}

impl<S> NativeFactory for Factory<S>
where
    S: MergeSpec + Send + 'static,
    S::State: Send,
{
    fn instantiate(&self, mut ctx: FlowCtx) -> Result<Box<dyn Sandbox>, Fault> {
        ctx.begin_call(Phase::Init);
        let spec = guarded(|| S::init(&mut NativeHost { cx: &mut ctx }))?;
        ctx.phase = Phase::Outside;
        if let Some(fault) = ctx.fault.take() {
            return Err(fault);
        }
        let spec = spec.map_err(|why| Fault::Aborted(why.to_string()))?;
        Ok(Box::new(NativeSandbox {
            ctx,
            spec,
            states: Vec::new(),
            msg: Vec::with_capacity(2048),
            batch: self.batched.then(|| Batch {
                data: Vec::with_capacity(abi::MSG_BUFFER_LEN),
                entries: Vec::with_capacity(abi::batch::MAX),
                current: 0,
            }),
        }))
    }
}

fn guarded<R>(f: impl FnOnce() -> R) -> Result<R, Fault> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let msg = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic".into());
        Fault::Panic(msg)
    })
}

struct NativeSandbox<S: MergeSpec> {
    ctx: FlowCtx,
    spec: S,
    states: Vec<Option<S::State>>,
    /// The message buffer: copied into like a guest's, so both paths do the same work.
    msg: Vec<u8>,
    /// ABI v2 (batched): the native batch area.
    batch: Option<Batch>,
}

/// A native copy of ABI v2's batch area: the laid-out datagrams (copied, as into a guest's
/// area) and the entry table.
struct Batch {
    data: Vec<u8>,
    entries: Vec<Entry>,
    /// The entry the run is working on (the area header's `CURRENT`).
    current: usize,
}

#[derive(Clone, Copy)]
struct Entry {
    off: u32,
    len: u32,
    tag: u64,
    known: bool,
    result: u32,
}

/// The run loop's view of a [`Batch`] during one `run`.
struct RunTable<'m> {
    data: &'m [u8],
    entries: &'m mut [Entry],
    current: &'m mut usize,
}

impl<'m, 'c> concast_sdk::run::RunTable<'m, NativeHost<'c>> for RunTable<'m> {
    fn taken(&mut self, i: usize, host: &NativeHost<'c>) -> bool {
        host.cx.pending.was_taken(host.cx.layout[i] as usize)
    }
    fn known_tag(&self, i: usize) -> Option<u64> {
        let e = &self.entries[i];
        e.known.then_some(e.tag)
    }
    fn begin(&mut self, i: usize, host: &mut NativeHost<'c>) {
        *self.current = i;
        // What a Wasm host does when a pending-queue import asks: the queue follows entry i.
        let index = host.cx.layout[i] as usize;
        host.cx.pending.set_current(index);
    }
    fn message(&self, i: usize) -> &'m [u8] {
        let e = self.entries[i];
        &self.data[e.off as usize..(e.off + e.len) as usize]
    }
    fn set_tag(&mut self, i: usize, tag: u64) {
        self.entries[i].tag = tag;
    }
    fn set_result(&mut self, i: usize, result: u32) {
        self.entries[i].result = result;
    }
}

impl<S: MergeSpec> NativeSandbox<S> {
    /// Runs `f` on the spec and one state, turning panics and host-rule faults into errors.
    fn with_state<R>(
        &mut self,
        slot: u32,
        f: impl FnOnce(&mut S, &mut S::State, &[u8], &mut NativeHost) -> R,
    ) -> Result<R, Fault> {
        let (spec, msg, cx) = (&mut self.spec, &self.msg, &mut self.ctx);
        let state = self
            .states
            .get_mut(slot as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| Fault::Abi(format!("no state in slot {slot}")))?;
        let r = guarded(|| f(spec, state, msg, &mut NativeHost { cx }))?;
        self.ctx.fault.take().map_or(Ok(r), Err)
    }
}

impl<S> Sandbox for NativeSandbox<S>
where
    S: MergeSpec + Send,
    S::State: Send,
{
    fn ctx(&mut self) -> &mut FlowCtx {
        &mut self.ctx
    }
    fn ctx_ref(&self) -> &FlowCtx {
        &self.ctx
    }
    fn load_current(&mut self) -> Result<u32, Fault> {
        let span = self.ctx.pending.current().expect("a current datagram");
        self.msg.clear();
        self.msg.extend_from_slice(self.ctx.pending.bytes(span));
        Ok(self.msg.len() as u32)
    }
    fn get_tag(&mut self, _len: u32) -> Result<u64, Fault> {
        let (spec, msg, cx) = (&mut self.spec, &self.msg, &mut self.ctx);
        let tag = guarded(|| spec.get_tag(msg, &mut NativeHost { cx }).to_abi())?;
        self.ctx.fault.take().map_or(Ok(tag), Err)
    }
    fn state_new(&mut self, slot: u32, tag: u64) -> Result<(), Fault> {
        let (spec, cx) = (&mut self.spec, &mut self.ctx);
        let state = guarded(|| spec.new_state(tag, &mut NativeHost { cx }))?;
        let slot = slot as usize;
        if self.states.len() <= slot {
            self.states.resize_with(slot + 1, || None);
        }
        self.states[slot] = Some(state);
        self.ctx.fault.take().map_or(Ok(()), Err)
    }
    fn merge(&mut self, slot: u32, _len: u32) -> Result<i32, Fault> {
        self.with_state(slot, |spec, s, msg, host| spec.merge(s, msg, host).to_abi())
    }
    fn done(&mut self, slot: u32) -> Result<i32, Fault> {
        self.with_state(slot, |spec, s, _, host| i32::from(spec.done(s, host)))
    }
    fn build(&mut self, slot: u32) -> Result<i32, Fault> {
        self.with_state(slot, |spec, s, _, host| spec.build(s, host).to_abi())
    }
    fn timeout(&mut self, slot: u32) -> Result<i32, Fault> {
        self.with_state(slot, |spec, s, _, host| i32::from(spec.timeout(s, host)))
    }
    fn state_free(&mut self, slot: u32) -> Result<(), Fault> {
        if let Some(state) = self.states.get_mut(slot as usize) {
            drop(state.take());
        }
        Ok(())
    }
    fn memory_bytes(&self) -> usize {
        0
    }
    fn batched(&self) -> bool {
        self.batch.is_some()
    }
    fn lay_out(&mut self) {
        let batch = self.batch.as_mut().expect("a batched spec");
        let cx = &self.ctx;
        batch.data.clear();
        batch.entries.clear();
        for &index in &cx.layout {
            let bytes = cx.pending.bytes(cx.pending.span(index as usize));
            batch.entries.push(Entry {
                off: batch.data.len() as u32,
                len: bytes.len() as u32,
                tag: 0,
                known: false,
                result: 0,
            });
            batch.data.extend_from_slice(bytes);
        }
    }
    fn run(&mut self, first: u32, count: u32, slot: i32, tag: u64) -> Result<u32, Fault> {
        let NativeSandbox { ctx, spec, states, batch, .. } = self;
        let batch = batch.as_mut().expect("a batched spec");
        let state = if slot >= 0 {
            Some(
                states
                    .get_mut(slot as usize)
                    .and_then(Option::as_mut)
                    .ok_or_else(|| Fault::Abi(format!("no state in slot {slot}")))?,
            )
        } else {
            None
        };
        let count = (count as usize).min(batch.entries.len());
        let first = (first as usize).min(count);
        let mut table = RunTable {
            data: &batch.data,
            entries: &mut batch.entries,
            current: &mut batch.current,
        };
        let stop = guarded(|| {
            concast_sdk::run::run(spec, state, &mut table, &mut NativeHost { cx: ctx }, first, count, tag)
        })?;
        self.ctx.fault.take().map_or(Ok(stop as u32), Err)
    }
    fn entry(&mut self, i: usize) -> (u64, u32) {
        let e = self.batch.as_ref().expect("a batched spec").entries[i];
        (e.tag, e.result)
    }
    fn entries(&mut self, from: usize, out: &mut [(u64, u32)]) {
        let entries = &self.batch.as_ref().expect("a batched spec").entries[from..from + out.len()];
        for (o, e) in out.iter_mut().zip(entries) {
            *o = (e.tag, e.result);
        }
    }
    fn set_known(&mut self, i: usize, tag: u64) {
        let e = &mut self.batch.as_mut().expect("a batched spec").entries[i];
        (e.tag, e.known) = (tag, true);
    }
    fn run_current(&mut self) -> usize {
        self.batch.as_ref().map_or(0, |b| b.current)
    }
    fn ordered_states(&self) -> bool {
        S::ORDERED_STATES
    }
}

/// [`Host`] for native specs: the same [`FlowCtx`] rules as the Wasm imports. A broken rule
/// is parked in `ctx.fault` (trait methods cannot fail) and ends the call like a trap.
struct NativeHost<'a> {
    cx: &'a mut FlowCtx,
}

impl NativeHost<'_> {
    fn check(&mut self, r: Result<(), Fault>) {
        if let Err(fault) = r {
            self.cx.fault.get_or_insert(fault);
        }
    }
}

impl Host for NativeHost<'_> {
    fn now_us(&self) -> u64 {
        self.cx.now_us
    }
    fn receiver(&self) -> u32 {
        self.cx.info.receiver
    }
    fn group(&self) -> u32 {
        self.cx.info.group
    }
    fn node(&self) -> u32 {
        self.cx.info.node
    }
    fn path_mtu(&self) -> u32 {
        self.cx.info.path_mtu
    }
    fn children(&self) -> u32 {
        self.cx.info.children
    }
    fn params(&self) -> &[u8] {
        &self.cx.info.params
    }
    fn set_timer(&mut self, at_us: u64) {
        let r = self.cx.set_timer(at_us);
        self.check(r);
    }
    fn cancel_timer(&mut self) {
        let r = self.cx.cancel_timer();
        self.check(r);
    }
    fn hold_limit(&mut self, at_us: u64) {
        let r = self.cx.hold_limit(at_us);
        self.check(r);
    }
    fn egress_free_at(&self) -> u64 {
        self.cx.egress_free_at
    }
    fn pending_count(&self) -> usize {
        self.cx.pending_count()
    }
    fn pending_peek(&self, index: usize, buf: &mut [u8]) -> Option<usize> {
        let r = self.cx.pending_peek(i32::try_from(index).ok()?, buf);
        (r >= 0).then_some(r as usize)
    }
    fn pending_take(&mut self, index: usize, buf: &mut [u8]) -> Option<usize> {
        match self.cx.pending_take(i32::try_from(index).ok()?, buf) {
            Ok((r, _)) if r >= 0 => Some(r as usize),
            Ok(_) => None,
            Err(fault) => {
                self.check(Err(fault));
                None
            }
        }
    }
    fn pending_scan<'a>(&'a self, first: usize, out: &mut [Option<&'a [u8]>]) -> usize {
        let pending = &self.cx.pending;
        let mut n = 0;
        for (slot, index) in out.iter_mut().zip(pending.queued().skip(first)) {
            *slot = Some(pending.bytes(pending.span(index)));
            n += 1;
        }
        n
    }
    fn pending_take_list(&mut self, indices: &[u32]) -> bool {
        use concast_sdk::abi::pending::TAKE_LIST_MAX;
        if indices.len() > TAKE_LIST_MAX {
            return false;
        }
        let mut batch_indices = [0; TAKE_LIST_MAX];
        match self.cx.pending_take_list(indices, &mut batch_indices) {
            Ok(r) => r >= 0,
            Err(fault) => {
                self.check(Err(fault));
                false
            }
        }
    }
    fn emit(&mut self, payload: &[u8], header: OutHeader) {
        let r = self.cx.emit(
            payload,
            i32::from(header.protocol),
            i32::from(header.ttl),
            header.abi_flags(),
        );
        self.check(r);
    }
    fn log(&mut self, level: Level, msg: &str) {
        self.cx.log(level as i32, msg.as_bytes());
    }
}
