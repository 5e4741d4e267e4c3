//! The per-event work of hostd, without sockets or clocks (like routerd's `Router`): CSP in,
//! captured datagrams in, API requests in; datagrams out through a [`Wire`], events out to
//! API clients. The daemon feeds it real packets and time; the tests feed it bytes.

use std::collections::BTreeSet;
use std::io;
use std::net::Ipv4Addr;

use concast_csp::{codec, Action, Body, Config as CspConfig, ErrorCode, FlowId, Node, Role, Selector, SpecHash};
use concast_engine::{Engine, EngineConfig, FlowConfig, OutputKind, Outputs};
use concast_daemon::log::{emit, Level};
use concast_wire::datagram::{classify, Datagram};
use concast_wire::ipv4::protocol;
use serde_json::{json, Value};

use crate::api::{ClientId, Request};
use crate::counters::Counters;
use crate::receiver::{self, Kind, Receiver, Served, Subscription};
use crate::sender::{self, Phase, Route, Senders};
use crate::udp::{self, Addressing};
use crate::hex;

/// Where datagrams hostd sends go: the raw socket in the daemon, a vector in tests.
pub trait Wire {
    fn send(&mut self, datagram: &[u8]) -> io::Result<()>;
}

impl Wire for Vec<Vec<u8>> {
    fn send(&mut self, datagram: &[u8]) -> io::Result<()> {
        self.push(datagram.to_vec());
        Ok(())
    }
}

/// A line of JSON for one API client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub client: ClientId,
    pub line: String,
}

/// A join's fate, as [`Host`] reports it to the multiplex module (`mplex.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowChange {
    Active(FlowId),
    Fallback(FlowId, String),
}

pub struct Host {
    addr: Ipv4Addr,
    pub node: Node,
    /// Created on first use, so a host that merges nothing runs no engine (nor its ticker).
    engine: Option<Engine>,
    engine_cfg: EngineConfig,
    pub senders: Senders,
    pub receiver: Receiver,
    pub counters: Counters,
    events: Vec<Event>,
    /// Joins that became active or fell back, for the multiplex module (daemon).
    flow_changes: Vec<FlowChange>,
    out: Outputs,
    csp_buf: Vec<u8>,
    /// Per group, the IPv4 sources of the datagrams the final merge took in since its last
    /// delivery: the nodes the merged datagram came from on the wire (its own source is R).
    wire_from: std::collections::HashMap<u32, BTreeSet<Ipv4Addr>>,
}

fn engine_of<'a>(slot: &'a mut Option<Engine>, cfg: &EngineConfig) -> Result<&'a mut Engine, String> {
    if slot.is_none() {
        *slot = Some(Engine::new(cfg.clone()).map_err(|e| e.to_string())?);
    }
    Ok(slot.as_mut().expect("just created"))
}

impl Host {
    pub fn new(addr: Ipv4Addr, csp: CspConfig, engine_cfg: EngineConfig) -> Host {
        let mut node = Node::new(addr, Role::Host, csp);
        // hostd runs in its host's namespace: the kernel's routes name the links (path MTU,
        // docs/protocol.md 2.3).
        node.set_link_mtu(Box::new(concast_daemon::linkmtu::route_mtu));
        Host {
            addr,
            node,
            engine: None,
            engine_cfg: EngineConfig { node: addr, ..engine_cfg },
            senders: Senders::default(),
            receiver: Receiver::default(),
            counters: Counters::default(),
            events: Vec::new(),
            flow_changes: Vec::new(),
            out: Outputs::new(),
            csp_buf: vec![0; codec::MAX_DATAGRAM],
            wire_from: Default::default(),
        }
    }

    /// The merge engine's allocator and pool counters (null before the first merge flow).
    fn engine_stats(&self) -> Value {
        self.engine.as_ref().map_or(Value::Null, |e| serde_json::to_value(e.pool_stats()).expect("pool stats serialize"))
    }

    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    pub fn take_flow_changes(&mut self) -> Vec<FlowChange> {
        std::mem::take(&mut self.flow_changes)
    }

