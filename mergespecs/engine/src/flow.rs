//! One flow (R, G): its sandbox, its merge states, its counters, and the per-datagram
//! algorithm — tag, find or create the state, merge, done?, build and emit — with fail-open
//! quarantine when the spec faults.

use std::net::Ipv4Addr;

use concast_sdk::abi;

use crate::config::Limits;
use crate::fault::{Fault, Quarantine};
use crate::host::{FlowCtx, Phase, StateCall, TimerOp};
use crate::ipv4::{self, FlowId};
use crate::output::{OutputKind, Outputs, Unmerged};
use crate::pending::Span;
use crate::sandbox::Sandbox;
use crate::spec::SpecRef;
use crate::states::{StateTable, TimerPos};
use crate::timers::{TimerKey, TimerWheel};

/// Per-flow counters. Every datagram handed in ends up in exactly one of `merged`,
/// `dropped`, `passed`, `malformed` or `fail_open` (the last also counts datagrams that were
/// merged but never built when the flow was quarantined, so those appear in both).
/// Serialized under the field names (routerd's `concast router flows`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FlowCounters {
    /// Datagrams handed to the engine for this flow.
    pub received: u64,
    /// Datagrams folded into a merge state (including those taken from the pending queue).
    pub merged: u64,
    /// Of `merged`, those the spec took from the pending queue.
    pub taken: u64,
    /// Datagrams the spec swallowed (TAG_DROP or merge result DROP).
    pub dropped: u64,
    /// Forwarded unchanged because the spec said so.
    pub passed: u64,
    /// Forwarded unchanged without asking the spec (not 20..65535 bytes).
    pub malformed: u64,
    /// Forwarded unchanged because the flow is (or just got) quarantined.
    pub fail_open: u64,
    /// Every unmerged datagram forwarded: passed + malformed + fail_open.
    pub unmerged_forwarded: u64,
    /// Merged datagrams emitted, and their bytes (headers included).
    pub out: u64,
    pub out_bytes: u64,
    /// Merged datagrams that went into a successful build.
    pub built_from: u64,
    pub builds: u64,
    pub states_created: u64,
    pub timer_fires: u64,
    /// Finished states the egress gate held while their output link was busy, and the
    /// time they were held in all (µs).
    pub gate_held: u64,
    pub gate_hold_us: u64,
    /// States built before their time because the node's buffer budget was spent.
    pub budget_builds: u64,
    /// Faults (0 or 1: a fault quarantines the flow).
    pub traps: u64,
    /// CPU time (µs) the engine spent on this flow, when a CPU budget is set
    /// (`Limits::cpu_per_second`; 0 otherwise).
    pub cpu_us: u64,
}

/// A snapshot of one flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStats {
    pub key: FlowId,
    pub spec_sha256: [u8; 32],
    pub counters: FlowCounters,
    pub open_states: usize,
    pub held_bytes: usize,
    /// Linear memory of the sandbox (0 for native specs and quarantined flows).
    pub memory_bytes: usize,
    pub quarantine: Option<Quarantine>,
    pub logs_dropped: u64,
    /// `concast` imports the flow's `.wasm` spec has called (0 for native specs and once
    /// quarantined): what the host calls per datagram cost (docs/benchmarks.md, session 15).
    pub host_calls: u64,
}

/// A `concast_run` that broke the ABI.
fn abi_fault(why: String) -> (&'static str, Fault) {
    ("concast_run", Fault::Abi(why))
}

/// Datagrams the spec never sees: not 20..=65,535 bytes.
fn malformed(len: usize) -> bool {
    len < 20 || len > abi::MSG_BUFFER_LEN - 1
}

/// What a flow needs from the engine while it works.
pub(crate) struct Env<'a> {
    pub timers: &'a mut TimerWheel,
    pub out: &'a mut Outputs,
    pub now: u64,
    pub node: Ipv4Addr,
    pub limits: &'a Limits,
    pub gate: Option<&'a mut (dyn crate::gate::EgressGate + 'static)>,
    /// The engine's timer lead: a link that frees within it counts as free.
    pub lead_us: u64,
}

pub(crate) struct Flow {
    pub key: FlowId,
    pub index: u32,
    pub spec: SpecRef,
    /// `None` once quarantined (the sandbox and its memory are dropped).
    sandbox: Option<Box<dyn Sandbox>>,
    states: StateTable,
    pub counters: FlowCounters,
    pub quarantine: Option<Quarantine>,
    /// The current datagram is loaded but neither held, forwarded nor dropped yet.
    current_loose: bool,
    ident: u16,
    /// Kept when the sandbox is dropped so stats still show them.
    last_logs: Vec<crate::host::LogLine>,
    /// The spec asked for its states to leave in creation order.
    ordered: bool,
    /// CPU time charged against `Limits::cpu_per_second`.
    cpu: crate::budget::CpuAccount,
}

