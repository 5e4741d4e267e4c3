//! The per-packet work of routerd: classify each diverted frame, hand CSP to the CSP node and
//! concast datagrams to the merge engine, and write back what must go on (docs/protocol.md 4).

use std::collections::HashMap;
use std::net::Ipv4Addr;

use concast_csp::{codec, Action, Config as CspConfig, FlowId, Node, Role, Selector};
use concast_engine::{Engine, FlowConfig, OutputKind, Outputs, Unmerged};
use concast_wire::datagram::{classify, Datagram};
use concast_wire::ipv4::Packet;
use serde_json::{json, Value};

use crate::counters::Counters;
use crate::diversion::Diversion;
use crate::dataplane::Dataplane;
use crate::log::{emit, Level};

const ETH_HEADER: usize = 14;
const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];

/// Where frames go once handled: the CPU port in the daemon, a vector in tests.
pub trait Sink {
    fn frame(&mut self, frame: &[u8]);
}

impl Sink for Vec<Vec<u8>> {
    fn frame(&mut self, frame: &[u8]) {
        self.push(frame.to_vec());
    }
}

/// Whether activating a flow installs its diversion or finds it in place (a spec switch).
#[derive(Clone, PartialEq, Eq)]
enum Divert {
    Install,
    /// The flow's spec was replaced: its diversion stays as it was.
    Kept(Diversion),
}

/// One active concast flow at this router.
struct Active {
    engine: concast_engine::FlowSlot,
    selector: Selector,
    /// The engine quarantined the flow and the CSP node has been told.
    quarantined: bool,
    /// Whether the data plane diverts the flow here (a failed install is retried).
    diversion: Diversion,
}

pub struct Router {
    pub addr: Ipv4Addr,
    /// MACs for frames routerd originates: to the router, from routerd's end of the CPU port.
    router_mac: [u8; 6],
    cpu_mac: [u8; 6],
    pub node: Node,
    pub engine: Engine,
    dataplane: Box<dyn Dataplane>,
    flows: HashMap<FlowId, Active>,
    pub counters: Counters,
    out: Outputs,
    /// Per-batch grouping of concast datagrams by engine flow (indices into the batch), in
    /// the order the flows first appear; kept to reuse its allocations. A batch holds a few
    /// flows, so a scan beats hashing every datagram's slot.
    batches: Vec<(concast_engine::FlowSlot, Vec<usize>)>,
    csp_buf: Vec<u8>,
}

impl Router {
    pub fn new(
        addr: Ipv4Addr,
        router_mac: [u8; 6],
        cpu_mac: [u8; 6],
        csp: CspConfig,
        engine: Engine,
        dataplane: Box<dyn Dataplane>,
    ) -> Router {
        Router {
            addr,
            router_mac,
            cpu_mac,
            node: Node::new(addr, Role::Router, csp),
            engine,
            dataplane,
            flows: HashMap::new(),
            counters: Counters::default(),
            out: Outputs::new(),
            batches: Vec::new(),
            csp_buf: vec![0; codec::MAX_DATAGRAM],
        }
    }

    pub fn dataplane(&mut self) -> &mut dyn Dataplane {
        self.dataplane.as_mut()
    }

    fn ethernet(&self, datagram: &[u8], sink: &mut impl Sink, scratch: &mut Vec<u8>) {
        scratch.clear();
        scratch.extend_from_slice(&self.router_mac);
        scratch.extend_from_slice(&self.cpu_mac);
        scratch.extend_from_slice(&ETHERTYPE_IPV4);
        scratch.extend_from_slice(datagram);
        sink.frame(scratch);
    }

