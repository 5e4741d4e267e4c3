//! One CSP node: the router, sender and receiver state machines of docs/protocol.md 2.8.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::Ipv4Addr;

use crate::children::{Asked, Child, Children};
use crate::msg::{Body, ErrorCode, FlowId, JoinBody, Msg, Selector, SpecHash, SpecSig, NO_HASH};
use crate::sign;
use crate::store::{sha256, Fetch, FetchStep, SpecStore};
use crate::Config;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A concast-capable router: intercepts JOIN, REFRESH and LEAVE for other receivers.
    Router,
    /// An end host: sends on flows it joins, receives on groups it serves.
    Host,
}

/// What the daemon driving a node must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send a CSP message from this node's address to `to`.
    Send { to: Ipv4Addr, msg: Msg },
    /// The message just handled is not for this node: forward the datagram unchanged.
    Forward,
    /// Start merging the flow with the spec `hash` (its bytes are in the node's store);
    /// a router also installs the diversion for `selector`.
    Activate { flow: FlowId, selector: Selector, hash: SpecHash },
    /// The flow's spec changed to `hash` (flush what the old one held first).
    SwitchSpec { flow: FlowId, hash: SpecHash },
    /// Stop merging the flow, flush what is held, remove its diversion.
    Deactivate { flow: FlowId },
    /// A sender's flow fell back to plain unicast; the application must be told why.
    Fallback { flow: FlowId, reason: String },
    /// Something an operator should see.
    Log { text: String },
}

/// A flow as `concast router flows` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStatus {
    pub flow: FlowId,
    pub role: &'static str,
    pub state: &'static str,
    pub upstream: Option<Ipv4Addr>,
    pub children: Vec<Ipv4Addr>,
    pub hash: SpecHash,
    /// The smallest MTU from this node to R as learned from JOIN_ACK (None: not known).
    pub path_mtu: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RState {
    /// JOIN sent upstream, no JOIN_ACK yet.
    Pending,
    /// JOIN_ACK in, spec being fetched.
    Fetching,
    Active,
    /// The spec trapped, failed validation or could not be fetched: forward unmerged.
    Quarantined,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SState {
    Joining,
    Fetching,
    Joined,
    Unicast,
}

/// A retransmitted request (JOIN) with exponential back-off.
#[derive(Debug)]
struct Retry {
    seq: u32,
    next_at: u64,
    delay: u64,
    tries: u32,
}

/// The parts of a flow shared by the router and sender roles: where it goes upstream,
/// which spec is in force, and the timers that keep it alive.
#[derive(Debug)]
struct Upstream {
    addr: Option<Ipv4Addr>,
    hash: SpecHash,
    selector: Selector,
    join: Option<Retry>,
    refresh_at: Option<u64>,
    fetch: Option<Fetch>,
    /// min(the upstream node's advertised path MTU, our own link toward R).
    path_mtu: Option<u16>,
    /// R's key, pinned by the first signed JOIN_ACK for the flow's lifetime (section 2.9).
    key: Option<[u8; 32]>,
    /// R's signature over the spec in force, passed on in our JOIN_ACKs and SPEC_UPDATEs.
    sig: Option<SpecSig>,
    /// The last spec offered (and checked): its signature becomes `sig` when it is in force.
    offered: Option<(SpecHash, Option<SpecSig>)>,
    /// The last spec whose bytes this node refused (not a valid module here): offered
    /// again, it is refused without being fetched again (section 2.6).
    refused: Option<SpecHash>,
}

impl Upstream {
    fn new(selector: Selector) -> Upstream {
        Upstream {
            addr: None,
            hash: NO_HASH,
            selector,
            join: None,
            refresh_at: None,
            fetch: None,
            path_mtu: None,
            key: None,
            sig: None,
            offered: None,
            refused: None,
        }
    }

    fn deadline(&self) -> Option<u64> {
        [self.join.as_ref().map(|r| r.next_at), self.refresh_at, self.fetch.as_ref().and_then(Fetch::deadline)]
            .into_iter()
            .flatten()
            .min()
    }
}

#[derive(Debug)]
struct RouterFlow {
    state: RState,
    up: Upstream,
    children: Children,
}

#[derive(Debug)]
struct SenderFlow {
    state: SState,
    up: Upstream,
}

#[derive(Debug, Default)]
struct ServedFlow {
    /// Hash, size and (if this node signs) R's signature of the spec in force.
    spec: Option<(SpecHash, u32, Option<SpecSig>)>,
    children: Children,
}

/// What a node refused, for `concast router stats` (docs/protocol.md 2.9).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CspCounters {
    /// JOIN_ACKs and SPEC_UPDATEs whose signature failed (or was missing while this node
    /// verifies), and fetched specs whose bytes did not match their hash: ERROR SPEC_REJECTED.
    pub specs_rejected: u64,
    /// SPEC_CHUNKs for no transfer in progress here (ignored).
    pub chunks_unsolicited: u64,
    /// ERROR UNKNOWN_FLOW sent: a LEAVE from a node that is not a child of the flow here.
    pub unknown_flow: u64,
}

/// Which map a timer wake-up belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Routed(FlowId),
    Joined(FlowId),
    Served(u32),
}

pub struct Node {
    addr: Ipv4Addr,
    role: Role,
    cfg: Config,
    seq: u32,
    pub store: SpecStore,
    routed: BTreeMap<FlowId, RouterFlow>,
    joined: BTreeMap<FlowId, SenderFlow>,
    served: BTreeMap<u32, ServedFlow>,
    /// Lazy timer queue: an entry only says "look at this flow then"; stale ones are harmless.
    wakeups: BinaryHeap<Reverse<(u64, Key)>>,
    link_mtu: LinkMtu,
    /// The receiver's spec-signing key (None: its specs go out unsigned).
    signer: Option<sign::Key>,
    pub counters: CspCounters,
    /// Transfers completed by the message being handled, checked before use (`handle_checked`).
    fetched: Vec<Fetched>,
}

