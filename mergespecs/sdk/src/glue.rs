//! The Wasm side of the ABI: `concast` imports, the guest-owned buffers, per-tag state slots
//! and the export functions [`export_spec!`](crate::export_spec) wires to a [`MergeSpec`].
//!
//! Only compiled for `wasm32`. A module is single-threaded and the engine never calls an
//! export while an import is running, so the `UnsafeCell` globals here are never aliased.

use core::cell::{Cell, UnsafeCell};
use core::mem::size_of;

use crate::abi;
use crate::spec::{Host, Level, MergeSpec, OutHeader};

mod imports {
    #[link(wasm_import_module = "concast")]
    extern "C" {
        #[link_name = "now_us"]
        pub fn now_us() -> i64;
        #[link_name = "flow_receiver"]
        pub fn flow_receiver() -> i32;
        #[link_name = "flow_group"]
        pub fn flow_group() -> i32;
        #[link_name = "flow_node"]
        pub fn flow_node() -> i32;
        #[link_name = "flow_mtu"]
        pub fn flow_mtu() -> i32;
        #[link_name = "flow_children"]
        pub fn flow_children() -> i32;
        #[link_name = "flow_params"]
        pub fn flow_params(ptr: i32, cap: i32) -> i32;
        #[link_name = "set_timer"]
        pub fn set_timer(at_us: i64);
        #[link_name = "cancel_timer"]
        pub fn cancel_timer();
        #[link_name = "hold_limit"]
        pub fn hold_limit(at_us: i64);
        #[link_name = "egress_free_at"]
        pub fn egress_free_at() -> i64;
        #[link_name = "pending_count"]
        pub fn pending_count() -> i32;
        #[link_name = "pending_peek"]
        pub fn pending_peek(index: i32, ptr: i32, cap: i32) -> i32;
        #[link_name = "pending_take"]
        pub fn pending_take(index: i32, ptr: i32, cap: i32) -> i32;
        #[link_name = "pending_scan"]
        pub fn pending_scan(first: i32, ptr: i32, cap: i32) -> i32;
        #[link_name = "pending_take_list"]
        pub fn pending_take_list(ptr: i32, n: i32) -> i32;
        #[link_name = "emit"]
        pub fn emit(ptr: i32, len: i32, protocol: i32, ttl: i32, flags: i32);
        #[link_name = "log"]
        pub fn log(level: i32, ptr: i32, len: i32);
        #[link_name = "abort"]
        pub fn abort(ptr: i32, len: i32) -> !;
    }
}

/// A global that only this single-threaded module touches.
struct Global<T>(UnsafeCell<T>);
// SAFETY: wasm32 modules here are single-threaded (no threads proposal, no shared memory).
unsafe impl<T> Sync for Global<T> {}

impl<T> Global<T> {
    const fn new(value: T) -> Global<T> {
        Global(UnsafeCell::new(value))
    }
    #[allow(clippy::mut_from_ref)]
    fn get(&self) -> &mut T {
        // SAFETY: see the module comment: no two references are live at once.
        unsafe { &mut *self.0.get() }
    }
}

/// Where the engine copies each message (address returned by `concast_init`).
static MSG: Global<[u8; abi::MSG_BUFFER_LEN]> = Global::new([0; abi::MSG_BUFFER_LEN]);

/// ABI v2's batch area (address returned by `concast_init`): header, entry table, datagrams.
#[repr(C, align(8))]
struct BatchArea([u8; abi::batch::AREA_LEN]);
static BATCH: Global<BatchArea> = Global::new(BatchArea([0; abi::batch::AREA_LEN]));

/// Reads and writes the batch area through raw pointers with volatile access: the engine
/// writes `flags` (TAKEN) during `pending_take` imports while a run is going on.
mod area {
    use super::{abi::batch, BATCH};

    fn at(offset: usize) -> *mut u8 {
        // SAFETY: callers pass offsets inside the area (checked by `entry`).
        unsafe { (BATCH.get().0.as_mut_ptr()).add(offset) }
    }
    pub fn entry(i: usize, field: usize) -> usize {
        batch::TABLE + i.min(batch::MAX - 1) * batch::ENTRY_LEN + field
    }
    pub fn read_u32(offset: usize) -> u32 {
        // SAFETY: in bounds and 4-aligned (the area is 8-aligned, all fields are aligned).
        unsafe { core::ptr::read_volatile(at(offset) as *const u32) }
    }
    pub fn write_u32(offset: usize, v: u32) {
        // SAFETY: as for read_u32.
        unsafe { core::ptr::write_volatile(at(offset) as *mut u32, v) }
    }
    pub fn read_u64(offset: usize) -> u64 {
        // SAFETY: as for read_u32, 8-aligned.
        unsafe { core::ptr::read_volatile(at(offset) as *const u64) }
    }
    pub fn write_u64(offset: usize, v: u64) {
        // SAFETY: as for read_u64.
        unsafe { core::ptr::write_volatile(at(offset) as *mut u64, v) }
    }
    /// The datagram of entry `i` (clamped to the data region if the table is bad).
    pub fn message(i: usize) -> &'static [u8] {
        let off = (read_u32(entry(i, batch::OFF)) as usize).min(super::abi::MSG_BUFFER_LEN);
        let len = (read_u32(entry(i, batch::LEN)) as usize).min(super::abi::MSG_BUFFER_LEN - off);
        &BATCH.get().0[batch::DATA + off..batch::DATA + off + len]
    }
}