impl Flow {
    pub fn new(key: FlowId, index: u32, spec: SpecRef, sandbox: Box<dyn Sandbox>) -> Flow {
        let ordered = sandbox.ordered_states();
        Flow {
            ordered,
            key,
            index,
            spec,
            sandbox: Some(sandbox),
            states: StateTable::default(),
            counters: FlowCounters::default(),
            quarantine: None,
            current_loose: false,
            ident: 0,
            last_logs: Vec::new(),
            cpu: Default::default(),
        }
    }

    fn sb(&mut self) -> &mut dyn Sandbox {
        self.sandbox.as_deref_mut().expect("not quarantined")
    }

    fn cx(&mut self) -> &mut FlowCtx {
        self.sb().ctx()
    }

    pub fn stats(&self) -> FlowStats {
        let (memory_bytes, logs_dropped, host_calls) = match &self.sandbox {
            Some(sb) => (sb.memory_bytes(), sb.ctx_ref().logs_dropped, sb.ctx_ref().host_calls),
            None => (0, 0, 0),
        };
        FlowStats {
            key: self.key,
            spec_sha256: self.spec.info().sha256,
            counters: self.counters.clone(),
            open_states: self.states.open_count(),
            held_bytes: self.states.held_bytes(),
            memory_bytes,
            quarantine: self.quarantine.clone(),
            logs_dropped,
            host_calls,
        }
    }

    pub fn logs(&self) -> Vec<crate::host::LogLine> {
        match &self.sandbox {
            Some(sb) => sb.ctx_ref().logs.iter().cloned().collect(),
            None => self.last_logs.clone(),
        }
    }

    pub fn set_children(&mut self, children: u32) {
        if let Some(sb) = self.sandbox.as_deref_mut() {
            sb.ctx().info.children = children;
        }
    }

    pub fn set_path_mtu(&mut self, mtu: u32) {
        if let Some(sb) = self.sandbox.as_deref_mut() {
            sb.ctx().info.path_mtu = mtu;
        }
    }

    fn count_unmerged(&mut self, why: Unmerged) {
        match why {
            Unmerged::Passed => self.counters.passed += 1,
            Unmerged::Malformed => self.counters.malformed += 1,
            Unmerged::FailOpen | Unmerged::NoFlow => self.counters.fail_open += 1,
        }
        self.counters.unmerged_forwarded += 1;
    }

    fn forward(&mut self, env: &mut Env, why: Unmerged, datagram: &[u8]) {
        self.count_unmerged(why);
        env.out
            .push(self.key, env.now, OutputKind::Unmerged(why), datagram);
    }

    fn forward_current(&mut self, env: &mut Env, why: Unmerged) {
        let cx = self.sandbox.as_deref_mut().expect("not quarantined").ctx();
        let span = cx.pending.current().expect("a current datagram");
        let (key, now) = (self.key, env.now);
        env.out
            .push(key, now, OutputKind::Unmerged(why), cx.pending.bytes(span));
        self.count_unmerged(why);
        self.current_loose = false;
    }

    /// Runs a batch of this flow's datagrams through the spec.
    pub fn ingest<D: AsRef<[u8]>>(&mut self, batch: &[D], env: &mut Env) {
        self.counters.received += batch.len() as u64;
        if self.sandbox.is_none() {
            for d in batch {
                self.forward(env, Unmerged::FailOpen, d.as_ref());
            }
            return;
        }
        let cx = self.cx();
        cx.now_us = env.now;
        cx.pending.load(batch);
        if self.sb().batched() {
            if let Err((call, fault)) = self.process_batched(env) {
                self.cx().layout.clear();
                self.quarantine(call, fault, env);
                return;
            }
            self.fire_due_within_lead(env);
            return;
        }
        while self.cx().pending.advance().is_some() {
            self.current_loose = true;
            if let Err((call, fault)) = self.process_current(env) {
                self.quarantine(call, fault, env);
                return;
            }
        }
        self.fire_due_within_lead(env);
    }

    /// Fires, at the batch's own `now`, the timers the batch armed within the timer lead
    /// (`advance` would fire them at its next call anyway, some time later). A datagram
    /// that arrives with less budget left than the lead (protocol.md 3.2-2, a bundle from a
    /// hop that held it to its bound) thus leaves in the turn it came in, and the time the
    /// rest of the turn took is not added to its DelayedSoFar.
    fn fire_due_within_lead(&mut self, env: &mut Env) {
        if env.lead_us == 0 || self.sandbox.is_none() {
            return;
        }
        let due_by = env.now + env.lead_us;
        if self.states.earliest_timer().is_none_or(|d| d > due_by) {
            return; // the common case: nothing due, nothing allocated
        }
        let mut due: Vec<(u64, u32)> = self
            .states
            .open_slots()
            .into_iter()
            .filter_map(|s| {
                let t = self.states.slot(s).timer?;
                (t.deadline <= due_by).then_some((t.deadline, s))
            })
            .collect();
        due.sort_unstable();
        for (_, slot) in due {
            if self.sandbox.is_none() {
                return; // a timeout quarantined the flow
            }
            if self.states.slot(slot).open && self.states.slot(slot).timer.is_some() {
                self.disarm_timer(slot, env);
                self.fire_timer(slot, env);
            }
        }
    }