    fn tell(&mut self, clients: impl IntoIterator<Item = ClientId>, line: &str) {
        for client in clients {
            self.events.push(Event { client, line: line.to_string() });
        }
    }

    /// The earliest time `tick` has work.
    pub fn next_deadline(&self) -> Option<u64> {
        [self.node.next_deadline(), self.engine.as_ref().and_then(Engine::next_deadline)].into_iter().flatten().min()
    }

    pub fn wanted_ports(&self) -> BTreeSet<u16> {
        self.receiver.wanted_ports()
    }

    // ------------------------------------------------------------------ from the network

    /// One datagram from the protocol-253 raw socket.
    pub fn on_csp(&mut self, now: u64, datagram: &[u8], wire: &mut dyn Wire) {
        let (src, dst, msg) = match classify(datagram) {
            Err(e) => return self.counters.count_malformed(e.name()),
            Ok(Datagram::Csp { ip, message }) => (ip.src_addr(), ip.dst_addr(), codec::decode(&message)),
            // A fragment of protocol 253 is never CSP (protocol.md 1.2): nothing to do with it.
            Ok(_) => return self.counters.count_malformed("csp_fragment"),
        };
        self.counters.csp_in += 1;
        self.note_csp(src, &msg);
        let actions = self.node.handle(now, src, dst, msg);
        self.apply(now, actions, wire);
        self.sync_children();
    }

    /// What hostd itself learns from a CSP message before the node handles it.
    fn note_csp(&mut self, src: Ipv4Addr, msg: &concast_csp::Msg) {
        match &msg.body {
            // A child's selector names the port its datagrams will arrive on: hold it.
            Body::Join(b) | Body::Refresh(b)
                if msg.flow.receiver == self.addr
                    && self.receiver.served.contains_key(&msg.flow.group)
                    && b.selector.proto == protocol::UDP
                    && b.selector.dport != 0 =>
            {
                self.receiver.selector_ports.insert(b.selector.dport);
            }
            // The node only logs these; the application should hear that routers stopped merging.
            Body::Error { code, reason, .. } if *code == ErrorCode::FlowQuarantined as u16 => {
                if let Some(f) = self.senders.flows.get(&msg.flow) {
                    let line = sender::flow_event("upstream_quarantined", &msg.flow, json!({"by": src.to_string(), "reason": reason}));
                    let watchers: Vec<ClientId> = f.watchers.iter().copied().collect();
                    self.tell(watchers, &line);
                } else if msg.flow.receiver == self.addr && self.receiver.served.contains_key(&msg.flow.group) {
                    // A router stopped merging a group served here: the receiver that
                    // uploaded the spec learns it, once per router report.
                    self.counters.upstream_quarantines += 1;
                    let group = msg.flow.group;
                    emit(Level::Warn, "router_quarantined", &[("group", &group), ("by", &src), ("reason", reason)]);
                    let line = receiver::group_event("upstream_quarantined", group, json!({"by": src.to_string(), "reason": reason}));
                    let subs = self.receiver.subscribers(group);
                    self.tell(subs, &line);
                }
            }
            _ => {}
        }
    }