/// Where `pending_scan` writes its records (`[at, len]`, little-endian as Wasm).
static SCAN: Global<[[u32; 2]; abi::pending::SCAN_MAX]> = Global::new([[0; 2]; abi::pending::SCAN_MAX]);

/// Receiver-given parameters, read once at init. Longer parameters refuse the flow.
pub const PARAMS_CAP: usize = 4096;
static PARAMS: Global<([u8; PARAMS_CAP], usize)> = Global::new(([0; PARAMS_CAP], 0));

fn message(len: i32) -> &'static [u8] {
    let len = (len.max(0) as usize).min(abi::MSG_BUFFER_LEN);
    &MSG.get()[..len]
}

/// Stops the module with a message; the engine quarantines the flow and reports it.
pub fn abort(msg: &str) -> ! {
    unsafe { imports::abort(msg.as_ptr() as i32, msg.len() as i32) }
}

/// The [`Host`] of a `.wasm` spec: every method is one `concast` import, except that the
/// flow's clock and path MTU are asked of the engine at most once per export call. The
/// engine changes neither while a call runs (`now_us` is set before each batch, timer or
/// flush, `path_mtu` only between calls; docs/mergespec-abi.md section 5), so a spec that
/// reads them per datagram of a `concast_run` gets the same values without a host call
/// each time: the values a native host reads from its fields.
pub struct WasmHost {
    now_us: Cell<Option<u64>>,
    path_mtu: Cell<Option<u32>>,
}

impl WasmHost {
    /// A host for one export call (nothing asked yet).
    pub const fn new() -> WasmHost {
        WasmHost {
            now_us: Cell::new(None),
            path_mtu: Cell::new(None),
        }
    }
}

/// The value in `cell`, asked with `ask` the first time.
fn once<T: Copy>(cell: &Cell<Option<T>>, ask: impl FnOnce() -> T) -> T {
    match cell.get() {
        Some(v) => v,
        None => {
            let v = ask();
            cell.set(Some(v));
            v
        }
    }
}

impl Host for WasmHost {
    fn now_us(&self) -> u64 {
        once(&self.now_us, || unsafe { imports::now_us() as u64 })
    }
    fn receiver(&self) -> u32 {
        unsafe { imports::flow_receiver() as u32 }
    }
    fn group(&self) -> u32 {
        unsafe { imports::flow_group() as u32 }
    }
    fn node(&self) -> u32 {
        unsafe { imports::flow_node() as u32 }
    }
    fn path_mtu(&self) -> u32 {
        once(&self.path_mtu, || unsafe { imports::flow_mtu() as u32 })
    }
    fn children(&self) -> u32 {
        unsafe { imports::flow_children() as u32 }
    }
    fn params(&self) -> &[u8] {
        let (buf, len) = PARAMS.get();
        &buf[..*len]
    }
    fn set_timer(&mut self, at_us: u64) {
        unsafe { imports::set_timer(at_us as i64) }
    }
    fn cancel_timer(&mut self) {
        unsafe { imports::cancel_timer() }
    }
    fn hold_limit(&mut self, at_us: u64) {
        unsafe { imports::hold_limit(at_us as i64) }
    }
    fn egress_free_at(&self) -> u64 {
        unsafe { imports::egress_free_at().max(0) as u64 }
    }
    fn pending_count(&self) -> usize {
        unsafe { imports::pending_count().max(0) as usize }
    }
    fn pending_peek(&self, index: usize, buf: &mut [u8]) -> Option<usize> {
        let r = unsafe {
            imports::pending_peek(index as i32, buf.as_mut_ptr() as i32, buf.len() as i32)
        };
        (r >= 0).then_some(r as usize)
    }
    fn pending_take(&mut self, index: usize, buf: &mut [u8]) -> Option<usize> {
        let r = unsafe {
            imports::pending_take(index as i32, buf.as_mut_ptr() as i32, buf.len() as i32)
        };
        (r >= 0).then_some(r as usize)
    }
    fn pending_scan<'a>(&'a self, first: usize, out: &mut [Option<&'a [u8]>]) -> usize {
        use abi::pending::{NOT_IN_MEMORY, SCAN_MAX};
        let records = SCAN.get();
        let cap = out.len().min(SCAN_MAX);
        let n = unsafe {
            imports::pending_scan(first as i32, records.as_mut_ptr() as i32, cap as i32)
        };
        let n = (n.max(0) as usize).min(cap);
        for (slot, &[at, len]) in out.iter_mut().zip(&records[..n]) {
            *slot = (at != NOT_IN_MEMORY).then(|| {
                // SAFETY: the engine names bytes inside this module's batch area, which
                // stay as they are until the next run (it only lays out between runs).
                unsafe { core::slice::from_raw_parts(at as usize as *const u8, len as usize) }
            });
        }
        n
    }
    fn pending_take_list(&mut self, indices: &[u32]) -> bool {
        let n = indices.len().min(abi::pending::TAKE_LIST_MAX);
        unsafe { imports::pending_take_list(indices.as_ptr() as i32, n as i32) == n as i32 }
    }
    fn emit(&mut self, payload: &[u8], header: OutHeader) {
        unsafe {
            imports::emit(
                payload.as_ptr() as i32,
                payload.len() as i32,
                i32::from(header.protocol),
                i32::from(header.ttl),
                header.abi_flags(),
            )
        }
    }
    fn log(&mut self, level: Level, msg: &str) {
        unsafe { imports::log(level as i32, msg.as_ptr() as i32, msg.len() as i32) }
    }
}

