//! The receiver side (this host is R): the groups it serves with a merge spec, the final
//! merge that spec runs here, and the subscriptions arriving datagrams are streamed to
//! (docs/hostd.md, "Receiving").

use std::collections::{BTreeMap, BTreeSet};

use concast_csp::SpecHash;
use concast_wire::ipv4::{self, protocol};
use serde_json::{json, Value};

use crate::api::ClientId;
use crate::{hex, udp};

/// A group this host serves: CSP answers its joins, and its spec runs the final merge.
#[derive(Debug)]
pub struct Served {
    pub hash: SpecHash,
    pub engine: concast_engine::FlowSlot,
    /// The final merge was quarantined and the subscribers were told.
    pub quarantined: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscription {
    pub client: ClientId,
    pub group: u32,
    /// Plain UDP datagrams to this port are delivered too (senders that fell back to unicast,
    /// or never used concast); hostd holds the port while subscribed.
    pub port: Option<u16>,
}

#[derive(Debug, Default)]
pub struct Receiver {
    pub served: BTreeMap<u32, Served>,
    pub subs: Vec<Subscription>,
    /// UDP ports named by the selectors children joined with: held against ICMP.
    pub selector_ports: BTreeSet<u16>,
}

impl Receiver {
    pub fn subscribe(&mut self, s: Subscription) {
        self.subs.retain(|x| !(x.client == s.client && x.group == s.group));
        self.subs.push(s);
    }

    pub fn unsubscribe(&mut self, client: ClientId, group: u32) -> bool {
        let before = self.subs.len();
        self.subs.retain(|x| !(x.client == client && x.group == group));
        self.subs.len() != before
    }

    pub fn forget_client(&mut self, client: ClientId) {
        self.subs.retain(|x| x.client != client);
    }

    pub fn subscribers(&self, group: u32) -> Vec<ClientId> {
        self.subs.iter().filter(|s| s.group == group).map(|s| s.client).collect()
    }

    /// Subscriptions that take plain UDP to `port`: (client, group).
    pub fn port_subscribers(&self, port: u16) -> Vec<(ClientId, u32)> {
        self.subs.iter().filter(|s| s.port == Some(port)).map(|s| (s.client, s.group)).collect()
    }

    /// Every UDP port hostd should hold now.
    pub fn wanted_ports(&self) -> BTreeSet<u16> {
        let mut ports = self.selector_ports.clone();
        ports.extend(self.subs.iter().filter_map(|s| s.port));
        ports
    }
}

/// How a datagram reached the application, as the `kind` of a `datagram` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Built by this host's final merge.
    Merged,
    /// The spec here passed it on unchanged.
    Passed,
    /// The spec here is quarantined (or just failed): delivered unmerged.
    FailOpen,
    /// Too short or long for the spec: delivered unmerged.
    Malformed,
    /// The group has no spec here: delivered as it arrived.
    NoSpec,
    /// Plain UDP (no Concast ID option) to a subscribed port.
    Plain,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Merged => "merged",
            Kind::Passed => "passed",
            Kind::FailOpen => "fail_open",
            Kind::Malformed => "malformed",
            Kind::NoSpec => "no_spec",
            Kind::Plain => "plain",
        }
    }

    pub fn from_output(kind: concast_engine::OutputKind) -> Kind {
        use concast_engine::{OutputKind, Unmerged};
        match kind {
            OutputKind::Merged => Kind::Merged,
            OutputKind::Unmerged(Unmerged::Passed) => Kind::Passed,
            OutputKind::Unmerged(Unmerged::Malformed) => Kind::Malformed,
            OutputKind::Unmerged(Unmerged::FailOpen | Unmerged::NoFlow) => Kind::FailOpen,
        }
    }
}

/// The `datagram` event for one delivered IPv4 datagram: its addresses, TTL, and for UDP the
/// ports and payload (hex); other protocols carry their IPv4 payload. `from`: the sources on
/// the wire of what R's final merge made it of (a merged datagram's own source is R), as
/// "from" when there are any.
pub fn datagram_event(group: u32, kind: Kind, datagram: &[u8], from: &[std::net::Ipv4Addr]) -> String {
    let ip = ipv4::Packet::new_unchecked(datagram);
    let mut v = json!({
        "event": "datagram",
        "group": group,
        "kind": kind.name(),
        "src": ip.src_addr().to_string(),
        "dst": ip.dst_addr().to_string(),
        "ttl": ip.ttl(),
        "protocol": ip.protocol(),
    });
    let m = v.as_object_mut().expect("an object");
    if !from.is_empty() {
        m.insert("from".into(), from.iter().map(|a| a.to_string()).collect::<Vec<_>>().into());
    }
    match udp::View::parse(ip.payload()).filter(|_| ip.protocol() == protocol::UDP) {
        Some(u) => {
            m.insert("sport".into(), u.sport.into());
            m.insert("dport".into(), u.dport.into());
            m.insert("payload".into(), hex(u.payload).into());
        }
        None => {
            m.insert("payload".into(), hex(ip.payload()).into());
        }
    }
    v.to_string()
}

pub fn group_event(name: &str, group: u32, extra: Value) -> String {
    let mut v = json!({"event": name, "group": group});
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v.to_string()
}