    /// One datagram from the UDP raw socket (everything UDP addressed to this host).
    pub fn on_capture(&mut self, now: u64, datagram: &[u8], wire: &mut dyn Wire) {
        match classify(datagram) {
            Err(e) => self.counters.count_malformed(e.name()),
            Ok(Datagram::Concast { ip, group }) if ip.dst_addr() == self.addr => {
                if ip.protocol() == protocol::UDP && udp::View::parse(ip.payload()).is_none() {
                    return self.counters.count_malformed("udp_truncated");
                }
                self.counters.concast_in += 1;
                self.final_merge(now, group, datagram, wire);
            }
            Ok(Datagram::Ipv4(ip)) if ip.dst_addr() == self.addr && ip.protocol() == protocol::UDP => {
                let Some(u) = udp::View::parse(ip.payload()) else {
                    return self.counters.count_malformed("udp_truncated");
                };
                let subs = self.receiver.port_subscribers(u.dport);
                if subs.is_empty() {
                    return; // some other application's datagram: the kernel delivers it
                }
                self.counters.plain_in += 1;
                self.counters.delivered += 1;
                for (client, group) in subs {
                    let line = receiver::datagram_event(group, Kind::Plain, datagram, &[]);
                    self.events.push(Event { client, line });
                }
            }
            Ok(_) => {} // broadcast, or not UDP: not ours
        }
    }

    /// R's own merge of an arriving concast datagram, then delivery to the group's subscribers.
    fn final_merge(&mut self, now: u64, group: u32, datagram: &[u8], wire: &mut dyn Wire) {
        let Some(id) = self.receiver.served.get(&group).map(|s| s.engine) else {
            return self.deliver(group, Kind::NoSpec, datagram, &[]);
        };
        let src = concast_wire::ipv4::Packet::new_unchecked(datagram).src_addr();
        self.wire_from.entry(group).or_default().insert(src);
        let engine = self.engine.as_mut().expect("a served group has an engine flow");
        self.out.clear();
        match engine.ingest(id, &[datagram], now, &mut self.out) {
            Ok(()) => self.counters.final_merge_in += 1,
            Err(_) => return self.deliver(group, Kind::FailOpen, datagram, &[]),
        }
        // Timers of other flows may have fired first: their outputs need the wire.
        self.flush_outputs(wire);
        self.check_quarantine();
    }

    fn deliver(&mut self, group: u32, kind: Kind, datagram: &[u8], from: &[Ipv4Addr]) {
        let subs = self.receiver.subscribers(group);
        if subs.is_empty() {
            self.counters.undelivered += 1;
            return;
        }
        self.counters.delivered += 1;
        let line = receiver::datagram_event(group, kind, datagram, from);
        self.tell(subs, &line);
    }

    // ------------------------------------------------------------------ timers

    pub fn tick(&mut self, now: u64, wire: &mut dyn Wire) {
        let actions = self.node.poll(now);
        if !actions.is_empty() {
            self.apply(now, actions, wire);
            self.sync_children();
        }
        if let Some(engine) = self.engine.as_mut() {
            self.out.clear();
            engine.advance(now, &mut self.out);
            self.flush_outputs(wire);
            self.check_quarantine();
        }
    }

    /// Sends or delivers what the engine produced: outputs of this host's own flows (R = this
    /// host) go to subscribers, the rest (sender-side merging) onto the wire.
    fn flush_outputs(&mut self, wire: &mut dyn Wire) {
        let out = std::mem::take(&mut self.out);
        for o in out.iter() {
            if o.flow.receiver == self.addr {
                if o.kind == OutputKind::Merged {
                    self.counters.final_merge_out += 1;
                }
                let from: Vec<Ipv4Addr> = self.wire_from.remove(&o.flow.group)
                    .map(|s| s.into_iter().collect()).unwrap_or_default();
                self.deliver(o.flow.group, Kind::from_output(o.kind), o.datagram, &from);
                continue;
            }
            if o.kind == OutputKind::Merged {
                self.counters.merged_out += 1;
            }
            match wire.send(o.datagram) {
                Ok(()) => self.counters.data_out += 1,
                Err(e) => {
                    self.counters.send_errors += 1;
                    emit(Level::Error, "send_failed", &[("flow", &o.flow), ("error", &e)]);
                }
            }
        }
        self.out = out;
    }