/// Per-tag states, indexed by the engine-assigned slot number. Storage grows in chunks of
/// doubling size taken straight from `memory.grow`, so no allocator is needed and a state
/// never moves.
pub struct Slots<S> {
    chunks: [*mut Option<S>; CHUNKS],
}

const FIRST_CHUNK: usize = 16;
const CHUNKS: usize = 27; // 16 * (2^27 - 1) slots: more than any engine limit allows

impl<S> Slots<S> {
    pub const fn new() -> Slots<S> {
        Slots {
            chunks: [core::ptr::null_mut(); CHUNKS],
        }
    }

    /// (chunk, index in chunk) of a slot: chunk c holds slots 16*(2^c - 1) .. 16*(2^(c+1) - 1).
    fn locate(slot: u32) -> (usize, usize) {
        let n = slot as usize / FIRST_CHUNK + 1;
        let chunk = (usize::BITS - 1 - n.leading_zeros()) as usize;
        (chunk, slot as usize - FIRST_CHUNK * ((1 << chunk) - 1))
    }

    fn cell(&mut self, slot: u32) -> &mut Option<S> {
        let (chunk, index) = Self::locate(slot);
        if chunk >= CHUNKS {
            abort("state slot number out of range");
        }
        if self.chunks[chunk].is_null() {
            self.chunks[chunk] = Self::grow(FIRST_CHUNK << chunk);
        }
        // SAFETY: index < FIRST_CHUNK << chunk, the chunk's length, initialised by `grow`.
        unsafe { &mut *self.chunks[chunk].add(index) }
    }

    fn grow(len: usize) -> *mut Option<S> {
        let bytes = len * size_of::<Option<S>>();
        let pages = bytes.div_ceil(65_536).max(1);
        let old = core::arch::wasm32::memory_grow::<0>(pages);
        if old == usize::MAX {
            abort("out of memory for merge states");
        }
        let base = (old * 65_536) as *mut Option<S>;
        for i in 0..len {
            // SAFETY: fresh pages of this module's memory, page-aligned, `bytes` long.
            unsafe { base.add(i).write(None) };
        }
        base
    }

    pub fn put(&mut self, slot: u32, state: S) {
        *self.cell(slot) = Some(state);
    }

    pub fn get(&mut self, slot: u32) -> &mut S {
        match self.cell(slot) {
            Some(state) => state,
            None => abort("the engine named a state slot that holds no state"),
        }
    }

    pub fn take(&mut self, slot: u32) -> Option<S> {
        self.cell(slot).take()
    }
}

/// The batch area as the run loop's table; `flags` is the current entry's, read once.
struct AreaTable {
    flags: u32,
}

impl<H: Host> crate::run::RunTable<'static, H> for AreaTable {
    fn taken(&mut self, i: usize, _: &H) -> bool {
        self.flags = area::read_u32(area::entry(i, abi::batch::FLAGS));
        self.flags & abi::batch::TAKEN != 0
    }
    fn known_tag(&self, i: usize) -> Option<u64> {
        (self.flags & abi::batch::TAG_KNOWN != 0).then(|| area::read_u64(area::entry(i, abi::batch::TAG)))
    }
    fn begin(&mut self, i: usize, _: &mut H) {
        area::write_u32(abi::batch::CURRENT, i as u32);
    }
    fn message(&self, i: usize) -> &'static [u8] {
        area::message(i)
    }
    fn set_tag(&mut self, i: usize, tag: u64) {
        area::write_u64(area::entry(i, abi::batch::TAG), tag);
    }
    fn set_result(&mut self, i: usize, result: u32) {
        area::write_u32(area::entry(i, abi::batch::RESULT), result);
    }
}