/// A spec whose transfer just completed (hash verified), not yet checked as a module.
#[derive(Debug)]
struct Fetched {
    key: Key,
    bytes: Vec<u8>,
    /// Who served the last chunk, and that SPEC_CHUNK's sequence number.
    from: Ipv4Addr,
    seq: u32,
}

/// Checks a fetched spec's bytes before a node uses them or passes them on: routerd loads
/// the module into its merge engine (Wasm validation, the ABI, compilation). `Err` says why not.
pub type SpecCheck<'a> = &'a mut dyn FnMut(&[u8]) -> Result<(), String>;

/// The S flag of this node's own JOINs and REFRESHes: it reads signature trailers (2.2).
const READS_SIGNATURES: bool = true;

type Out = Vec<Action>;

/// The MTU of this node's link toward an address (the interface its route uses), if known.
pub type LinkMtu = Box<dyn Fn(Ipv4Addr) -> Option<u16> + Send>;

/// The smaller of two MTUs, either of which may be unknown.
fn min_mtu(a: Option<u16>, b: Option<u16>) -> Option<u16> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

fn send(out: &mut Out, to: Ipv4Addr, msg: Msg) {
    out.push(Action::Send { to, msg });
}

impl Node {
    pub fn new(addr: Ipv4Addr, role: Role, cfg: Config) -> Node {
        Node {
            addr,
            role,
            cfg,
            seq: 1,
            store: SpecStore::default(),
            routed: BTreeMap::new(),
            joined: BTreeMap::new(),
            served: BTreeMap::new(),
            wakeups: BinaryHeap::new(),
            link_mtu: Box::new(|_| None),
            signer: None,
            counters: CspCounters::default(),
            fetched: Vec::new(),
        }
    }

    /// Receiver: sign the specs this node serves with `key` (section 2.9).
    pub fn set_signing_key(&mut self, key: sign::Key) {
        self.signer = Some(key);
        let flows: Vec<(u32, SpecHash, u32)> =
            self.served.iter().filter_map(|(g, s)| s.spec.map(|(h, n, _)| (*g, h, n))).collect();
        for (g, h, n) in flows {
            let sig = self.sign_spec(g, n, &h);
            self.served.get_mut(&g).expect("listed above").spec = Some((h, n, sig));
        }
    }

    /// This node's public key, if it signs.
    pub fn public_key(&self) -> Option<[u8; 32]> {
        self.signer.as_ref().map(|k| k.verifying_key().to_bytes())
    }

    fn sign_spec(&self, group: u32, size: u32, hash: &SpecHash) -> Option<SpecSig> {
        let flow = FlowId { receiver: self.addr, group };
        self.signer.as_ref().map(|k| sign::sign(k, flow, size, hash))
    }

    /// Tells the node its links' MTUs (docs/protocol.md 2.3): `f(addr)` is the MTU of the
    /// link its route toward `addr` leaves by. Without it every link counts as unknown.
    pub fn set_link_mtu(&mut self, f: LinkMtu) {
        self.link_mtu = f;
    }

    /// The path MTU toward R of a flow this node routes or joined (None: not known).
    pub fn path_mtu(&self, flow: FlowId) -> Option<u16> {
        match self.routed.get(&flow) {
            Some(r) => r.up.path_mtu,
            None => self.joined.get(&flow).and_then(|s| s.up.path_mtu),
        }
    }

    /// The path MTU to put in a JOIN_ACK for `child`: our own path toward R (`own`; None at
    /// R itself) and our link toward the child, the smaller; 0 if neither is known.
    fn ack_mtu(&self, own: Option<u16>, child: Ipv4Addr) -> u16 {
        min_mtu(own, (self.link_mtu)(child)).unwrap_or(0)
    }

    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn schedule(&mut self, key: Key) {
        let at = match key {
            Key::Routed(f) => self.routed.get(&f).and_then(|r| {
                [r.up.deadline(), r.children.next_expiry()].into_iter().flatten().min()
            }),
            Key::Joined(f) => self.joined.get(&f).and_then(|s| s.up.deadline()),
            Key::Served(g) => self.served.get(&g).and_then(|s| s.children.next_expiry()),
        };
        if let Some(at) = at {
            self.wakeups.push(Reverse((at, key)));
        }
    }

    /// The earliest time `poll` has something to do.
    pub fn next_deadline(&self) -> Option<u64> {
        self.wakeups.peek().map(|Reverse((at, _))| *at)
    }

    // ------------------------------------------------------------------ host API

    /// Sender: join (R, G). Datagrams go out unmerged until `Activate`.
    pub fn join(&mut self, now: u64, flow: FlowId, selector: Selector) -> Out {
        let mut out = Vec::new();
        if self.joined.contains_key(&flow) {
            return out;
        }
        let seq = self.next_seq();
        let mut up = Upstream::new(selector);
        up.key = self.cfg.receiver_keys.get(&flow.receiver).copied();
        up.join = Some(Retry { seq, next_at: now + self.cfg.join_retry_us, delay: self.cfg.join_retry_us, tries: 1 });
        let body = Body::Join(JoinBody { hold_s: self.cfg.hold_s, selector, hash: NO_HASH, signed: READS_SIGNATURES });
        send(&mut out, flow.receiver, Msg { flow, seq, body });
        self.joined.insert(flow, SenderFlow { state: SState::Joining, up });
        self.schedule(Key::Joined(flow));
        out
    }

    /// Sender: leave (R, G).
    pub fn leave(&mut self, flow: FlowId) -> Out {
        let mut out = Vec::new();
        if let Some(s) = self.joined.remove(&flow) {
            // What the sender-side merge holds goes out before the LEAVE: the upstream router
            // forgets the flow when its last child leaves, and would pass later data unmerged.
            if s.state == SState::Joined {
                out.push(Action::Deactivate { flow });
            }
            if s.state != SState::Unicast {
                let seq = self.next_seq();
                send(&mut out, flow.receiver, Msg { flow, seq, body: Body::Leave });
            }
        }
        out
    }