    /// Handles one batch of frames read from the CPU port.
    pub fn handle_batch<'a>(&mut self, now: u64, frames: impl Iterator<Item = &'a [u8]>, sink: &mut impl Sink) {
        let frames: Vec<&[u8]> = frames.collect();
        // The previous concast datagram's flow and what was found for it: a batch is mostly
        // runs of one flow, so the flow table is hashed once per run, not once per datagram.
        let mut last: Option<(FlowId, Option<(concast_engine::FlowSlot, bool)>)> = None;
        for (i, frame) in frames.iter().enumerate() {
            self.counters.frames_in += 1;
            if frame.len() < ETH_HEADER || frame[12..14] != ETHERTYPE_IPV4 {
                self.counters.count_malformed("not_ipv4_frame");
                continue;
            }
            let ip = &frame[ETH_HEADER..];
            let parsed = classify(ip);
            // A data plane may divert before anything checks the header checksum (tc runs
            // before Linux's IP input; OVS never checks): a corrupted header is dropped here.
            if parsed.is_ok() && !Packet::new_unchecked(ip).verify_checksum() {
                self.counters.count_malformed("bad_header_checksum");
                continue;
            }
            match parsed {
                Err(e) => {
                    // Counted and dropped: a malformed datagram must not crash or mislead.
                    self.counters.count_malformed(e.name());
                }
                Ok(Datagram::Csp { ip: hdr, message }) => {
                    // CSP can end or change a flow: the datagrams before it go first, or a
                    // LEAVE would overtake the data its sender sent ahead of it.
                    self.ingest_batches(now, &frames, sink);
                    last = None; // CSP may add, end or quarantine flows
                    self.counters.csp_in += 1;
                    let msg = codec::decode(&message);
                    // A fetched spec must load here before it is put in force or passed on
                    // (protocol.md 2.6-4): the engine validates and compiles it (and caches
                    // the compiled module for the Activate that follows).
                    let engine = &mut self.engine;
                    let mut check = |bytes: &[u8]| engine.load_spec(bytes).map(|_| ()).map_err(|e| e.to_string());
                    let actions = self.node.handle_checked(now, hdr.src_addr(), hdr.dst_addr(), msg, &mut check);
                    if actions.iter().any(|a| matches!(a, Action::Forward)) {
                        self.counters.passed_through += 1;
                        sink.frame(frame);
                    }
                    self.apply(now, actions, sink);
                    self.sync_children();
                }
                Ok(Datagram::Concast { ip: hdr, .. }) if hdr.is_fragment() => {
                    // concast never merges fragments (protocol.md 1.2): no spec sees them.
                    self.counters.fragments_passed += 1;
                    sink.frame(frame);
                }
                Ok(d @ (Datagram::Concast { .. } | Datagram::Mplex { .. })) => {
                    let flow = d.flow().expect("concast datagrams have a flow");
                    let flow = FlowId { receiver: flow.receiver, group: flow.group };
                    let found = match last {
                        Some((f, found)) if f == flow => found,
                        _ => {
                            let found = self.flows.get(&flow).map(|a| (a.engine, a.quarantined));
                            last = Some((flow, found));
                            found
                        }
                    };
                    match found {
                        Some((slot, false)) => {
                            self.counters.diverted += 1;
                            self.batch_of(slot).push(i);
                        }
                        Some(_) => {
                            self.counters.forwarded_unmerged += 1;
                            sink.frame(frame);
                        }
                        None => {
                            // No state here: behave like an oblivious router.
                            self.counters.passed_through += 1;
                            sink.frame(frame);
                        }
                    }
                }
                Ok(Datagram::Ipv4(hdr)) => {
                    if hdr.dst_addr() == self.addr {
                        self.counters.local_dropped += 1; // nothing but CSP is served here
                    } else if hdr.is_fragment() {
                        // A fragment of anything (CSP included: classify never reads a
                        // fragment as CSP) goes on at once, counted as such (protocol.md 1.2-11).
                        self.counters.fragments_passed += 1;
                        sink.frame(frame);
                    } else {
                        // Caught by a selector but not concast: back unchanged.
                        self.counters.passed_through += 1;
                        sink.frame(frame);
                    }
                }
            }
        }
        self.ingest_batches(now, &frames, sink);
    }

    /// Hands the concast datagrams gathered so far (`batches`, indices into `frames`) to the
    /// engine, one call per flow, and empties the batches.
    fn ingest_batches(&mut self, now: u64, frames: &[&[u8]], sink: &mut impl Sink) {
        // Flows with nothing since the last call are dropped: the list stays as short as a
        // batch's flows, however many flows come and go.
        self.batches.retain(|(_, v)| !v.is_empty());
        for k in 0..self.batches.len() {
            let (id, mut idx) = (self.batches[k].0, std::mem::take(&mut self.batches[k].1));
            let batch: Vec<&[u8]> = idx.iter().map(|&i| &frames[i][ETH_HEADER..]).collect();
            self.out.clear();
            if self.engine.ingest(id, &batch, now, &mut self.out).is_ok() {
                self.counters.merged_in += batch.len() as u64;
            } else {
                // The flow is gone from the engine: forward as is.
                for f in &batch {
                    self.counters.forwarded_unmerged += 1;
                    let mut scratch = Vec::with_capacity(f.len() + ETH_HEADER);
                    self.ethernet(f, sink, &mut scratch);
                }
            }
            self.flush_outputs(now, sink);
            idx.clear();
            self.batches[k].1 = idx;
        }
    }

    /// The indices gathered for engine flow `slot` in this batch.
    fn batch_of(&mut self, slot: concast_engine::FlowSlot) -> &mut Vec<usize> {
        let k = match self.batches.iter().position(|(s, _)| *s == slot) {
            Some(k) => k,
            None => {
                self.batches.push((slot, Vec::new()));
                self.batches.len() - 1
            }
        };
        &mut self.batches[k].1
    }

    /// Runs the CSP and engine timers due at `now`.
    pub fn tick(&mut self, now: u64, sink: &mut impl Sink) {
        let actions = self.node.poll(now);
        if !actions.is_empty() {
            self.apply(now, actions, sink);
            self.sync_children();
        }
        self.out.clear();
        self.engine.advance(now, &mut self.out);
        self.flush_outputs(now, sink);
        self.retry_diversions(now);
    }

    /// Tries again to install the diversions that failed and are due (docs/dataplane-bmv2.md
    /// "Arbitration": another P4Runtime client may have been primary).
    fn retry_diversions(&mut self, now: u64) {
        let due: Vec<FlowId> = self.flows.iter().filter(|(_, a)| a.diversion.due(now)).map(|(f, _)| *f).collect();
        for flow in due {
            let Some(selector) = self.flows.get(&flow).map(|a| a.selector) else { continue };
            let result = self.dataplane.divert(flow, selector).map_err(|e| e.to_string());
            let a = self.flows.get_mut(&flow).expect("due flow");
            a.diversion = a.diversion.after_retry(result, now);
            match &a.diversion {
                Diversion::Installed => {
                    self.counters.divert_retries_installed += 1;
                    emit(Level::Info, "divert_installed", &[("flow", &flow)]);
                }
                Diversion::Failed { error, attempts, .. } => {
                    self.counters.divert_failures += 1;
                    emit(Level::Error, "divert_failed", &[("flow", &flow), ("error", error), ("attempts", attempts)]);
                }
            }
        }
    }

    /// Tells the engine what CSP knows of each flow now: its children (specs such as `sum`
    /// forward once every child contributed) and its path MTU.
    fn sync_children(&mut self) {
        for f in self.node.flows() {
            if let Some(a) = self.flows.get(&f.flow) {
                let _ = self.engine.set_children(a.engine, f.children.len() as u32);
                if let Some(mtu) = f.path_mtu {
                    let _ = self.engine.set_path_mtu(a.engine, u32::from(mtu));
                }
            }
        }
    }

    /// The next time `tick` has work, in engine/CSP clock microseconds.
    pub fn next_deadline(&self) -> Option<u64> {
        let retry = self.flows.values().filter_map(|a| a.diversion.retry_at()).min();
        [self.node.next_deadline(), self.engine.next_deadline(), retry].into_iter().flatten().min()
    }

    /// A merged MplexPkt's delay fields, checked against its total budget (3.2-2).
    fn count_budget(&mut self, datagram: &[u8]) {
        let Ok(ip) = Packet::new_checked(datagram) else { return };
        if ip.protocol() != concast_wire::ipv4::protocol::MPLEX || ip.is_fragment() {
            return;
        }
        if let Ok(m) = concast_wire::mplex::Packet::new_checked(ip.payload()) {
            self.counters.count_mplex_sent(m.max_total_delay(), m.delayed_so_far());
        }
    }

    fn flush_outputs(&mut self, now: u64, sink: &mut impl Sink) {
        let mut scratch = Vec::with_capacity(2048);
        let mut fail_open = Vec::new();
        let out = std::mem::take(&mut self.out);
        for o in out.iter() {
            match o.kind {
                OutputKind::Merged => {
                    self.counters.merged_out += 1;
                    self.count_budget(o.datagram);
                }
                OutputKind::Unmerged(Unmerged::FailOpen) => {
                    self.counters.forwarded_unmerged += 1;
                    fail_open.push(o.flow);
                }
                OutputKind::Unmerged(_) => self.counters.forwarded_unmerged += 1,
            }
            self.ethernet(o.datagram, sink, &mut scratch);
        }
        self.out = out;
        fail_open.dedup();
        for k in fail_open {
            self.check_quarantine(now, FlowId { receiver: k.receiver, group: k.group }, sink);
        }
    }

    /// Reports a flow the engine quarantined to the CSP node (once).
    fn check_quarantine(&mut self, now: u64, flow: FlowId, sink: &mut impl Sink) {
        let Some(a) = self.flows.get_mut(&flow) else { return };
        if a.quarantined {
            return;
        }
        let Some(q) = self.engine.stats(a.engine).and_then(|s| s.quarantine) else { return };
        a.quarantined = true;
        self.counters.quarantined_flows += 1;
        let reason = q.to_string();
        emit(Level::Warn, "flow_quarantined", &[("flow", &flow), ("reason", &reason)]);
        self.quarantine_flow(now, flow, &reason, sink);
    }

    /// CSP learns the flow is quarantined (it tells the children), and so does R.
    fn quarantine_flow(&mut self, now: u64, flow: FlowId, reason: &str, sink: &mut impl Sink) {
        let mut actions = self.node.quarantine(flow, reason);
        // The receiver uploaded the spec: it hears that the spec failed here, not only the
        // children the CSP node tells (it is not a router's child, and no ERROR on the way
        // up is intercepted, so this reaches R's hostd unchanged).
        let err = concast_csp::Msg::error(flow, 0, concast_csp::ErrorCode::FlowQuarantined, 0, reason);
        actions.push(Action::Send { to: flow.receiver, msg: err });
        self.apply(now, actions, sink);
    }

    fn apply(&mut self, now: u64, actions: Vec<Action>, sink: &mut impl Sink) {
        let mut scratch = Vec::with_capacity(2048);
        for a in actions {
            match a {
                Action::Send { to, msg } => {
                    let mut buf = std::mem::take(&mut self.csp_buf);
                    match codec::encode(self.addr, to, &msg, &mut buf) {
                        Ok(n) => {
                            self.counters.csp_out += 1;
                            self.ethernet(&buf[..n], sink, &mut scratch);
                        }
                        Err(e) => emit(Level::Error, "csp_encode_failed", &[("error", &format!("{e:?}"))]),
                    }
                    self.csp_buf = buf;
                }
                Action::Forward => {} // handled where the frame is at hand
                Action::Activate { flow, selector, hash } => self.activate(now, flow, selector, hash, sink),
                Action::SwitchSpec { flow, hash } => {
                    // Only the engine's flow is replaced: an active flow's diversion stays as it
                    // is (same R and selector), so it is not installed again.
                    let active = self.flows.get(&flow).map(|a| a.selector);
                    let kept = self.flows.get(&flow).map(|a| a.diversion.clone());
                    self.deactivate(now, flow, false, sink);
                    let divert = match kept {
                        Some(d) => Divert::Kept(d),
                        None => Divert::Install,
                    };
                    self.activate_with(now, flow, active.unwrap_or_default(), hash, Vec::new(), divert, sink);
                }
                Action::Deactivate { flow } => self.deactivate(now, flow, true, sink),
                Action::Fallback { .. } => {} // sender-only
                Action::Log { text } => emit(Level::Info, "csp", &[("msg", &text)]),
            }
        }
    }

    /// Installs a flow without CSP (benchmarks; data planes programmed by hand): `spec` is
    /// loaded into the store and the engine as if a JOIN_ACK had named it.
    /// `params` is the text a receiver would give (the spec's `flow_params`).
    pub fn add_static_flow(&mut self, now: u64, flow: FlowId, selector: Selector, spec: Vec<u8>, params: &[u8]) -> Result<(), String> {
        let hash = self.node.store.insert(spec);
        let mut sink: Vec<Vec<u8>> = Vec::new();
        self.activate_with(now, flow, selector, hash, params.to_vec(), Divert::Install, &mut sink);
        if self.flows.contains_key(&flow) {
            Ok(())
        } else {
            Err(format!("flow {flow}: the spec was rejected (see the log)"))
        }
    }

    fn activate(&mut self, now: u64, flow: FlowId, selector: Selector, hash: [u8; 32], sink: &mut impl Sink) {
        self.activate_with(now, flow, selector, hash, Vec::new(), Divert::Install, sink)
    }

    #[allow(clippy::too_many_arguments)]
    fn activate_with(&mut self, now: u64, flow: FlowId, selector: Selector, hash: [u8; 32], params: Vec<u8>, divert: Divert, sink: &mut impl Sink) {
        let result = self
            .node
            .store
            .get(&hash)
            .ok_or_else(|| "spec missing from the store".to_string())
            .and_then(|bytes| self.engine.load_spec(&bytes).map_err(|e| e.to_string()))
            .and_then(|spec| {
                let mut cfg = FlowConfig { params, ..FlowConfig::new(flow, spec) };
                // The spec sizes its buffers at init: give it the path MTU CSP learned.
                if let Some(mtu) = self.node.path_mtu(flow) {
                    cfg.path_mtu = u32::from(mtu);
                }
                self.engine.add_flow(cfg, now).map_err(|e| e.to_string())
            });
        match result {
            Ok(id) => {
                let diversion = match divert {
                    Divert::Kept(d) => d,
                    Divert::Install => {
                        let result = self.dataplane.divert(flow, selector).map_err(|e| e.to_string());
                        if let Err(e) = &result {
                            self.counters.divert_failures += 1;
                            emit(Level::Error, "divert_failed", &[("flow", &flow), ("error", e), ("attempts", &1)]);
                        }
                        Diversion::after_first_try(result, now)
                    }
                };
                self.flows.insert(flow, Active { engine: id, selector, quarantined: false, diversion });
                self.counters.flows_activated += 1;
                emit(Level::Info, "flow_active", &[("flow", &flow), ("spec", &hex(&hash[..6])), ("selector", &format!("{}/{}", selector.proto, selector.dport))]);
            }
            Err(reason) => {
                // A spec that does not load quarantines its flow: datagrams go on unmerged.
                emit(Level::Warn, "spec_rejected", &[("flow", &flow), ("reason", &reason)]);
                self.counters.quarantined_flows += 1;
                self.quarantine_flow(now, flow, &format!("spec rejected: {reason}"), sink);
            }
        }
    }

    fn deactivate(&mut self, now: u64, flow: FlowId, undivert: bool, sink: &mut impl Sink) {
        let Some(a) = self.flows.remove(&flow) else { return };
        self.out.clear();
        let _ = self.engine.remove_flow(a.engine, now, &mut self.out);
        self.flush_outputs(now, sink);
        if undivert {
            if let Err(e) = self.dataplane.undivert(flow) {
                emit(Level::Error, "undivert_failed", &[("flow", &flow), ("error", &e)]);
            }
        }
        emit(Level::Info, "flow_removed", &[("flow", &flow)]);
    }

    // ------------------------------------------------------------------ management

    pub fn status(&self) -> Value {
        json!({
            "node": self.addr.to_string(),
            "role": "router",
            "dataplane": self.dataplane.describe(),
            "flows": self.flows.len(),
            "flows_not_diverted": self.flows_not_diverted(),
            "csp_flows": self.node.flows().len(),
            "specs_cached": self.node.store.len(),
            "counters": self.counters.to_json(),
            "csp": self.csp_counters(),
        })
    }

    /// Spec offers refused (docs/protocol.md 2.9), stray chunks, LEAVEs for unknown flows.
    fn csp_counters(&self) -> Value {
        let c = &self.node.counters;
        json!({
            "specs_rejected": c.specs_rejected,
            "chunks_unsolicited": c.chunks_unsolicited,
            "unknown_flow": c.unknown_flow,
        })
    }

    pub fn flows_json(&self) -> Value {
        let flows: Vec<Value> = self
            .node
            .flows()
            .into_iter()
            .map(|f| {
                let engine = self.flows.get(&f.flow).and_then(|a| self.engine.stats(a.engine));
                let diversion = self.flows.get(&f.flow).map(|a| &a.diversion);
                // A flow whose diversion is not in the data plane is not merging: not "active".
                let state = match diversion {
                    Some(Diversion::Failed { .. }) => "divert_failed".to_string(),
                    _ => f.state.to_string(),
                };
                json!({
                    "receiver": f.flow.receiver.to_string(),
                    "group": f.flow.group,
                    "state": state,
                    "diversion": diversion.map(Diversion::to_json),
                    "upstream": f.upstream.map(|u| u.to_string()),
                    "children": f.children.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
                    "spec": hex(&f.hash),
                    "path_mtu": f.path_mtu,
                    "engine": engine.map(|s| json!({
                        "counters": engine_counters(&s.counters),
                        "open_states": s.open_states,
                        "held_bytes": s.held_bytes,
                        "memory_bytes": s.memory_bytes,
                        "quarantine": s.quarantine.map(|q| q.to_string()),
                    })),
                })
            })
            .collect();
        json!({ "node": self.addr.to_string(), "flows": flows })
    }

    /// Active flows whose diversion failed and is being retried.
    pub fn flows_not_diverted(&self) -> usize {
        self.flows.values().filter(|a| !a.diversion.is_installed()).count()
    }

    pub fn answer(&self, command: &str) -> Value {
        match command {
            "status" => self.status(),
            "flows" => self.flows_json(),
            "stats" => json!({
                "node": self.addr.to_string(),
                "counters": self.counters.to_json(),
                "flows_not_diverted": self.flows_not_diverted(),
                "csp": self.csp_counters(),
                "buffer": { "held_bytes": self.engine.held_bytes(),
                            "budget_bytes": self.engine.config().node_buffer_bytes },
                "engine": serde_json::to_value(self.engine.pool_stats()).expect("pool stats serialize"),
            }),
            other => json!({ "error": format!("unknown command {other:?}: try status, flows or stats") }),
        }
    }
}

/// A flow's merge-engine counters as JSON, under their field names.
fn engine_counters(c: &concast_engine::FlowCounters) -> Value {
    serde_json::to_value(c).expect("counters serialize")
}

pub use concast_wire::hex;