    fn process_current(&mut self, env: &mut Env) -> Result<(), (&'static str, Fault)> {
        let span = self.cx().pending.current().expect("current");
        if malformed(span.len()) {
            self.forward_current(env, Unmerged::Malformed);
            return Ok(());
        }
        let len = self.sb().load_current().map_err(|f| ("load", f))?;
        self.cx().begin_call(Phase::Tag);
        let tag = self.sb().get_tag(len);
        self.cx().phase = Phase::Outside;
        let tag = tag.map_err(|f| ("concast_get_tag", f))?;
        match tag {
            abi::TAG_PASS => self.forward_current(env, Unmerged::Passed),
            abi::TAG_DROP => {
                self.counters.dropped += 1;
                self.current_loose = false;
            }
            tag => self.merge_current(tag, len, env, true)?,
        }
        Ok(())
    }

    /// ABI v2: lays out runs of queued datagrams in the batch area (as many as fit) and works
    /// through each with `concast_run`, the engine stepping in only where v1's algorithm
    /// needs it: a tag without a state, `done` said build, `FLUSH_FIRST`, `PASS`.
    fn process_batched(&mut self, env: &mut Env) -> Result<(), (&'static str, Fault)> {
        loop {
            let cx = self.cx();
            let Some(start) = cx.pending.queued_from(0).next() else {
                return Ok(());
            };
            let mut layout = std::mem::take(&mut cx.layout);
            layout.clear();
            let mut bytes = 0;
            for i in cx.pending.queued_from(start) {
                let len = cx.pending.span(i).len();
                if layout.len() == abi::batch::MAX
                    || malformed(len)
                    || bytes + len > abi::MSG_BUFFER_LEN
                {
                    break;
                }
                layout.push(i as u32);
                bytes += len;
            }
            cx.layout = layout;
            if self.cx().layout.is_empty() {
                // a datagram the spec never sees
                self.cx().pending.set_current(start);
                self.current_loose = true;
                self.forward_current(env, Unmerged::Malformed);
                continue;
            }
            self.sb().lay_out();
            self.run_layout(env)?;
            self.cx().layout.clear();
        }
    }

    /// Works through the datagrams laid out in the batch area.
    fn run_layout(&mut self, env: &mut Env) -> Result<(), (&'static str, Fault)> {
        let n = self.cx().layout.len();
        let mut i = 0;
        // The state the run merges into (-1: none yet) and its tag.
        let (mut slot, mut tag) = (-1i32, 0u64);
        // Entries whose state was created for them, and that were offered again after
        // FLUSH_FIRST (v1's `created` and `first_try`).
        let (mut created_at, mut retry_at) = (None, None);
        while i < n {
            let index = self.cx().layout[i] as usize;
            self.cx().pending.set_current(index);
            self.current_loose = true;
            let stop = self.run_call(i, n, slot, tag, env)?;
            self.account(i, stop, slot, env)?;
            if slot >= 0 {
                self.apply_effects(slot as u32, env).map_err(|f| ("concast_run", f))?;
            }
            if stop == n {
                let last = self.cx().layout[n - 1] as usize;
                self.cx().pending.set_current(last);
                self.current_loose = false;
                return Ok(());
            }
            let index = self.cx().layout[stop] as usize;
            self.cx().pending.set_current(index);
            let (entry_tag, result) = self.sb().entry(stop);
            let abi_error = |what: String| ("concast_run", Fault::Abi(what));
            if self.cx().pending.was_taken(index) {
                return Err(abi_error(format!("stopped at entry {stop}, which was taken")));
            }
            let merge = (result & 0xff) as i32;
            let done = result & abi::batch::DONE != 0;
            let state = (slot >= 0).then_some(slot as u32);
            match (result, state) {
                (abi::batch::NEEDS_STATE, _) => {
                    if entry_tag == abi::TAG_PASS || entry_tag == abi::TAG_DROP {
                        return Err(abi_error(format!("entry {stop} needs a state for tag {entry_tag:#x}")));
                    }
                    let (s, created) = self.find_or_open(entry_tag, env)?;
                    (slot, tag) = (s as i32, entry_tag);
                    created_at = created.then_some(stop);
                    self.sb().set_known(stop, entry_tag);
                    i = stop;
                    continue; // run again from this entry, into its state
                }
                (_, Some(s)) if done && (merge == abi::merge::MERGED || merge == abi::merge::DROP) => {
                    self.account_one(stop, merge, s, env)?;
                    self.finish(s, env)?;
                    i = stop + 1;
                }
                (_, Some(s)) if merge == abi::merge::FLUSH_FIRST
                    && retry_at != Some(stop)
                    && created_at != Some(stop) =>
                {
                    self.build(s, env)?;
                    retry_at = Some(stop);
                    let (s, created) = self.find_or_open(tag, env)?;
                    slot = s as i32;
                    created_at = created.then_some(stop);
                    self.sb().set_known(stop, tag);
                    i = stop;
                    continue; // offer it once more
                }
                (_, Some(s)) if merge == abi::merge::FLUSH_FIRST || merge == abi::merge::PASS => {
                    self.forward_current(env, Unmerged::Passed);
                    self.close_if_empty(s, created_at == Some(stop), env)?;
                    i = stop + 1;
                }
                _ => {
                    return Err(abi_error(format!("entry {stop} has result {result:#x}")));
                }
            }
            if slot >= 0 && !self.states.slot(slot as u32).open {
                slot = -1;
            }
        }
        self.current_loose = false;
        Ok(())
    }