/// The one spec value of this module's flow and its states; `export_spec!` declares one.
pub struct SpecCell<S: MergeSpec> {
    spec: Global<Option<S>>,
    slots: Global<Slots<S::State>>,
}

impl<S: MergeSpec> SpecCell<S> {
    pub const fn new() -> SpecCell<S> {
        SpecCell {
            spec: Global::new(None),
            slots: Global::new(Slots::new()),
        }
    }

    fn spec(&self) -> &mut S {
        match self.spec.get() {
            Some(spec) => spec,
            None => abort("concast_init was not called"),
        }
    }

    /// ABI v1: returns the message buffer.
    pub fn init(&self) -> i32 {
        self.init_spec();
        MSG.get().as_ptr() as i32
    }

    /// ABI v2: returns the batch area.
    pub fn init_v2(&self) -> i32 {
        self.init_spec();
        BATCH.get().0.as_ptr() as i32
    }

    /// ABI v2 `concast_run`: tags, merges and asks `done` for entries `first..count` of the
    /// batch area, in order, into the state in `slot` (whose tag is `tag`; `slot` < 0: no
    /// state yet). Stops at the first entry that needs the engine (another tag, a merge
    /// result other than MERGED/DROP, or `done` said build) and returns its index; returns
    /// `count` when all are through.
    pub fn run(&self, first: i32, count: i32, slot: i32, tag: i64) -> i32 {
        let spec = self.spec();
        // One host for the whole run: the clock and path MTU are asked once, not per datagram.
        let mut host = WasmHost::new();
        let state = if slot >= 0 {
            Some(self.slots.get().get(slot as u32))
        } else {
            None
        };
        let count = (count.max(0) as usize).min(abi::batch::MAX);
        let first = (first.max(0) as usize).min(count);
        crate::run::run(spec, state, &mut AreaTable { flags: 0 }, &mut host, first, count, tag as u64) as i32
    }

    fn init_spec(&self) {
        let (buf, len) = PARAMS.get();
        let full = unsafe { imports::flow_params(buf.as_mut_ptr() as i32, PARAMS_CAP as i32) };
        if full as usize > PARAMS_CAP {
            abort("flow parameters longer than the SDK's 4096-byte buffer");
        }
        *len = full.max(0) as usize;
        match S::init(&mut WasmHost::new()) {
            Ok(spec) => *self.spec.get() = Some(spec),
            Err(why) => abort(why),
        }
    }

    pub fn get_tag(&self, len: i32) -> i64 {
        self.spec().get_tag(message(len), &mut WasmHost::new()).to_abi() as i64
    }

    pub fn state_new(&self, slot: i32, tag: i64) {
        let state = self.spec().new_state(tag as u64, &mut WasmHost::new());
        self.slots.get().put(slot as u32, state);
    }

    pub fn merge(&self, slot: i32, len: i32) -> i32 {
        let state = self.slots.get().get(slot as u32);
        self.spec()
            .merge(state, message(len), &mut WasmHost::new())
            .to_abi()
    }

    pub fn done(&self, slot: i32) -> i32 {
        let state = self.slots.get().get(slot as u32);
        i32::from(self.spec().done(state, &mut WasmHost::new()))
    }

    pub fn build(&self, slot: i32) -> i32 {
        let state = self.slots.get().get(slot as u32);
        self.spec().build(state, &mut WasmHost::new()).to_abi()
    }

    pub fn timeout(&self, slot: i32) -> i32 {
        let state = self.slots.get().get(slot as u32);
        i32::from(self.spec().timeout(state, &mut WasmHost::new()))
    }

    pub fn state_free(&self, slot: i32) {
        drop(self.slots.get().take(slot as u32));
    }
}

/// A panic ends the module through `abort`, so the engine reports its message.
#[cfg(not(test))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    use core::fmt::Write;
    let mut line = LineBuf {
        buf: [0; 256],
        len: 0,
    };
    let _ = write!(line, "spec panicked: {info}");
    abort(line.as_str())
}

/// A fixed buffer that keeps what fits of a formatted message.
struct LineBuf {
    buf: [u8; 256],
    len: usize,
}

impl LineBuf {
    fn as_str(&self) -> &str {
        match core::str::from_utf8(&self.buf[..self.len]) {
            Ok(s) => s,
            Err(e) => core::str::from_utf8(&self.buf[..e.valid_up_to()]).unwrap_or(""),
        }
    }
}

impl core::fmt::Write for LineBuf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}
