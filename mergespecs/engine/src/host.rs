//! The host side of the ABI: what a spec may ask of the engine while one of its functions
//! runs. One `FlowCtx` per flow, shared by the Wasm imports (`linker.rs`) and native specs
//! (`native.rs`), so both paths obey the same rules.

use std::collections::VecDeque;

use concast_sdk::abi;
use concast_sdk::Level;

use crate::fault::Fault;
use crate::pending::{Pending, Span};

/// Flow information a spec can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlowInfo {
    pub receiver: u32,
    pub group: u32,
    pub node: u32,
    pub path_mtu: u32,
    pub children: u32,
    pub params: Vec<u8>,
}

/// Which spec function is running; decides what the spec may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Outside,
    Init,
    Tag,
    /// A call about one state.
    State {
        slot: u32,
        call: StateCall,
    },
}

/// Which call about a state is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateCall {
    New,
    Merge,
    Done,
    Build,
    Timeout,
    /// `concast_state_free` may only look: the state is going away, so it must not take
    /// datagrams or arm its timer.
    Free,
    /// ABI v2 `concast_run` into a state: tags, merges and `done` calls of several datagrams.
    Run,
}

/// What the spec asked for the current state's timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimerOp {
    Set(u64),
    Cancel,
}

/// One emitted payload, staged until `build` returns successfully.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Emit {
    pub start: usize,
    pub end: usize,
    pub protocol: u8,
    pub ttl: u8,
    pub dont_fragment: bool,
}

/// A line a spec logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub at_us: u64,
    pub level: Level,
    pub text: String,
}

const LOG_LINE_MAX: usize = 512;

pub(crate) struct FlowCtx {
    pub info: FlowInfo,
    pub now_us: u64,
    pub phase: Phase,
    pub pending: Pending,
    /// Datagrams taken from the pending queue during the current call.
    pub taken: Vec<Span>,
    pub timer_op: Option<TimerOp>,
    /// `hold_limit` of the current call: how long an egress gate may hold the state.
    pub hold_limit: Option<u64>,
    /// The egress gate's answer for this flow before a `done`/`timeout` call (0: idle or
    /// unknown); what the `egress_free_at` import returns.
    pub egress_free_at: u64,
    pub emit_bytes: Vec<u8>,
    pub emits: Vec<Emit>,
    pub logs: VecDeque<LogLine>,
    pub logs_dropped: u64,
    log_lines: usize,
    output_limit: usize,
    emit_limit: usize,
    memory_limit: usize,
    /// A fault a native host method saw (it cannot return one); checked after each call.
    pub fault: Option<Fault>,
    /// The sandbox's exported memory (Wasm only), for the imports that read or write it.
    pub memory: Option<wasmtime::Memory>,
    /// CPU-time bookkeeping of the current call (epoch limit).
    pub clock: crate::call_clock::CallClock,
    /// ABI v2: the batch area's address, and which batch datagram each entry of its table
    /// holds while the engine works through a layout (empty otherwise).
    pub batch_area: Option<usize>,
    pub layout: Vec<u32>,
    /// ABI v2: a `concast_run` call is running (the spec moves the current datagram itself).
    pub in_run: bool,
    /// `concast` imports the spec has called (Wasm only; `FlowStats::host_calls`).
    pub host_calls: u64,
}

impl FlowCtx {
    pub fn new(info: FlowInfo, limits: &crate::Limits, log_lines: usize) -> FlowCtx {
        FlowCtx {
            info,
            now_us: 0,
            phase: Phase::Outside,
            pending: Pending::default(),
            taken: Vec::new(),
            timer_op: None,
            hold_limit: None,
            egress_free_at: 0,
            emit_bytes: Vec::new(),
            emits: Vec::new(),
            logs: VecDeque::new(),
            logs_dropped: 0,
            log_lines,
            output_limit: limits.output_bytes.min(crate::ipv4::MAX_PAYLOAD),
            emit_limit: limits.emits_per_build,
            memory_limit: limits.memory_bytes,
            fault: None,
            memory: None,
            clock: crate::call_clock::CallClock::default(),
            batch_area: None,
            layout: Vec::new(),
            in_run: false,
            host_calls: 0,
        }
    }

    /// During a `concast_run`, the datagram the spec is working on is the one whose entry it
    /// named in the header: the pending queue is what follows that one.
    pub fn sync_run(&mut self, mem: &[u8]) {
        let (Some(area), true) = (self.batch_area, self.in_run) else {
            return;
        };
        if self.layout.is_empty() {
            return;
        }
        let at = area + abi::batch::CURRENT;
        let entry = u32::from_le_bytes(mem[at..at + 4].try_into().expect("4 bytes")) as usize;
        let entry = entry.min(self.layout.len() - 1);
        self.pending.set_current(self.layout[entry] as usize);
    }