    /// One `concast_run` call, with the phase, the gate's answer and the CPU budget set.
    /// On a fault, what the spec got through before it is accounted first.
    fn run_call(
        &mut self,
        first: usize,
        n: usize,
        slot: i32,
        tag: u64,
        env: &mut Env,
    ) -> Result<usize, (&'static str, Fault)> {
        let phase = if slot >= 0 {
            Phase::State {
                slot: slot as u32,
                call: StateCall::Run,
            }
        } else {
            Phase::Tag
        };
        let egress_free_at = match (slot >= 0, env.gate.as_deref_mut()) {
            (true, Some(gate)) => gate.busy_until(self.key, env.now).unwrap_or(0),
            _ => 0,
        };
        let cx = self.cx();
        cx.begin_call(phase);
        cx.egress_free_at = egress_free_at;
        cx.in_run = true;
        cx.clock.run_area = cx.batch_area;
        let r = self.sb().run(first as u32, n as u32, slot, tag);
        let cx = self.cx();
        cx.in_run = false;
        cx.clock.run_area = None;
        cx.phase = Phase::Outside;
        match r {
            Ok(stop) if (first..=n).contains(&(stop as usize)) => Ok(stop as usize),
            Ok(stop) => Err((
                "concast_run",
                Fault::Abi(format!("concast_run returned {stop}, not {first}..={n}")),
            )),
            Err(fault) => Err(self.run_failed(first, n, slot, fault, env)),
        }
    }

    /// A `concast_run` trapped or ran out of budget: what the spec got through before the
    /// entry it was working on is accounted, and that entry becomes the current datagram
    /// (an accounting error leaves its own entry current instead, see `account_each`).
    #[cold]
    #[inline(never)]
    fn run_failed(&mut self, first: usize, n: usize, slot: i32, fault: Fault, env: &mut Env) -> (&'static str, Fault) {
        let at = self.sb().run_current().clamp(first, n - 1);
        if self.account(first, at, slot, env).is_ok() {
            let index = self.cx().layout[at] as usize;
            let cx = self.cx();
            cx.pending.set_current(index);
            self.current_loose = !cx.pending.was_taken(index);
        }
        ("concast_run", fault)
    }

    /// The state of `tag`, or a new one (`concast_state_new`); and whether it is new.
    fn find_or_open(&mut self, tag: u64, env: &mut Env) -> Result<(u32, bool), (&'static str, Fault)> {
        if let Some(slot) = self.states.find(tag) {
            return Ok((slot, false));
        }
        let limit = env.limits.states;
        let slot = self
            .states
            .open(tag, limit)
            .ok_or(("engine", Fault::TooManyStates { limit }))?;
        self.counters.states_created += 1;
        self.state_call(slot, StateCall::New, env, |sb| sb.state_new(slot, tag))?;
        Ok((slot, true))
    }

    /// Entries `from..to` went through a run without stopping it: each was passed or dropped
    /// by its tag, or merged into (or dropped by) the run's state.
    fn account(
        &mut self,
        from: usize,
        to: usize,
        slot: i32,
        env: &mut Env,
    ) -> Result<(), (&'static str, Fault)> {
        if from >= to {
            return Ok(());
        }
        match self.account_common(from, to, slot, env) {
            rest if rest < to => self.account_each(rest, to, slot, env),
            _ => Ok(()),
        }
    }