    /// Receiver: serve group `group` with `spec` (or replace the spec in force).
    pub fn install_spec(&mut self, group: u32, spec: Vec<u8>) -> Out {
        let size = spec.len() as u32;
        let hash = self.store.insert(spec);
        let flow = FlowId { receiver: self.addr, group };
        let sig = self.sign_spec(group, size, &hash);
        let served = self.served.entry(group).or_default();
        let changed = served.spec.map(|(h, _, _)| h) != Some(hash);
        served.spec = Some((hash, size, sig));
        let children: Vec<(Ipv4Addr, bool)> = served.children.iter().map(|(a, c)| (*a, c.signed)).collect();
        let mut out = Vec::new();
        if changed {
            for (c, signed) in children {
                let seq = self.next_seq();
                let sig = sig.filter(|_| signed);
                send(&mut out, c, Msg { flow, seq, body: Body::SpecUpdate { size, hash, sig } });
            }
        }
        out
    }

    /// Receiver: stop accepting concast for `group`; later joins and refreshes get NO_SPEC.
    pub fn remove_spec(&mut self, group: u32) {
        if let Some(s) = self.served.get_mut(&group) {
            s.spec = None;
        }
    }

    /// Router: the merge engine quarantined the flow (trap, limit, or a spec it could not
    /// start), or its first spec could not be put in force. Every child is sent
    /// FLOW_QUARANTINED; for a child whose JOIN is unanswered it is the answer (its sequence
    /// number and type, and no JOIN_ACK follows), for the others sequence number 0 and
    /// offending type 0 (it answers nothing) [2.8-15].
    pub fn quarantine(&mut self, flow: FlowId, reason: &str) -> Out {
        let mut out = Vec::new();
        if let Some(r) = self.routed.get_mut(&flow) {
            r.state = RState::Quarantined;
            r.up.join = None;
            let targets: Vec<(Ipv4Addr, Asked)> = r
                .children
                .iter_mut()
                .map(|(a, c)| (*a, c.unanswered.take().unwrap_or(Asked { seq: 0, typ: 0 })))
                .collect();
            for (a, asked) in targets {
                send(&mut out, a, Msg::error(flow, asked.seq, ErrorCode::FlowQuarantined, asked.typ, reason));
            }
            out.push(Action::Log { text: format!("flow {flow} quarantined: {reason}") });
        }
        out
    }

    // ------------------------------------------------------------------ messages

    /// Handle one CSP message that arrived from `src` addressed to `dst`; a spec it completes
    /// is used without a module check (hosts: the engine checks it when the flow starts).
    pub fn handle(&mut self, now: u64, src: Ipv4Addr, dst: Ipv4Addr, msg: Msg) -> Out {
        self.handle_checked(now, src, dst, msg, &mut |_| Ok(()))
    }

    /// `handle`, with every spec the message completes passed through `check` before it is
    /// put in force, stored or passed on (a router: docs/protocol.md 2.6, [2.6-4]).
    pub fn handle_checked(&mut self, now: u64, src: Ipv4Addr, dst: Ipv4Addr, msg: Msg, check: SpecCheck<'_>) -> Out {
        let mut out = self.dispatch(now, src, dst, msg);
        for f in std::mem::take(&mut self.fetched) {
            self.settle_fetched(now, f, check, &mut out);
        }
        out
    }

    fn dispatch(&mut self, now: u64, src: Ipv4Addr, dst: Ipv4Addr, msg: Msg) -> Out {
        let for_me = dst == self.addr;
        let intercept = msg.body.is_intercepted() && msg.flow.receiver != self.addr && self.role == Role::Router;
        if msg.flow.receiver == self.addr && msg.body.is_intercepted() {
            return self.receiver_msg(now, src, msg);
        }
        if intercept {
            return self.router_downstream_msg(now, src, msg);
        }
        if !for_me {
            return vec![Action::Forward];
        }
        match msg.body {
            Body::Join(_) | Body::Refresh(_) | Body::Leave => Vec::new(), // hosts take no joins for others
            Body::SpecRequest { hash, index } => self.serve_chunk(src, msg.flow, msg.seq, hash, index),
            _ => self.upstream_msg(now, src, msg),
        }
    }

    fn serve_chunk(&mut self, src: Ipv4Addr, flow: FlowId, seq: u32, hash: SpecHash, index: u16) -> Out {
        let body = match self.store.chunk(&hash, index) {
            Some(b) => b,
            None if self.store.contains(&hash) => {
                return vec![Action::Send {
                    to: src,
                    msg: Msg::error(flow, seq, ErrorCode::Malformed, 5, "chunk index past the spec"),
                }]
            }
            None => {
                return vec![Action::Send {
                    to: src,
                    msg: Msg::error(flow, seq, ErrorCode::SpecNotFound, 5, "no spec with that hash here"),
                }]
            }
        };
        vec![Action::Send { to: src, msg: Msg { flow, seq, body } }]
    }

    // --- receiver role (this node is R) ---