    /// Tells the watchers of each flow the engine quarantined since the last look (once).
    fn check_quarantine(&mut self) {
        let Some(engine) = self.engine.as_ref() else { return };
        let mut found: Vec<(Option<FlowId>, u32, String)> = Vec::new();
        for (flow, s) in self.senders.flows.iter_mut() {
            if let (Some(id), false) = (s.engine, s.quarantined) {
                if let Some(q) = engine.stats(id).and_then(|st| st.quarantine) {
                    s.quarantined = true;
                    found.push((Some(*flow), flow.group, q.to_string()));
                }
            }
        }
        for (group, s) in self.receiver.served.iter_mut() {
            if !s.quarantined {
                if let Some(q) = engine.stats(s.engine).and_then(|st| st.quarantine) {
                    s.quarantined = true;
                    found.push((None, *group, q.to_string()));
                }
            }
        }
        for (flow, group, reason) in found {
            self.counters.quarantined_flows += 1;
            match flow {
                Some(flow) => {
                    emit(Level::Warn, "flow_quarantined", &[("flow", &flow), ("reason", &reason)]);
                    let line = sender::flow_event("quarantined", &flow, json!({"reason": reason, "where": "here"}));
                    let watchers: Vec<ClientId> = self.senders.flows[&flow].watchers.iter().copied().collect();
                    self.tell(watchers, &line);
                }
                None => {
                    emit(Level::Warn, "final_merge_quarantined", &[("group", &group), ("reason", &reason)]);
                    let line = receiver::group_event("quarantined", group, json!({"reason": reason, "where": "here"}));
                    let subs = self.receiver.subscribers(group);
                    self.tell(subs, &line);
                }
            }
        }
    }

    // ------------------------------------------------------------------ CSP actions

    fn apply(&mut self, now: u64, actions: Vec<Action>, wire: &mut dyn Wire) {
        for a in actions {
            match a {
                Action::Send { to, msg } => self.send_csp(to, &msg, wire),
                Action::Forward => {} // a host only gets its own messages
                Action::Activate { flow, hash, .. } => self.activate(now, flow, hash),
                Action::SwitchSpec { flow, hash } => {
                    self.stop_merging(now, flow, wire);
                    self.activate(now, flow, hash);
                }
                Action::Deactivate { flow } => self.stop_merging(now, flow, wire),
                Action::Fallback { flow, reason } => self.fall_back(flow, reason),
                Action::Log { text } => emit(Level::Info, "csp", &[("msg", &text)]),
            }
        }
    }

    fn send_csp(&mut self, to: Ipv4Addr, msg: &concast_csp::Msg, wire: &mut dyn Wire) {
        let n = match codec::encode(self.addr, to, msg, &mut self.csp_buf) {
            Ok(n) => n,
            Err(e) => return emit(Level::Error, "csp_encode_failed", &[("error", &format!("{e:?}"))]),
        };
        match wire.send(&self.csp_buf[..n]) {
            Ok(()) => self.counters.csp_out += 1,
            Err(e) => emit(Level::Error, "csp_send_failed", &[("to", &to), ("error", &e)]),
        }
    }