    /// [`Flow::account`]'s common case in one pass: the run's table read at once, no call
    /// into the sandbox per entry. Accounts entries passed or dropped by their tag, and
    /// merged (within the held-bytes limit) or dropped by the run's state; returns the first
    /// entry it leaves to [`Flow::account_each`] (`to` when none): one that breaks the ABI
    /// or would take the flow past its limit, which that path reports as before.
    fn account_common(&mut self, from: usize, to: usize, slot: i32, env: &mut Env) -> usize {
        let mut table = [(0u64, 0u32); abi::batch::MAX];
        let table = &mut table[..to - from];
        let Flow { sandbox, states, counters, current_loose, key, .. } = self;
        let sb = sandbox.as_deref_mut().expect("not quarantined");
        sb.entries(from, table);
        let cx = sb.ctx();
        let current = cx.pending.current_index();
        for (e, &(tag, result)) in (from..to).zip(table.iter()) {
            let index = cx.layout[e] as usize;
            if cx.pending.was_taken(index) {
                continue;
            }
            match tag {
                abi::TAG_PASS => {
                    let bytes = cx.pending.bytes(cx.pending.span(index));
                    env.out.push(*key, env.now, OutputKind::Unmerged(Unmerged::Passed), bytes);
                    counters.passed += 1;
                    counters.unmerged_forwarded += 1;
                    continue;
                }
                abi::TAG_DROP => {
                    counters.dropped += 1;
                    continue;
                }
                _ if slot < 0 => return e,
                _ => {}
            }
            match result as i32 {
                abi::merge::MERGED => {
                    let bytes = cx.pending.bytes(cx.pending.span(index));
                    if states.held_bytes() + bytes.len() > env.limits.held_bytes {
                        return e;
                    }
                    states.hold(slot as u32, bytes);
                    counters.merged += 1;
                }
                abi::merge::DROP => counters.dropped += 1,
                _ => return e,
            }
            if current == Some(index) {
                *current_loose = false;
            }
        }
        to
    }

    /// [`Flow::account`] one entry at a time, each through the general path (and its
    /// error reporting). Off the hot path: only an entry the common case left comes here.
    #[cold]
    #[inline(never)]
    fn account_each(
        &mut self,
        from: usize,
        to: usize,
        slot: i32,
        env: &mut Env,
    ) -> Result<(), (&'static str, Fault)> {
        for e in from..to {
            let index = self.cx().layout[e] as usize;
            if self.cx().pending.was_taken(index) {
                continue;
            }
            let (tag, result) = self.sb().entry(e);
            let err = match tag {
                abi::TAG_PASS => {
                    self.forward_index(env, Unmerged::Passed, index);
                    continue;
                }
                abi::TAG_DROP => {
                    self.counters.dropped += 1;
                    continue;
                }
                _ if slot < 0 => abi_fault(format!("entry {e} has tag {tag:#x} but the run had no state")),
                _ => match self.account_one(e, result as i32, slot as u32, env) {
                    Ok(()) => continue,
                    Err(err) => err,
                },
            };
            // The spec broke the ABI, or the flow its held-bytes limit: entry `e` becomes the
            // current datagram, so the quarantine that follows forwards it (unless a state
            // holds it already: the limit), the entries after it from the queue and what the
            // states hold, each once. (Forwarding the rest here as well sent them twice.)
            let cx = self.cx();
            cx.pending.set_current(index);
            self.current_loose = !matches!(err.1, Fault::HeldBytes { .. });
            return Err(err);
        }
        Ok(())
    }

    /// Entry `e` was merged (`MERGED`: the state holds it) or dropped by the state.
    fn account_one(
        &mut self,
        e: usize,
        result: i32,
        slot: u32,
        env: &mut Env,
    ) -> Result<(), (&'static str, Fault)> {
        match result {
            abi::merge::MERGED => {
                let cx = self.cx();
                let span = cx.pending.span(cx.layout[e] as usize);
                self.hold(slot, span, env)?;
            }
            abi::merge::DROP => self.counters.dropped += 1,
            other => {
                return Err((
                    "concast_run",
                    Fault::Abi(format!("entry {e} has merge result {other}")),
                ))
            }
        }
        if self.cx().pending.current_index() == Some(self.cx().layout[e] as usize) {
            self.current_loose = false;
        }
        Ok(())
    }

    /// A datagram merged into `slot`: the state holds it (for fail-open) within the flow's
    /// held-bytes limit. The one place v1 and v2 merges are counted.
    fn hold(&mut self, slot: u32, span: Span, env: &Env) -> Result<(), (&'static str, Fault)> {
        let cx = self.sandbox.as_deref_mut().expect("not quarantined").ctx();
        self.states.hold(slot, cx.pending.bytes(span));
        self.counters.merged += 1;
        if self.states.held_bytes() > env.limits.held_bytes {
            return Err((
                "engine",
                Fault::HeldBytes {
                    limit: env.limits.held_bytes,
                },
            ));
        }
        Ok(())
    }