    fn receiver_msg(&mut self, now: u64, src: Ipv4Addr, msg: Msg) -> Out {
        let flow = msg.flow;
        let group = flow.group;
        let mut out = Vec::new();
        let hold = |b: &JoinBody, cfg: &Config| now + cfg.granted_hold_us(b.hold_s);
        match &msg.body {
            Body::Join(b) | Body::Refresh(b) => {
                let spec = self.served.get(&group).and_then(|s| s.spec);
                let Some((hash, size, sig)) = spec else {
                    let t = msg.body.type_num();
                    send(&mut out, src, Msg::error(flow, msg.seq, ErrorCode::NoSpec, t, &format!("no merge spec for group {group} at {}", self.addr)));
                    return out;
                };
                let served = self.served.get_mut(&group).expect("spec implies entry");
                let known = served.children.contains(&src);
                let is_join = matches!(msg.body, Body::Join(_));
                if !known && served.children.len() >= self.cfg.max_children {
                    send(&mut out, src, Msg::error(flow, msg.seq, ErrorCode::ResourceLimit, msg.body.type_num(), "too many children"));
                    return out;
                }
                let granted = (self.cfg.granted_hold_us(b.hold_s) / 1_000_000) as u16;
                served.children.upsert(src, Child::joined(hold(b, &self.cfg), None, granted, b.signed));
                if is_join || !known || b.hash != hash {
                    let hold_s = (self.cfg.granted_hold_us(b.hold_s) / 1_000_000) as u16;
                    let path_mtu = self.ack_mtu(None, src);
                    // A joiner from before signing reads only the 40-byte form (2.9-16).
                    let sig = sig.filter(|_| b.signed);
                    send(&mut out, src, Msg { flow, seq: msg.seq, body: Body::JoinAck { hold_s, path_mtu, spec_size: size, hash, sig } });
                }
                self.schedule(Key::Served(group));
            }
            Body::Leave => {
                match self.served.get_mut(&group) {
                    Some(s) if s.children.contains(&src) => {
                        s.children.leave(&src, now, self.cfg.leave_delay_us);
                    }
                    _ => self.unknown_flow(src, &msg, &mut out),
                }
                self.schedule(Key::Served(group));
            }
            _ => {}
        }
        out
    }

    // --- router role, messages from downstream ---

    fn router_downstream_msg(&mut self, now: u64, src: Ipv4Addr, msg: Msg) -> Out {
        let flow = msg.flow;
        let is_join = matches!(msg.body, Body::Join(_));
        let mut out = Vec::new();
        match &msg.body {
            Body::Join(b) | Body::Refresh(b) => {
                if !self.routed.contains_key(&flow) {
                    if self.routed.len() >= self.cfg.max_flows {
                        send(&mut out, src, Msg::error(flow, msg.seq, ErrorCode::ResourceLimit, 1, "too many flows at this router"));
                        return out;
                    }
                    // A new flow (or state lost in a restart, rebuilt from a refresh).
                    let seq = self.next_seq();
                    let mut up = Upstream::new(b.selector);
                    up.key = self.cfg.receiver_keys.get(&flow.receiver).copied();
                    up.join = Some(Retry { seq, next_at: now + self.cfg.join_retry_us, delay: self.cfg.join_retry_us, tries: 1 });
                    let body = Body::Join(JoinBody { hold_s: self.cfg.hold_s, selector: b.selector, hash: NO_HASH, signed: READS_SIGNATURES });
                    send(&mut out, flow.receiver, Msg { flow, seq, body });
                    self.routed.insert(flow, RouterFlow { state: RState::Pending, up, children: Children::default() });
                    out.push(Action::Log { text: format!("flow {flow}: join from {src}, joining upstream") });
                }
                let expires_at = now + self.cfg.granted_hold_us(b.hold_s);
                let r = self.routed.get_mut(&flow).expect("inserted above");
                if !r.children.contains(&src) && r.children.len() >= self.cfg.max_children {
                    send(&mut out, src, Msg::error(flow, msg.seq, ErrorCode::ResourceLimit, 1, "too many children"));
                    return out;
                }
                let known = r.children.contains(&src);
                let settled = matches!(r.state, RState::Active | RState::Quarantined);
                let answer_now = settled && (!known || b.hash != r.up.hash || is_join);
                // A REFRESH taken as a JOIN is answered like one, copying its own number (2.7-14).
                let unanswered = if settled { None } else { Some(Asked { seq: msg.seq, typ: msg.body.type_num() }) };
                let granted = (self.cfg.granted_hold_us(b.hold_s) / 1_000_000) as u16;
                r.children.upsert(src, Child::joined(expires_at, unanswered, granted, b.signed));
                if answer_now && r.up.hash == NO_HASH {
                    // Quarantined before any spec was in force: no spec to name (2.8-15).
                    let why = format!("flow {flow} is quarantined at {}: it never got a spec", self.addr);
                    send(&mut out, src, Msg::error(flow, msg.seq, ErrorCode::FlowQuarantined, msg.body.type_num(), &why));
                } else if answer_now {
                    let hold_s = (self.cfg.granted_hold_us(b.hold_s) / 1_000_000) as u16;
                    let size = self.store.get(&r.up.hash).map_or(0, |s| s.len() as u32);
                    let hash = r.up.hash;
                    let sig = r.up.sig.filter(|_| b.signed);
                    let path_mtu = min_mtu(r.up.path_mtu, (self.link_mtu)(src)).unwrap_or(0);
                    send(&mut out, src, Msg { flow, seq: msg.seq, body: Body::JoinAck { hold_s, path_mtu, spec_size: size, hash, sig } });
                }
            }
            Body::Leave => match self.routed.get_mut(&flow) {
                Some(r) if r.children.contains(&src) => {
                    // Pruned when its leave delay ends (routed_timers), or now without one.
                    if r.children.leave(&src, now, self.cfg.leave_delay_us) && r.children.is_empty() {
                        self.teardown(flow, &mut out, "last child left");
                    }
                }
                // Not consumed silently: the leaver learns its state here was already gone.
                _ => self.unknown_flow(src, &msg, &mut out),
            },
            _ => {}
        }
        self.schedule(Key::Routed(flow));
        out
    }

    /// ERROR UNKNOWN_FLOW for a LEAVE from a node that is not a child of the flow here.
    fn unknown_flow(&mut self, src: Ipv4Addr, msg: &Msg, out: &mut Out) {
        self.counters.unknown_flow += 1;
        let why = format!("{src} is not a child of flow {} at {}", msg.flow, self.addr);
        send(out, src, Msg::error(msg.flow, msg.seq, ErrorCode::UnknownFlow, msg.body.type_num(), &why));
    }