    /// The flow's spec is in force: run it here too (sender-side merging).
    fn activate(&mut self, now: u64, flow: FlowId, hash: SpecHash) {
        let started = self
            .node
            .store
            .get(&hash)
            .ok_or_else(|| "spec missing from the store".to_string())
            .and_then(|bytes| {
                let engine = engine_of(&mut self.engine, &self.engine_cfg)?;
                let spec = engine.load_spec(&bytes).map_err(|e| format!("spec rejected here: {e}"))?;
                let mut cfg = FlowConfig::new(flow, spec);
                if let Some(mtu) = self.node.path_mtu(flow) {
                    cfg.path_mtu = u32::from(mtu); // sender-side bundles fit the path too
                }
                engine.add_flow(cfg, now).map_err(|e| format!("spec did not start here: {e}"))
            });
        let Some(s) = self.senders.get_mut(&flow) else { return };
        let switched = s.phase == Phase::Joined;
        s.phase = Phase::Joined;
        s.hash = hash;
        s.quarantined = false;
        let (engine, problem) = match started {
            Ok(id) => (Some(id), None),
            Err(e) => (None, Some(e)),
        };
        s.engine = engine;
        s.problem = problem.clone();
        let watchers: Vec<ClientId> = s.watchers.iter().copied().collect();
        if let Some(p) = &problem {
            emit(Level::Warn, "sender_spec_unusable", &[("flow", &flow), ("reason", p)]);
        }
        emit(Level::Info, "flow_joined", &[("flow", &flow), ("spec", &hex(&hash[..6])), ("merging_here", &engine.is_some())]);
        let name = if switched { "spec_changed" } else { "active" };
        self.flow_changes.push(FlowChange::Active(flow));
        let line = sender::flow_event(name, &flow, json!({"spec": hex(&hash), "merging_here": engine.is_some(), "problem": problem}));
        self.tell(watchers, &line);
    }

    /// Stops this host's merging of a sender flow; what the spec held goes out first.
    fn stop_merging(&mut self, now: u64, flow: FlowId, wire: &mut dyn Wire) {
        let Some(id) = self.senders.get_mut(&flow).and_then(|s| s.engine.take()) else { return };
        if let Some(engine) = self.engine.as_mut() {
            self.out.clear();
            let _ = engine.remove_flow(id, now, &mut self.out);
            self.flush_outputs(wire);
        }
    }

    fn fall_back(&mut self, flow: FlowId, reason: String) {
        let Some(s) = self.senders.get_mut(&flow) else { return };
        s.phase = Phase::Unicast { reason: reason.clone() };
        let watchers: Vec<ClientId> = s.watchers.iter().copied().collect();
        self.counters.fallbacks += 1;
        self.flow_changes.push(FlowChange::Fallback(flow, reason.clone()));
        emit(Level::Warn, "fallback", &[("flow", &flow), ("reason", &reason)]);
        let line = sender::flow_event("fallback", &flow, json!({"reason": reason, "now_sending": "plain UDP, no Concast ID option"}));
        self.tell(watchers, &line);
    }

    /// Tells the final merge of each served group how many children it has (the `sum` spec's
    /// default fan-in).
    fn sync_children(&mut self) {
        let Some(engine) = self.engine.as_mut() else { return };
        if self.receiver.served.is_empty() {
            return;
        }
        for f in self.node.flows() {
            if f.role == "receiver" {
                if let Some(s) = self.receiver.served.get(&f.flow.group) {
                    let _ = engine.set_children(s.engine, f.children.len() as u32);
                }
            }
        }
    }

    fn children_of(&self, group: u32) -> usize {
        self.node.flows().iter().find(|f| f.role == "receiver" && f.flow.group == group).map_or(0, |f| f.children.len())
    }

    // ------------------------------------------------------------------ API

    /// Carries out one checked request from `client`; the reply's `ok` and fields, or the
    /// error message.
    pub fn request(&mut self, now: u64, client: ClientId, req: Request, wire: &mut dyn Wire) -> Result<Value, String> {
        self.counters.api_requests += 1;
        let result = match req {
            Request::Join { flow, selector } => self.join(now, client, flow, selector, wire),
            Request::Leave { flow } => self.leave(now, flow, wire),
            Request::Send { flow, sport, dport, ttl, payload } => {
                let a = Addressing { src: self.addr, dst: flow.receiver, ttl, sport, dport };
                self.send(now, flow, &a, &payload, wire)
            }
            Request::InstallSpec { group, spec } => self.install_spec(now, group, spec, wire),
            Request::RemoveSpec { group } => self.remove_spec(now, group, wire),
            Request::Subscribe { group, port } => {
                self.receiver.subscribe(Subscription { client, group, port });
                let spec = self.receiver.served.get(&group).map(|s| hex(&s.hash));
                Ok(json!({"group": group, "port": port, "spec": spec}))
            }
            Request::Unsubscribe { group } => Ok(json!({"group": group, "was_subscribed": self.receiver.unsubscribe(client, group)})),
            Request::Status => Ok(self.status()),
            Request::Flows => Ok(self.flows_json()),
            Request::Stats => Ok(json!({"node": self.addr.to_string(), "counters": self.counters.to_json(),
                                        "engine": self.engine_stats()})),
            Request::Mplex(_) => Err("the multiplex module runs in the daemon, not in Host".into()),
        };
        if result.is_err() {
            self.counters.api_errors += 1;
        }
        result
    }