    /// Forwards batch datagram `index` unmerged.
    fn forward_index(&mut self, env: &mut Env, why: Unmerged, index: usize) {
        let cx = self.sandbox.as_deref_mut().expect("not quarantined").ctx();
        let span = cx.pending.span(index);
        env.out
            .push(self.key, env.now, OutputKind::Unmerged(why), cx.pending.bytes(span));
        self.count_unmerged(why);
    }

    /// Calls one state function with the phase set, then applies what it asked for (taken
    /// datagrams, timer changes).
    fn state_call<R>(
        &mut self,
        slot: u32,
        call: StateCall,
        env: &mut Env,
        f: impl FnOnce(&mut dyn Sandbox) -> Result<R, Fault>,
    ) -> Result<R, (&'static str, Fault)> {
        let name = match call {
            StateCall::New => "concast_state_new",
            StateCall::Merge => "concast_merge",
            StateCall::Done => "concast_done",
            StateCall::Build => "concast_build",
            StateCall::Timeout => "concast_timeout",
            StateCall::Free => "concast_state_free",
            StateCall::Run => "concast_run",
        };
        // One question to the gate per `done`/`timeout`: the spec reads the answer through
        // `egress_free_at`, and `finish` decides a hold with the same one.
        let egress_free_at = match (call, env.gate.as_deref_mut()) {
            (StateCall::Done | StateCall::Timeout, Some(gate)) => {
                gate.busy_until(self.key, env.now).unwrap_or(0)
            }
            _ => 0,
        };
        let cx = self.cx();
        cx.begin_call(Phase::State { slot, call });
        cx.egress_free_at = egress_free_at;
        let r = f(self.sb());
        self.cx().phase = Phase::Outside;
        let r = r.map_err(|f| (name, f))?;
        self.apply_effects(slot, env).map_err(|f| (name, f))?;
        Ok(r)
    }

    fn apply_effects(&mut self, slot: u32, env: &mut Env) -> Result<(), Fault> {
        let sb = self.sandbox.as_deref_mut().expect("not quarantined");
        let cx = sb.ctx();
        for i in 0..cx.taken.len() {
            let span = cx.taken[i];
            self.states.hold(slot, cx.pending.bytes(span));
            self.counters.merged += 1;
            self.counters.taken += 1;
        }
        cx.taken.clear();
        if let Some(limit) = cx.hold_limit.take() {
            self.states.slot_mut(slot).hold_limit = Some(limit);
        }
        match cx.timer_op.take() {
            Some(TimerOp::Set(at)) => self.arm_timer(slot, at.max(env.now + 1), env),
            Some(TimerOp::Cancel) => self.disarm_timer(slot, env),
            None => {}
        }
        if self.states.held_bytes() > env.limits.held_bytes {
            return Err(Fault::HeldBytes {
                limit: env.limits.held_bytes,
            });
        }
        Ok(())
    }

    fn arm_timer(&mut self, slot: u32, deadline: u64, env: &mut Env) {
        self.disarm_timer(slot, env);
        let tick = env.timers.insert(
            TimerKey {
                flow: self.index,
                slot,
            },
            deadline,
        );
        self.states.slot_mut(slot).timer = Some(TimerPos { deadline, tick });
    }

    fn disarm_timer(&mut self, slot: u32, env: &mut Env) {
        if let Some(pos) = self.states.slot_mut(slot).timer.take() {
            env.timers.cancel(
                TimerKey {
                    flow: self.index,
                    slot,
                },
                pos.tick,
            );
        }
    }

    fn merge_current(
        &mut self,
        tag: u64,
        len: u32,
        env: &mut Env,
        first_try: bool,
    ) -> Result<(), (&'static str, Fault)> {
        let (slot, created) = self.find_or_open(tag, env)?;
        let result = self.state_call(slot, StateCall::Merge, env, |sb| sb.merge(slot, len))?;
        match result {
            abi::merge::MERGED => {
                let span = self.cx().pending.current().expect("current");
                self.current_loose = false;
                self.hold(slot, span, env)?;
            }
            abi::merge::DROP => {
                self.counters.dropped += 1;
                self.current_loose = false;
            }
            abi::merge::PASS => {
                self.forward_current(env, Unmerged::Passed);
                return self.close_if_empty(slot, created, env);
            }
            abi::merge::FLUSH_FIRST if first_try && !created => {
                self.build(slot, env)?;
                self.sb().load_current().map_err(|f| ("load", f))?;
                return self.merge_current(tag, len, env, false);
            }
            abi::merge::FLUSH_FIRST => {
                // Nothing to flush, or flushed already: it cannot be merged.
                self.forward_current(env, Unmerged::Passed);
                return self.close_if_empty(slot, created, env);
            }
            other => {
                return Err((
                    "concast_merge",
                    Fault::Abi(format!("concast_merge returned {other}, not 0..=3")),
                ))
            }
        }
        let done = self.state_call(slot, StateCall::Done, env, |sb| sb.done(slot))?;
        if done != 0 {
            self.finish(slot, env)?;
        }
        Ok(())
    }

