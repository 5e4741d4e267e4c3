//! The sender side: the flows this host joined, what phase each is in, and how an
//! application datagram for a flow goes out (docs/hostd.md, "Sending").
//!
//! The CSP node owns the protocol state; this mirrors the part hostd acts on per datagram:
//! whether the spec runs here (sender-side merging), whether the flow fell back to unicast,
//! and which API clients want to hear about it.

use std::collections::{BTreeMap, BTreeSet};

use concast_csp::{FlowId, Selector, SpecHash, NO_HASH};
use serde_json::{json, Value};

use crate::api::ClientId;
use crate::hex;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// JOIN sent, or JOIN_ACK in and the spec being fetched: datagrams go out unmerged.
    Joining,
    /// The spec is in force upstream; it runs here too unless it could not (`problem`).
    Joined,
    /// The receiver refused concast (or nobody answered): datagrams go out as plain UDP.
    Unicast { reason: String },
}

#[derive(Debug)]
pub struct SenderFlow {
    pub selector: Selector,
    pub phase: Phase,
    pub hash: SpecHash,
    /// This host's engine flow, while the spec runs here.
    pub engine: Option<concast_engine::FlowSlot>,
    /// Why the spec does not run here although the flow is joined (datagrams go unmerged).
    pub problem: Option<String>,
    /// The engine quarantined the flow here and the watchers were told.
    pub quarantined: bool,
    /// API clients that joined the flow: they get its events.
    pub watchers: BTreeSet<ClientId>,
}

/// How one application datagram leaves the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Through this host's merge engine.
    Merge(concast_engine::FlowSlot),
    /// As a concast datagram, unmerged here; the reason is told to the application.
    Unmerged(&'static str),
    /// As plain UDP without the option (the flow fell back to unicast).
    Plain,
}

#[derive(Debug, Default)]
pub struct Senders {
    pub flows: BTreeMap<FlowId, SenderFlow>,
}

impl Senders {
    pub fn insert(&mut self, flow: FlowId, selector: Selector, client: ClientId) {
        let watchers = BTreeSet::from([client]);
        let f = SenderFlow { selector, phase: Phase::Joining, hash: NO_HASH, engine: None, problem: None, quarantined: false, watchers };
        self.flows.insert(flow, f);
    }

    pub fn get_mut(&mut self, flow: &FlowId) -> Option<&mut SenderFlow> {
        self.flows.get_mut(flow)
    }

    pub fn route(&self, flow: &FlowId) -> Route {
        match self.flows.get(flow) {
            None => Route::Unmerged("not joined"),
            Some(f) => match (&f.phase, f.engine) {
                (Phase::Unicast { .. }, _) => Route::Plain,
                (Phase::Joining, _) => Route::Unmerged("joining"),
                (Phase::Joined, Some(id)) if !f.quarantined => Route::Merge(id),
                (Phase::Joined, Some(_)) => Route::Unmerged("spec quarantined on this host"),
                (Phase::Joined, None) => Route::Unmerged("spec does not run on this host"),
            },
        }
    }

    pub fn forget_client(&mut self, client: ClientId) {
        for f in self.flows.values_mut() {
            f.watchers.remove(&client);
        }
    }
}

impl SenderFlow {
    pub fn state_name(&self) -> &'static str {
        match self.phase {
            Phase::Joining => "joining",
            Phase::Joined => "joined",
            Phase::Unicast { .. } => "unicast",
        }
    }

    pub fn to_json(&self, flow: &FlowId) -> Value {
        json!({
            "receiver": flow.receiver.to_string(),
            "group": flow.group,
            "role": "sender",
            "state": self.state_name(),
            "selector": format!("{}/{}", self.selector.proto, self.selector.dport),
            "spec": if self.hash == NO_HASH { Value::Null } else { hex(&self.hash).into() },
            "merging_here": self.engine.is_some() && !self.quarantined,
            "problem": self.problem,
            "reason": match &self.phase { Phase::Unicast { reason } => Value::from(reason.as_str()), _ => Value::Null },
        })
    }
}

/// The JSON of an event about a sender flow.
pub fn flow_event(name: &str, flow: &FlowId, extra: Value) -> String {
    let mut v = json!({"event": name, "receiver": flow.receiver.to_string(), "group": flow.group});
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v.to_string()
}