    /// An API request that could not be parsed (counted like a failed one).
    pub fn refused(&mut self, is_send: bool) {
        self.counters.api_requests += 1;
        self.counters.api_errors += 1;
        if is_send {
            self.counters.app_rejected += 1;
        }
    }

    pub fn client_gone(&mut self, client: ClientId) {
        self.senders.forget_client(client);
        self.receiver.forget_client(client);
    }

    pub fn join(&mut self, now: u64, client: ClientId, flow: FlowId, selector: Selector, wire: &mut dyn Wire) -> Result<Value, String> {
        if let Some(s) = self.senders.get_mut(&flow) {
            if s.selector != selector {
                return Err(format!(
                    "already joined {flow} with selector {}/{}; leave it first to change the selector",
                    s.selector.proto, s.selector.dport
                ));
            }
            if !matches!(s.phase, Phase::Unicast { .. }) {
                s.watchers.insert(client);
                let state = s.state_name();
                return Ok(json!({"state": state, "flow": s.to_json(&flow)}));
            }
            // Fell back earlier: joining again is a fresh attempt.
            let actions = self.node.leave(flow);
            self.apply(now, actions, wire);
            self.senders.flows.remove(&flow);
        }
        self.senders.insert(flow, selector, client);
        let actions = self.node.join(now, flow, selector);
        self.apply(now, actions, wire);
        emit(Level::Info, "join", &[("flow", &flow), ("selector", &format!("{}/{}", selector.proto, selector.dport))]);
        Ok(json!({"state": "joining"}))
    }

    pub fn leave(&mut self, now: u64, flow: FlowId, wire: &mut dyn Wire) -> Result<Value, String> {
        if !self.senders.flows.contains_key(&flow) {
            return Err(format!("not joined to {flow}"));
        }
        // Held contributions first, then LEAVE (docs/protocol.md 2.4).
        self.stop_merging(now, flow, wire);
        let actions = self.node.leave(flow);
        self.apply(now, actions, wire);
        self.senders.flows.remove(&flow);
        emit(Level::Info, "leave", &[("flow", &flow)]);
        Ok(json!({"left": true}))
    }

    /// One application datagram: merged here, sent unmerged, or sent as plain UDP; the reply
    /// says which. An error reply means it was not sent at all.
    fn send(&mut self, now: u64, flow: FlowId, a: &Addressing, payload: &[u8], wire: &mut dyn Wire) -> Result<Value, String> {
        let route = self.senders.route(&flow);
        if let Route::Merge(id) = route {
            let d = udp::concast_datagram(a, flow.group, payload);
            let engine = self.engine.as_mut().expect("a merging flow has an engine");
            self.out.clear();
            if engine.ingest(id, &[d.as_slice()], now, &mut self.out).is_ok() {
                self.counters.app_merging += 1;
                self.flush_outputs(wire);
                self.check_quarantine();
                return Ok(json!({"sent": "merging"}));
            }
        }
        let (d, how, why) = match route {
            Route::Plain => (udp::plain_datagram(a, payload), "plain", None),
            Route::Unmerged(why) => (udp::concast_datagram(a, flow.group, payload), "unmerged", Some(why)),
            Route::Merge(_) => (udp::concast_datagram(a, flow.group, payload), "unmerged", Some("engine flow gone")),
        };
        if let Err(e) = wire.send(&d) {
            self.counters.app_rejected += 1;
            return Err(format!("not sent: the raw socket refused the datagram: {e}"));
        }
        self.counters.data_out += 1;
        match how {
            "plain" => self.counters.app_plain += 1,
            _ => self.counters.app_unmerged += 1,
        }
        Ok(json!({"sent": how, "why": why}))
    }