    /// Forget a routed flow: stop merging, tell upstream we left.
    fn teardown(&mut self, flow: FlowId, out: &mut Out, why: &str) {
        if let Some(r) = self.routed.remove(&flow) {
            if matches!(r.state, RState::Active | RState::Quarantined) {
                out.push(Action::Deactivate { flow });
            }
            let seq = self.next_seq();
            send(out, flow.receiver, Msg { flow, seq, body: Body::Leave });
            out.push(Action::Log { text: format!("flow {flow}: removed ({why})") });
        }
    }

    // --- messages from upstream: JOIN_ACK, SPEC_CHUNK, SPEC_UPDATE, ERROR ---

    fn upstream_msg(&mut self, now: u64, src: Ipv4Addr, msg: Msg) -> Out {
        let flow = msg.flow;
        let key = if self.routed.contains_key(&flow) {
            Key::Routed(flow)
        } else if self.joined.contains_key(&flow) {
            Key::Joined(flow)
        } else if let (Body::Error { code, reason, .. }, true) = (&msg.body, flow.receiver == self.addr) {
            // R is told when a child refuses its spec (e.g. a verifying router and an R that
            // does not sign): nothing to change here, but the operator must see it.
            let name = ErrorCode::name_of(*code);
            return vec![Action::Log { text: format!("flow {flow}: {src} answered {name}: {reason}") }];
        } else {
            return Vec::new(); // about a flow we do not have: stale, ignore
        };
        let mut out = Vec::new();
        let offending = msg.body.type_num();
        match msg.body {
            Body::JoinAck { spec_size, hash, path_mtu, sig, .. } => {
                if let Err(why) = self.check_offer(key, flow, spec_size, &hash, sig) {
                    self.reject(src, flow, msg.seq, offending, &why, &mut out);
                    return out; // nothing of a refused JOIN_ACK is used, not even its path MTU
                }
                if self.upstream_mut(key).refused == Some(hash) {
                    self.reject(src, flow, msg.seq, offending, "spec refused here before: not a valid merge spec", &mut out);
                    return out;
                }
                // Ours toward R is the advertised one (0: not known) capped by our own link.
                let told = Some(path_mtu).filter(|&m| m != 0);
                self.upstream_mut(key).path_mtu = min_mtu(told, (self.link_mtu)(flow.receiver));
                self.on_join_ack(now, key, src, spec_size, hash, &mut out)
            }
            Body::SpecUpdate { size, hash, sig } => {
                if let Err(why) = self.check_offer(key, flow, size, &hash, sig) {
                    self.reject(src, flow, msg.seq, offending, &why, &mut out);
                    return out;
                }
                if self.upstream_mut(key).refused == Some(hash) {
                    self.reject(src, flow, msg.seq, offending, "spec refused here before: not a valid merge spec", &mut out);
                    return out;
                }
                let up = self.upstream_mut(key);
                if up.hash != hash && up.fetch.as_ref().map(|f| f.hash) != Some(hash) {
                    self.start_fetch(now, key, src, size, hash, &mut out);
                }
            }
            Body::SpecChunk { hash, size, index, data, .. } => {
                let mut seq = self.seq;
                let step = match self.upstream_mut(key).fetch.as_mut() {
                    Some(f) if f.hash == hash => f.on_chunk(now, size, index, data, &mut || {
                        seq = seq.wrapping_add(1);
                        seq
                    }),
                    _ => {
                        self.counters.chunks_unsolicited += 1;
                        FetchStep::Request(Vec::new())
                    }
                };
                self.seq = seq;
                match step {
                    FetchStep::Done(bytes) => {
                        // Checked as a module before anything uses it (handle_checked).
                        self.upstream_mut(key).fetch = None;
                        self.fetched.push(Fetched { key, bytes, from: src, seq: msg.seq });
                    }
                    FetchStep::Mismatch(why) => {
                        // The bytes are not the signed hash's: refuse them to whoever served them.
                        self.reject(src, flow, msg.seq, offending, &why, &mut out);
                        self.fetch_step(now, key, FetchStep::Mismatch(why), &mut out);
                    }
                    step => self.fetch_step(now, key, step, &mut out),
                }
            }
            Body::Error { code, reason, .. } => self.on_error(key, code, &reason, &mut out),
            _ => {}
        }
        self.schedule(key);
        out
    }

    /// Section 2.9: a spec offered by JOIN_ACK or SPEC_UPDATE is taken only with a valid
    /// signature by R's pinned key over (R, G, size, hash), or unsigned where this node is
    /// configured to accept unsigned specs and no key is pinned yet. The first valid
    /// signature pins its key.
    fn check_offer(&mut self, key: Key, flow: FlowId, size: u32, hash: &SpecHash, sig: Option<SpecSig>) -> Result<(), String> {
        let verify = self.cfg.verify_specs;
        let up = self.upstream_mut(key);
        match (sig, up.key) {
            (None, Some(_)) => return Err("unsigned spec for a flow whose key is pinned".into()),
            (None, None) if verify => return Err("unsigned spec (this node accepts signed specs only)".into()),
            (None, None) => {}
            (Some(s), Some(k)) if s.key != k => return Err("spec signed by another key than the flow's".into()),
            (Some(s), _) => {
                if !sign::verify(flow, size, hash, &s) {
                    return Err("spec signature does not verify for this flow, size and hash".into());
                }
                up.key = Some(s.key);
            }
        }
        up.offered = Some((*hash, sig));
        Ok(())
    }