    /// The spec says build: build now, unless the egress gate reports the output link busy
    /// and the spec allowed a hold (`hold_limit`). Then the state stays open — datagrams
    /// arriving meanwhile still merge into it — and its timer is re-armed to when the link
    /// will have sent what it holds (bounded by the limit). A held state is built when that
    /// timer fires, with no second question to the gate.
    ///
    /// Always called right after the `done` or `timeout` call that said build, so the gate's
    /// answer asked for that call (`egress_free_at`, see `state_call`) is the one used here.
    fn finish(&mut self, slot: u32, env: &mut Env) -> Result<(), (&'static str, Fault)> {
        let free_at = self.cx().egress_free_at; // 0: no gate, or the link is idle
        let s = self.states.slot(slot);
        if s.gated.is_some() {
            return Ok(()); // already held: its timer decides
        }
        if let Some(limit) = s.hold_limit.filter(|_| free_at > env.now) {
            let at = free_at.min(limit);
            if at > env.now + env.lead_us {
                self.arm_timer(slot, at, env);
                self.states.slot_mut(slot).gated = Some(env.now);
                self.counters.gate_held += 1;
                return Ok(());
            }
        }
        self.build(slot, env)
    }

    /// A state opened for a message that did not merge holds nothing: close it again.
    fn close_if_empty(
        &mut self,
        slot: u32,
        created: bool,
        env: &mut Env,
    ) -> Result<(), (&'static str, Fault)> {
        if created && self.states.slot(slot).held.count() == 0 {
            self.free_state(slot, env)?;
        }
        Ok(())
    }

    fn free_state(&mut self, slot: u32, env: &mut Env) -> Result<(), (&'static str, Fault)> {
        self.disarm_timer(slot, env);
        self.cx().begin_call(Phase::State {
            slot,
            call: StateCall::Free,
        });
        let r = self.sb().state_free(slot);
        self.cx().phase = Phase::Outside;
        self.states.close(slot);
        r.map_err(|f| ("concast_state_free", f))
    }

    /// `buildMsg`, in creation order for an ordered spec: every older open state leaves
    /// first, so a later state never overtakes an earlier one.
    fn build(&mut self, slot: u32, env: &mut Env) -> Result<(), (&'static str, Fault)> {
        if self.ordered {
            while let Some(first) = self.states.oldest().filter(|&f| f != slot) {
                self.build_one(first, env)?;
                if self.states.slot(first).open {
                    self.states.requeue(first); // kept: it now counts as newer
                }
            }
        }
        self.build_one(slot, env)
    }

    /// `buildMsg`: the spec emits; the engine writes headers, forgets the held datagrams and
    /// frees or keeps the state.
    fn build_one(&mut self, slot: u32, env: &mut Env) -> Result<(), (&'static str, Fault)> {
        self.disarm_timer(slot, env);
        if let Some(since) = self.states.slot_mut(slot).gated.take() {
            self.counters.gate_hold_us += env.now.saturating_sub(since);
        }
        let keep = self.state_call(slot, StateCall::Build, env, |sb| sb.build(slot))?;
        if keep != abi::build::FREE && keep != abi::build::KEEP {
            return Err((
                "concast_build",
                Fault::Abi(format!("concast_build returned {keep}, not 0 or 1")),
            ));
        }
        self.commit_emits(env);
        self.counters.builds += 1;
        self.counters.built_from += self.states.release_held(slot) as u64;
        if keep == abi::build::FREE {
            self.free_state(slot, env)?;
        }
        Ok(())
    }

    fn commit_emits(&mut self, env: &mut Env) {
        let sb = self.sandbox.as_deref_mut().expect("not quarantined");
        let cx = sb.ctx();
        for e in cx.emits.drain(..) {
            self.ident = self.ident.wrapping_add(1);
            let header = ipv4::Header {
                src: env.node,
                flow: self.key,
                protocol: e.protocol,
                ttl: e.ttl,
                dont_fragment: e.dont_fragment,
                ident: self.ident,
            };
            let payload = &cx.emit_bytes[e.start..e.end];
            env.out
                .push_with(self.key, env.now, OutputKind::Merged, |buf| {
                    ipv4::write_datagram(buf, &header, payload)
                });
            self.counters.out += 1;
            self.counters.out_bytes += (ipv4::HEADER_LEN + payload.len()) as u64;
        }
    }