    /// A one-record MplexPkt the multiplex module captured toward `flow.receiver` (paper
    /// 4.2.1: the merge is applied first at the sending machine). While the flow's spec runs
    /// here it goes into this host's merge engine, which bundles it with the host's other
    /// captured datagrams toward R exactly as a router would; otherwise it is sent as it is.
    /// False if it was not sent (the original then goes out plain).
    pub fn forward_mplex(&mut self, now: u64, flow: FlowId, pkt: &[u8], wire: &mut dyn Wire) -> bool {
        if let Route::Merge(id) = self.senders.route(&flow) {
            let engine = self.engine.as_mut().expect("a merging flow has an engine");
            self.out.clear();
            if engine.ingest(id, &[pkt], now, &mut self.out).is_ok() {
                self.counters.mplex_bundling += 1;
                self.flush_outputs(wire);
                self.check_quarantine();
                return true;
            }
        }
        let sent = wire.send(pkt).is_ok();
        if sent {
            self.counters.data_out += 1;
        }
        sent
    }

    /// Sends now whatever this host's engine holds for `flow` (a datagram of it is about to
    /// go out plain and must not overtake them).
    pub fn flush_mplex(&mut self, now: u64, flow: FlowId, wire: &mut dyn Wire) {
        let Route::Merge(id) = self.senders.route(&flow) else { return };
        let engine = self.engine.as_mut().expect("a merging flow has an engine");
        self.out.clear();
        if engine.flush_flow(id, now, &mut self.out).is_ok() {
            self.flush_outputs(wire);
        }
    }

    /// The engine counters of a sender flow whose spec runs here.
    pub fn sender_engine_counters(&self, flow: &FlowId) -> Option<concast_engine::FlowCounters> {
        let id = self.senders.flows.get(flow)?.engine?;
        Some(self.engine.as_ref()?.stats(id)?.counters)
    }

    /// Serves `group` with `spec` (or replaces the spec in force: children get SPEC_UPDATE and
    /// the final merge switches; what the old spec held is delivered first).
    pub fn install_spec(&mut self, now: u64, group: u32, spec: Vec<u8>, wire: &mut dyn Wire) -> Result<Value, String> {
        let flow = FlowId { receiver: self.addr, group };
        let children = self.children_of(group);
        let engine = engine_of(&mut self.engine, &self.engine_cfg)?;
        let loaded = engine.load_spec(&spec).map_err(|e| format!("spec rejected: {e}"))?;
        let hash = loaded.info().sha256;
        if let Some(s) = self.receiver.served.get(&group).filter(|s| s.hash == hash) {
            // The spec in force already: nothing to flush, nobody to tell.
            return Ok(json!({"group": group, "spec": hex(&s.hash), "replaced": false, "children": children}));
        }
        let old = self.receiver.served.remove(&group);
        if let Some(o) = &old {
            self.out.clear();
            let _ = engine.remove_flow(o.engine, now, &mut self.out);
        }
        let cfg = FlowConfig { children: children as u32, ..FlowConfig::new(flow, loaded) };
        let added = engine.add_flow(cfg, now);
        let id = match added {
            Ok(id) => id,
            Err(e) => {
                // Keep serving the old spec: the new one cannot even start a flow.
                if let Some(o) = old {
                    if let Some(prev) = engine.cached_spec(&o.hash) {
                        let cfg = FlowConfig { children: children as u32, ..FlowConfig::new(flow, prev) };
                        if let Ok(id) = engine.add_flow(cfg, now) {
                            self.receiver.served.insert(group, Served { hash: o.hash, engine: id, quarantined: false });
                        }
                    }
                }
                self.flush_outputs(wire);
                return Err(format!("spec rejected: {e}"));
            }
        };
        self.flush_outputs(wire);
        let replaced = old.as_ref().map(|o| o.hash != hash);
        self.receiver.served.insert(group, Served { hash, engine: id, quarantined: false });
        let actions = self.node.install_spec(group, spec);
        self.apply(now, actions, wire);
        emit(Level::Info, "spec_installed", &[("group", &group), ("spec", &hex(&hash[..6])), ("children", &children)]);
        Ok(json!({"group": group, "spec": hex(&hash), "replaced": replaced.unwrap_or(false), "children": children}))
    }