    /// Refuse a spec offer or spec bytes: ERROR SPEC_REJECTED to the sender, counted.
    fn reject(&mut self, src: Ipv4Addr, flow: FlowId, seq: u32, offending: u8, why: &str, out: &mut Out) {
        self.counters.specs_rejected += 1;
        send(out, src, Msg::error(flow, seq, ErrorCode::SpecRejected, offending, why));
        out.push(Action::Log { text: format!("flow {flow}: spec from {src} rejected: {why}") });
    }

    fn upstream_mut(&mut self, key: Key) -> &mut Upstream {
        match key {
            Key::Routed(f) => &mut self.routed.get_mut(&f).expect("checked").up,
            Key::Joined(f) => &mut self.joined.get_mut(&f).expect("checked").up,
            Key::Served(_) => unreachable!("served flows have no upstream"),
        }
    }

    fn on_join_ack(&mut self, now: u64, key: Key, src: Ipv4Addr, size: u32, hash: SpecHash, out: &mut Out) {
        let fetching_it = self.upstream_mut(key).fetch.as_ref().map(|f| f.hash) == Some(hash);
        let up = self.upstream_mut(key);
        up.addr = Some(src);
        up.join = None;
        let in_force = up.hash == hash;
        let waiting = match key {
            Key::Routed(f) => self.routed[&f].state == RState::Pending,
            Key::Joined(f) => self.joined[&f].state == SState::Joining,
            Key::Served(_) => false,
        };
        if !waiting && (in_force || fetching_it) {
            return; // an answer to a refresh: nothing new
        }
        if self.store.contains(&hash) {
            self.spec_ready(now, key, hash, out);
        } else {
            match key {
                Key::Routed(f) if waiting => self.routed.get_mut(&f).unwrap().state = RState::Fetching,
                Key::Joined(f) if waiting => self.joined.get_mut(&f).unwrap().state = SState::Fetching,
                _ => {}
            }
            self.start_fetch(now, key, src, size, hash, out);
        }
    }

    fn start_fetch(&mut self, now: u64, key: Key, from: Ipv4Addr, size: u32, hash: SpecHash, out: &mut Out) {
        if self.store.contains(&hash) {
            return self.spec_ready(now, key, hash, out);
        }
        if !Fetch::size_ok(size) {
            return self.fetch_step(now, key, FetchStep::Failed(format!("spec size {size} out of range")), out);
        }
        let flow = match key {
            Key::Routed(f) | Key::Joined(f) => f,
            Key::Served(_) => return,
        };
        let mut fetch = Fetch::new(flow, hash, size, from, &self.cfg);
        let mut seq = self.seq;
        let step = fetch.pump(now, &mut || {
            seq = seq.wrapping_add(1);
            seq
        });
        self.seq = seq;
        self.upstream_mut(key).fetch = Some(fetch);
        self.fetch_step(now, key, step, out);
    }

    fn fetch_step(&mut self, now: u64, key: Key, step: FetchStep, out: &mut Out) {
        match step {
            FetchStep::Request(msgs) => {
                let to = self.upstream_mut(key).fetch.as_ref().map(|f| f.from);
                if let Some(to) = to {
                    for m in msgs {
                        send(out, to, m);
                    }
                }
            }
            FetchStep::Done(bytes) => {
                self.upstream_mut(key).fetch = None;
                let hash = self.store.insert(bytes);
                self.spec_ready(now, key, hash, out);
            }
            FetchStep::Failed(why) | FetchStep::Mismatch(why) => {
                self.upstream_mut(key).fetch = None;
                self.spec_not_taken(key, &format!("spec transfer failed: {why}"), out);
            }
        }
    }

    /// A spec offered by upstream cannot be put in force (its transfer failed, or its bytes
    /// were refused). A flow that has a spec keeps it and does not pass the update on; a
    /// router's flow that never had one is quarantined, which answers its pending children
    /// (2.8-15); a sender falls back to unicast.
    fn spec_not_taken(&mut self, key: Key, reason: &str, out: &mut Out) {
        match key {
            Key::Routed(f) => {
                let first = matches!(self.routed[&f].state, RState::Pending | RState::Fetching);
                if first {
                    out.extend(self.quarantine(f, reason));
                } else {
                    out.push(Action::Log { text: format!("flow {f}: spec update not applied: {reason}") });
                }
            }
            Key::Joined(f) => {
                if self.joined[&f].state == SState::Joined {
                    out.push(Action::Log { text: format!("flow {f}: spec update not applied: {reason}") });
                } else {
                    self.fall_back(f, reason.to_string(), out);
                }
            }
            Key::Served(_) => {}
        }
    }

    /// A transfer completed with the right hash: the bytes must pass `check` (a router loads
    /// them as a merge spec) before they are stored, served, put in force or passed on.
    /// Refused: ERROR SPEC_REJECTED to the node that served the last chunk, copying that
    /// SPEC_CHUNK's number and type, and to R as well [2.7-15]; the flow keeps the spec it
    /// had, and its children are not told of the new one [2.6-4].
    fn settle_fetched(&mut self, now: u64, f: Fetched, check: SpecCheck<'_>, out: &mut Out) {
        let (flow, exists) = match f.key {
            Key::Routed(fl) => (fl, self.routed.contains_key(&fl)),
            Key::Joined(fl) => (fl, self.joined.contains_key(&fl)),
            Key::Served(_) => return,
        };
        if !exists {
            return;
        }
        match check(&f.bytes) {
            Ok(()) => {
                let hash = self.store.insert(f.bytes);
                self.spec_ready(now, f.key, hash, out);
            }
            Err(why) => {
                let hash = sha256(&f.bytes);
                self.upstream_mut(f.key).refused = Some(hash);
                let why = format!("spec failed validation here: {why}");
                self.reject(f.from, flow, f.seq, 6, &why, out);
                if f.from != flow.receiver {
                    send(out, flow.receiver, Msg::error(flow, f.seq, ErrorCode::SpecRejected, 6, &why));
                }
                self.spec_not_taken(f.key, &why, out);
            }
        }
        self.schedule(f.key);
    }