    /// A state's timer expired.
    pub fn fire_timer(&mut self, slot: u32, env: &mut Env) {
        if self.sandbox.is_none() || !self.states.slot(slot).open {
            return;
        }
        self.states.slot_mut(slot).timer = None;
        self.counters.timer_fires += 1;
        let cx = self.cx();
        cx.now_us = env.now;
        cx.pending.clear();
        let r = if self.states.slot(slot).gated.is_some() {
            self.build(slot, env) // the gate's hold is over
        } else {
            self.state_call(slot, StateCall::Timeout, env, |sb| sb.timeout(slot))
                .and_then(|build| {
                    if build != 0 {
                        self.finish(slot, env)
                    } else {
                        Ok(())
                    }
                })
        };
        if let Err((call, fault)) = r {
            self.quarantine(call, fault, env);
        }
    }

    /// Charges CPU time the engine just spent on this flow; past its budget per second the
    /// flow is quarantined. A quarantined flow costs only forwarding and is not charged.
    pub fn charge_cpu(&mut self, used: std::time::Duration, env: &mut Env) {
        let Some(budget) = env.limits.cpu_per_second else { return };
        if self.sandbox.is_none() {
            return;
        }
        let r = self.cpu.charge(used, env.now, budget);
        self.counters.cpu_us = self.cpu.total.as_micros() as u64;
        if let Err(fault) = r {
            self.quarantine("engine", fault, env);
        }
    }

    /// Bytes of datagrams this flow's open states hold.
    pub fn held_bytes(&self) -> usize {
        self.states.held_bytes()
    }

    /// The node's buffer budget is spent and this flow holds most: its oldest state that
    /// holds anything is built now. Returns false when there is none to build.
    pub fn build_oldest(&mut self, env: &mut Env) -> bool {
        if self.sandbox.is_none() {
            return false;
        }
        let oldest = self
            .states
            .slots_in_order()
            .into_iter()
            .find(|&s| self.states.slot(s).held.count() > 0);
        let Some(slot) = oldest else { return false };
        self.cx().now_us = env.now;
        self.counters.budget_builds += 1;
        if let Err((call, fault)) = self.build(slot, env) {
            self.quarantine(call, fault, env);
        } else if self.states.slot(slot).open {
            self.states.requeue(slot); // kept: what it holds from now on is newer
        }
        true
    }

    /// Builds every open state now (flow removal, spec replacement).
    pub fn flush(&mut self, env: &mut Env) {
        if self.sandbox.is_none() {
            return;
        }
        let cx = self.cx();
        cx.now_us = env.now;
        cx.pending.clear();
        let slots = if self.ordered {
            self.states.slots_in_order()
        } else {
            self.states.open_slots()
        };
        for slot in slots {
            if !self.states.slot(slot).open {
                continue; // an ordered build took it along already
            }
            if let Err((call, fault)) = self.build(slot, env) {
                self.quarantine(call, fault, env);
                return;
            }
        }
    }

    /// Fail-open: records why, forwards every datagram the spec held or had not seen yet,
    /// and drops the sandbox. Other flows are untouched.
    pub fn quarantine(&mut self, call: &'static str, fault: Fault, env: &mut Env) {
        let Some(mut sb) = self.sandbox.take() else {
            return;
        };
        self.counters.traps += 1;
        self.quarantine = Some(Quarantine {
            call,
            fault,
            at_us: env.now,
        });
        let cx = sb.ctx();
        self.last_logs = cx.logs.iter().cloned().collect();
        let mut loose: Vec<Vec<u8>> = Vec::new();
        if self.current_loose {
            if let Some(span) = cx.pending.current() {
                loose.push(cx.pending.bytes(span).to_vec());
            }
            self.current_loose = false;
        }
        for span in cx.taken.drain(..) {
            loose.push(cx.pending.bytes(span).to_vec());
        }
        for (index, slot) in self.states.take_all().into_iter().enumerate() {
            if let Some(pos) = slot.timer {
                env.timers.cancel(
                    TimerKey {
                        flow: self.index,
                        slot: index as u32,
                    },
                    pos.tick,
                );
            }
            loose.extend(slot.held.iter().map(<[u8]>::to_vec));
        }
        let rest: Vec<_> = cx.pending.drain().collect();
        for span in rest {
            loose.push(cx.pending.bytes(span).to_vec());
        }
        for d in loose {
            self.forward(env, Unmerged::FailOpen, &d);
        }
    }

    /// Cancels this flow's timers (before it is removed).
    pub fn cancel_timers(&mut self, env: &mut Env) {
        for slot in self.states.open_slots() {
            self.disarm_timer(slot, env);
        }
    }
}