    pub fn remove_spec(&mut self, now: u64, group: u32, wire: &mut dyn Wire) -> Result<Value, String> {
        let Some(s) = self.receiver.served.remove(&group) else {
            return Err(format!("group {group} has no spec here"));
        };
        self.node.remove_spec(group);
        if let Some(engine) = self.engine.as_mut() {
            self.out.clear();
            let _ = engine.remove_flow(s.engine, now, &mut self.out);
            self.flush_outputs(wire);
        }
        emit(Level::Info, "spec_removed", &[("group", &group)]);
        Ok(json!({"group": group, "removed": hex(&s.hash)}))
    }

    /// Leaves every joined flow and delivers or sends what the engines hold (SIGTERM).
    pub fn shutdown(&mut self, now: u64, wire: &mut dyn Wire) {
        let joined: Vec<FlowId> = self.senders.flows.keys().copied().collect();
        for flow in joined {
            let _ = self.leave(now, flow, wire);
        }
        let served: Vec<u32> = self.receiver.served.keys().copied().collect();
        for group in served {
            let _ = self.remove_spec(now, group, wire);
        }
    }

    // ------------------------------------------------------------------ status

    pub fn status(&self) -> Value {
        json!({
            "node": self.addr.to_string(),
            "role": "host",
            "joined": self.senders.flows.len(),
            "served": self.receiver.served.keys().collect::<Vec<_>>(),
            "subscriptions": self.receiver.subs.len(),
            "held_ports": self.wanted_ports(),
            "engine_flows": self.engine.as_ref().map_or(0, Engine::flow_count),
            // The public key R signs its specs with (docs/protocol.md 2.9); null: unsigned.
            "spec_key": self.node.public_key().map(|k| crate::hex(&k)),
            "counters": self.counters.to_json(),
        })
    }

    pub fn flows_json(&self) -> Value {
        let mut flows: Vec<Value> = self
            .senders
            .flows
            .iter()
            .map(|(f, s)| {
                let mut v = s.to_json(f);
                v["path_mtu"] = json!(self.node.path_mtu(*f));
                v
            })
            .collect();
        for f in self.node.flows() {
            if f.role != "receiver" {
                continue;
            }
            let served = self.receiver.served.get(&f.flow.group);
            let stats = served.and_then(|s| self.engine.as_ref()?.stats(s.engine));
            flows.push(json!({
                "receiver": self.addr.to_string(),
                "group": f.flow.group,
                "role": "receiver",
                "state": f.state,
                "children": f.children.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
                "spec": served.map(|s| hex(&s.hash)),
                "subscribers": self.receiver.subscribers(f.flow.group).len(),
                "final_merge": stats.map(|st| json!({
                    "received": st.counters.received,
                    "merged": st.counters.merged,
                    "out": st.counters.out,
                    "unmerged_forwarded": st.counters.unmerged_forwarded,
                    "open_states": st.open_states,
                    "quarantine": st.quarantine.map(|q| q.to_string()),
                })),
            }));
        }
        json!({"node": self.addr.to_string(), "flows": flows})
    }
}