    /// The spec `hash` is in the store: activate the flow or switch it to the new spec.
    fn spec_ready(&mut self, now: u64, key: Key, hash: SpecHash, out: &mut Out) {
        let refresh_at = now + self.cfg.refresh_us();
        if let Some(up) = match key {
            Key::Routed(f) => self.routed.get_mut(&f).map(|r| &mut r.up),
            Key::Joined(f) => self.joined.get_mut(&f).map(|s| &mut s.up),
            Key::Served(_) => None,
        } {
            // The signature that came with this spec goes with it to our children.
            if let Some((h, sig)) = up.offered {
                if h == hash {
                    up.sig = sig;
                }
            }
        }
        match key {
            Key::Routed(f) => {
                let r = self.routed.get_mut(&f).unwrap();
                let first = matches!(r.state, RState::Pending | RState::Fetching);
                let old = r.up.hash;
                r.up.hash = hash;
                r.up.refresh_at.get_or_insert(refresh_at);
                if first {
                    r.state = RState::Active;
                    out.push(Action::Activate { flow: f, selector: r.up.selector, hash });
                    self.answer_children(f, out);
                } else if old != hash {
                    r.state = RState::Active;
                    out.push(Action::SwitchSpec { flow: f, hash });
                    let size = self.store.get(&hash).map_or(0, |s| s.len() as u32);
                    let sig = self.routed[&f].up.sig;
                    let children: Vec<(Ipv4Addr, bool)> = self.routed[&f].children.iter().map(|(a, c)| (*a, c.signed)).collect();
                    for (c, signed) in children {
                        let seq = self.next_seq();
                        let sig = sig.filter(|_| signed);
                        send(out, c, Msg { flow: f, seq, body: Body::SpecUpdate { size, hash, sig } });
                    }
                }
            }
            Key::Joined(f) => {
                let s = self.joined.get_mut(&f).unwrap();
                let old = s.up.hash;
                s.up.hash = hash;
                s.up.refresh_at.get_or_insert(refresh_at);
                if s.state != SState::Joined {
                    s.state = SState::Joined;
                    out.push(Action::Activate { flow: f, selector: s.up.selector, hash });
                } else if old != hash {
                    out.push(Action::SwitchSpec { flow: f, hash });
                }
            }
            Key::Served(_) => {}
        }
    }

    /// JOIN_ACK every child whose JOIN is still unanswered.
    fn answer_children(&mut self, flow: FlowId, out: &mut Out) {
        let Some(r) = self.routed.get_mut(&flow) else { return };
        let (hash, sig) = (r.up.hash, r.up.sig);
        let own = r.up.path_mtu;
        let size = self.store.get(&hash).map_or(0, |s| s.len() as u32);
        let waiting: Vec<(Ipv4Addr, u32, u16, bool)> = r
            .children
            .iter_mut()
            .filter_map(|(addr, child)| child.unanswered.take().map(|a| (*addr, a.seq, child.hold_s, child.signed)))
            .collect();
        for (addr, seq, hold_s, signed) in waiting {
            let path_mtu = self.ack_mtu(own, addr);
            let sig = sig.filter(|_| signed);
            send(out, addr, Msg { flow, seq, body: Body::JoinAck { hold_s, path_mtu, spec_size: size, hash, sig } });
        }
    }

    fn on_error(&mut self, key: Key, code: u16, reason: &str, out: &mut Out) {
        let code = ErrorCode::from_u16(code);
        match key {
            Key::Routed(f) => match code {
                Some(ErrorCode::NoSpec) => {
                    let targets: Vec<(Ipv4Addr, Asked)> = self.routed[&f]
                        .children
                        .iter()
                        .map(|(a, c)| (*a, c.unanswered.unwrap_or(Asked { seq: 0, typ: 1 })))
                        .collect();
                    for (a, asked) in targets {
                        send(out, a, Msg::error(f, asked.seq, ErrorCode::NoSpec, asked.typ, reason));
                    }
                    self.routed.remove(&f);
                    out.push(Action::Log { text: format!("flow {f}: receiver has no spec ({reason})") });
                }
                Some(ErrorCode::SpecNotFound) => {
                    let step = FetchStep::Failed(format!("upstream: {reason}"));
                    self.fetch_step(0, key, step, out);
                }
                // The upstream router will never name a spec: neither can we (2.8-15).
                Some(ErrorCode::FlowQuarantined) if self.routed[&f].state == RState::Pending => {
                    out.extend(self.quarantine(f, &format!("upstream quarantined the flow: {reason}")));
                }
                _ => out.push(Action::Log { text: format!("flow {f}: error {code:?} from upstream: {reason}") }),
            },
            Key::Joined(f) if code == Some(ErrorCode::FlowQuarantined) && self.joined[&f].state == SState::Joining => {
                self.fall_back(f, format!("FlowQuarantined: {reason}"), out)
            }
            Key::Joined(f) => match code {
                Some(ErrorCode::NoSpec) | Some(ErrorCode::ResourceLimit) | Some(ErrorCode::SpecNotFound) => {
                    let name = code.map_or_else(|| "unknown error".to_string(), |c| format!("{c:?}"));
                    self.fall_back(f, format!("{name}: {reason}"), out)
                }
                _ => out.push(Action::Log { text: format!("flow {f}: error {code:?} from upstream: {reason}") }),
            },
            Key::Served(_) => {}
        }
    }

    fn fall_back(&mut self, flow: FlowId, reason: String, out: &mut Out) {
        if let Some(s) = self.joined.get_mut(&flow) {
            if s.state == SState::Joined {
                out.push(Action::Deactivate { flow });
            }
            s.state = SState::Unicast;
            s.up.join = None;
            s.up.refresh_at = None;
            s.up.fetch = None;
            out.push(Action::Fallback { flow, reason });
        }
    }

    // ------------------------------------------------------------------ timers