    /// Tells the spec that batch datagram `index` was taken, if it is in the layout, so its
    /// run skips it.
    pub fn mark_taken(&self, mem: &mut [u8], index: usize) {
        let Some(area) = self.batch_area else { return };
        if let Some(entry) = self.layout.iter().position(|&i| i as usize == index) {
            let at = area + abi::batch::TABLE + entry * abi::batch::ENTRY_LEN + abi::batch::FLAGS;
            let flags = u32::from_le_bytes(mem[at..at + 4].try_into().expect("4 bytes"));
            mem[at..at + 4].copy_from_slice(&(flags | abi::batch::TAKEN).to_le_bytes());
        }
    }

    /// Imports that act on the current state are only allowed while one is live.
    fn state_call(&self, what: &str) -> Result<(), Fault> {
        match self.phase {
            Phase::State {
                call: StateCall::Free,
                ..
            } => Err(Fault::Abi(format!("{what} called in concast_state_free"))),
            Phase::State { .. } => Ok(()),
            _ => Err(Fault::Abi(format!(
                "{what} called outside a call about a merge state"
            ))),
        }
    }

    /// Copies the parameters into `dst` as far as they fit; returns their full length.
    pub fn params(&self, dst: &mut [u8]) -> usize {
        let n = dst.len().min(self.info.params.len());
        dst[..n].copy_from_slice(&self.info.params[..n]);
        self.info.params.len()
    }

    pub fn set_timer(&mut self, at_us: u64) -> Result<(), Fault> {
        self.state_call("set_timer")?;
        self.timer_op = Some(TimerOp::Set(at_us));
        Ok(())
    }

    pub fn hold_limit(&mut self, at_us: u64) -> Result<(), Fault> {
        self.state_call("hold_limit")?;
        self.hold_limit = Some(at_us);
        Ok(())
    }

    pub fn cancel_timer(&mut self) -> Result<(), Fault> {
        self.state_call("cancel_timer")?;
        self.timer_op = Some(TimerOp::Cancel);
        Ok(())
    }

    pub fn pending_count(&self) -> usize {
        self.pending.count()
    }

    /// ABI result of `pending_peek`: full length, or `NO_SUCH`.
    pub fn pending_peek(&self, index: i32, dst: &mut [u8]) -> i32 {
        let Some(span) = usize::try_from(index)
            .ok()
            .and_then(|i| self.pending.peek(i))
        else {
            return abi::pending::NO_SUCH;
        };
        let bytes = self.pending.bytes(span);
        let n = dst.len().min(bytes.len());
        dst[..n].copy_from_slice(&bytes[..n]);
        bytes.len() as i32
    }

    /// ABI `pending_scan`: a record `[at, len]` for each pending datagram from `first` on
    /// (as many as `records` holds); `at` is where the datagram's bytes are in the guest's
    /// memory `mem` when it is laid out in the batch area, else `NOT_IN_MEMORY`. Returns
    /// how many records it wrote.
    pub fn pending_scan(&self, mem: &[u8], first: usize, records: &mut [[u32; 2]]) -> usize {
        use abi::batch;
        let mut n = 0;
        for (record, index) in records.iter_mut().zip(self.pending.queued().skip(first)) {
            let len = self.pending.span(index).len() as u32;
            let at = match (self.batch_area, self.layout.binary_search(&(index as u32))) {
                (Some(area), Ok(entry)) => {
                    let e = area + batch::TABLE + entry * batch::ENTRY_LEN + batch::OFF;
                    let off = u32::from_le_bytes(mem[e..e + 4].try_into().expect("4 bytes"));
                    (area + batch::DATA) as u32 + off
                }
                _ => abi::pending::NOT_IN_MEMORY,
            };
            *record = [at, len];
            n += 1;
        }
        n
    }

    /// ABI `pending_take_list`: takes the pending datagrams at `indices` (strictly
    /// ascending, positions before the call) into the current state, writing their batch
    /// indices into `batch_indices`; `NO_SUCH` and nothing taken if one is missing or out of
    /// order. They are held in queue order, as one `pending_take` after another would.
    pub fn pending_take_list(
        &mut self,
        indices: &[u32],
        batch_indices: &mut [usize],
    ) -> Result<i32, Fault> {
        self.state_call("pending_take_list")?;
        let in_order = indices.windows(2).all(|w| w[0] < w[1]);
        if !in_order || indices.last().is_some_and(|&i| i as usize >= self.pending.count()) {
            return Ok(abi::pending::NO_SUCH);
        }
        let held = self.taken.len();
        // Highest first, so the positions below stay where they were.
        for (k, &i) in indices.iter().enumerate().rev() {
            let (index, span) = self.pending.take(i as usize).expect("checked in range");
            batch_indices[k] = index;
            self.taken.push(span);
        }
        self.taken[held..].reverse();
        Ok(indices.len() as i32)
    }