    /// Run every timer due at `now`.
    pub fn poll(&mut self, now: u64) -> Out {
        let mut out = Vec::new();
        let mut due = Vec::new();
        while let Some(Reverse((at, key))) = self.wakeups.peek().copied() {
            if at > now {
                break;
            }
            self.wakeups.pop();
            if !due.contains(&key) {
                due.push(key);
            }
        }
        for key in due {
            match key {
                Key::Routed(f) => self.routed_timers(now, f, &mut out),
                Key::Joined(f) => self.joined_timers(now, f, &mut out),
                Key::Served(g) => {
                    let gone = self.served.get_mut(&g).map(|s| s.children.expire(now)).unwrap_or_default();
                    if !gone.is_empty() {
                        // Also the cue for the host to recount the final merge's children.
                        let names: Vec<String> = gone.iter().map(|(a, left)| format!("{a}{}", if *left { " (left)" } else { "" })).collect();
                        out.push(Action::Log { text: format!("group {g}: children gone: {}", names.join(",")) });
                    }
                }
            }
            self.schedule(key);
        }
        out
    }

    /// JOIN retransmission, periodic REFRESH and chunk timeouts, shared by routers and senders.
    /// Returns false when the JOIN ran out of tries.
    fn upstream_timers(&mut self, now: u64, key: Key, out: &mut Out) -> bool {
        let hold_s = self.cfg.hold_s;
        let refresh_us = self.cfg.refresh_us();
        let join_tries = self.cfg.join_tries;
        let flow = match key {
            Key::Routed(f) | Key::Joined(f) => f,
            Key::Served(_) => return true,
        };
        let mut seq = self.seq;
        let mut next = || {
            seq = seq.wrapping_add(1);
            seq
        };
        let up = self.upstream_mut(key);
        if let Some(r) = up.join.as_mut() {
            if r.next_at <= now {
                if r.tries >= join_tries {
                    up.join = None;
                    self.seq = seq;
                    return false;
                }
                r.tries += 1;
                r.delay *= 2;
                r.next_at = now + r.delay;
                let body = Body::Join(JoinBody { hold_s, selector: up.selector, hash: up.hash, signed: READS_SIGNATURES });
                send(out, flow.receiver, Msg { flow, seq: r.seq, body });
            }
        }
        if let Some(at) = up.refresh_at {
            if at <= now {
                up.refresh_at = Some(now + refresh_us);
                let body = Body::Refresh(JoinBody { hold_s, selector: up.selector, hash: up.hash, signed: READS_SIGNATURES });
                send(out, flow.receiver, Msg { flow, seq: next(), body });
            }
        }
        let step = up.fetch.as_mut().map(|f| f.on_timer(now, &mut next));
        self.seq = seq;
        if let Some(step) = step {
            self.fetch_step(now, key, step, out);
        }
        true
    }

    fn routed_timers(&mut self, now: u64, flow: FlowId, out: &mut Out) {
        if !self.routed.contains_key(&flow) {
            return;
        }
        if !self.upstream_timers(now, Key::Routed(flow), out) {
            // Nobody upstream answers: forget the flow; children's own retries recreate it.
            self.routed.remove(&flow);
            out.push(Action::Log { text: format!("flow {flow}: no JOIN_ACK from upstream, dropped") });
            return;
        }
        let Some(r) = self.routed.get_mut(&flow) else { return };
        let gone = r.children.expire(now);
        if !gone.is_empty() {
            let (left, expired): (Vec<_>, Vec<_>) = gone.iter().partition(|(_, left)| *left);
            let names = |v: &[&(Ipv4Addr, bool)]| v.iter().map(|(a, _)| a.to_string()).collect::<Vec<_>>().join(",");
            if !expired.is_empty() {
                out.push(Action::Log { text: format!("flow {flow}: children expired: {}", names(&expired)) });
            }
            if r.children.is_empty() {
                let why = if expired.is_empty() { "last child left" } else { "every child expired" };
                self.teardown(flow, out, why);
            } else if !left.is_empty() {
                out.push(Action::Log { text: format!("flow {flow}: children left: {}", names(&left)) });
            }
        }
    }

    fn joined_timers(&mut self, now: u64, flow: FlowId, out: &mut Out) {
        if !self.joined.contains_key(&flow) {
            return;
        }
        if !self.upstream_timers(now, Key::Joined(flow), out) {
            let tries = self.cfg.join_tries;
            self.fall_back(flow, format!("no answer to JOIN after {tries} tries"), out);
        }
    }

    // ------------------------------------------------------------------ status

    pub fn flows(&self) -> Vec<FlowStatus> {
        let mut v = Vec::new();
        for (f, r) in &self.routed {
            let state = match r.state {
                RState::Pending => "pending",
                RState::Fetching => "fetching",
                RState::Active => "active",
                RState::Quarantined => "quarantined",
            };
            v.push(FlowStatus { flow: *f, role: "router", state, upstream: r.up.addr, children: r.children.addrs(), hash: r.up.hash, path_mtu: r.up.path_mtu });
        }
        for (f, s) in &self.joined {
            let state = match s.state {
                SState::Joining => "joining",
                SState::Fetching => "fetching",
                SState::Joined => "joined",
                SState::Unicast => "unicast",
            };
            v.push(FlowStatus { flow: *f, role: "sender", state, upstream: s.up.addr, children: Vec::new(), hash: s.up.hash, path_mtu: s.up.path_mtu });
        }
        for (g, s) in &self.served {
            let flow = FlowId { receiver: self.addr, group: *g };
            let state = if s.spec.is_some() { "serving" } else { "no-spec" };
            let hash = s.spec.map_or(NO_HASH, |(h, _, _)| h);
            v.push(FlowStatus { flow, role: "receiver", state, upstream: None, children: s.children.addrs(), hash, path_mtu: None });
        }
        v
    }
}