    /// ABI result of `pending_take`: full length, `NO_SUCH` or `TOO_SMALL` (nothing taken),
    /// and the batch index of the datagram taken.
    pub fn pending_take(
        &mut self,
        index: i32,
        dst: &mut [u8],
    ) -> Result<(i32, Option<usize>), Fault> {
        self.state_call("pending_take")?;
        let Some(span) = usize::try_from(index)
            .ok()
            .and_then(|i| self.pending.peek(i))
        else {
            return Ok((abi::pending::NO_SUCH, None));
        };
        if dst.len() < span.len() {
            return Ok((abi::pending::TOO_SMALL, None));
        }
        dst[..span.len()].copy_from_slice(self.pending.bytes(span));
        let taken = self.pending.take(index as usize).map(|(i, _)| i);
        self.taken.push(span);
        Ok((span.len() as i32, taken))
    }

    pub fn emit(
        &mut self,
        payload: &[u8],
        protocol: i32,
        ttl: i32,
        flags: i32,
    ) -> Result<(), Fault> {
        if !matches!(
            self.phase,
            Phase::State {
                call: StateCall::Build,
                ..
            }
        ) {
            return Err(Fault::Abi("emit called outside concast_build".into()));
        }
        // Values the engine would otherwise truncate to a byte, and CSP: a merged datagram
        // with protocol 253 would reach R's signalling socket as if a router had sent it.
        if !(0..=255).contains(&protocol) || !(0..=255).contains(&ttl) {
            return Err(Fault::Abi(format!("emit with protocol {protocol} and TTL {ttl}: both must be 0..=255")));
        }
        if protocol == i32::from(concast_sdk::wire::ipv4::protocol::CSP) {
            return Err(Fault::Abi("emit of a protocol-253 (CSP) datagram: specs may not speak signalling".into()));
        }
        if payload.len() > self.output_limit {
            return Err(Fault::OutputTooLarge {
                len: payload.len(),
                limit: self.output_limit,
            });
        }
        if self.emits.len() >= self.emit_limit {
            return Err(Fault::TooManyEmits {
                limit: self.emit_limit,
            });
        }
        let start = self.emit_bytes.len();
        self.emit_bytes.extend_from_slice(payload);
        self.emits.push(Emit {
            start,
            end: self.emit_bytes.len(),
            protocol: protocol as u8,
            ttl: ttl as u8,
            dont_fragment: flags & abi::emit_flags::DONT_FRAGMENT != 0,
        });
        Ok(())
    }

    pub fn log(&mut self, level: i32, text: &[u8]) {
        if self.log_lines == 0 {
            self.logs_dropped += 1;
            return;
        }
        if self.logs.len() == self.log_lines {
            self.logs.pop_front();
            self.logs_dropped += 1;
        }
        let text = String::from_utf8_lossy(&text[..text.len().min(LOG_LINE_MAX)]).into_owned();
        self.logs.push_back(LogLine {
            at_us: self.now_us,
            level: Level::from_abi(level),
            text,
        });
    }

    pub fn abort(&self, msg: &[u8]) -> Fault {
        Fault::Aborted(String::from_utf8_lossy(&msg[..msg.len().min(LOG_LINE_MAX)]).into_owned())
    }

    /// Clears what a call leaves behind before the next one.
    pub fn begin_call(&mut self, phase: Phase) {
        self.phase = phase;
        self.taken.clear();
        self.timer_op = None;
        self.hold_limit = None;
        self.egress_free_at = 0;
        if matches!(
            phase,
            Phase::State {
                call: StateCall::Build,
                ..
            }
        ) {
            self.emit_bytes.clear();
            self.emits.clear();
        }
    }
}

/// Linear memory is capped per flow; growing past the cap traps with a [`Fault`].
impl wasmtime::ResourceLimiter for FlowCtx {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            return Err(Fault::MemoryLimit {
                limit: self.memory_limit,
                requested: desired,
            }
            .into());
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        const TABLE_LIMIT: usize = 10_000;
        if desired > TABLE_LIMIT {
            return Err(Fault::Abi(format!(
                "table grown to {desired} elements, the limit is {TABLE_LIMIT}"
            ))
            .into());
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        1
    }
    fn tables(&self) -> usize {
        1
    }
    fn memories(&self) -> usize {
        1
    }
}
