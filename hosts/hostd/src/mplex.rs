//! Mplex_Control in hostd (docs/multiplex.md): the API op `mplex` turns the multiplex
//! service on or off for this host, as a sender toward R or as the receiver R, by pairing
//! CSP with the `concast-mplex` module:
//!
//! - sender on: join `(R, G)` with selector protocol 254 (so OVS routers divert MplexPkts);
//!   capture starts once the join is active, i.e. once R is known to unbundle them, and
//!   stops if the flow falls back to unicast (R has no multiplex spec), so ACKs never go to
//!   a receiver that would drop them;
//! - receiver on: install the multiplex spec for G (joins are answered with it) and start
//!   the demultiplexer (protocol-254 socket, TUN device);
//! - off: the reverse (LEAVE, rule removed; spec removed, device gone).
//!
//! The module owns sockets, a TUN device and iptables rules, so it lives in the daemon's
//! loop next to [`Host`] (which stays sans-IO); `Host` only reports which flows became
//! active or fell back ([`FlowChange`]).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use concast_csp::{FlowId, Selector};
use concast_mplex::{config, FlowProto, Forward, Mplex, Options, Selection, SenderConfig};
use concast_daemon::log::{emit, Level};
use concast_wire::ipv4::protocol;
use serde_json::{json, Map, Value};

use crate::api::ClientId;
use crate::host::{Event, FlowChange, Host, Wire};
use crate::sender::Phase;

/// Routers divert every datagram to R with protocol 254 (any port).
pub const MPLEX_SELECTOR: Selector = Selector { proto: protocol::MPLEX, dport: 0 };

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MplexRequest {
    SenderOn(SenderConfig),
    /// One flow toward `receiver`, or every flow toward it (`None`).
    SenderOff { receiver: Ipv4Addr, selection: Option<Selection> },
    /// `ignored`: sender parameters the request carried, which a receiver does not use.
    ReceiverOn { group: u32, spec: Vec<u8>, ignored: Vec<&'static str> },
    ReceiverOff { group: u32 },
    Status,
}

fn number(f: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match f.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().map(Some).ok_or_else(|| format!("\"{key}\" must be a number (got {v})")),
    }
}

fn address(f: &Map<String, Value>, own: Ipv4Addr) -> Result<Ipv4Addr, String> {
    let v = f.get("receiver").ok_or("missing field \"receiver\" (the R to multiplex toward)")?;
    let text = v.as_str().ok_or_else(|| format!("\"receiver\" must be an IPv4 address string (got {v})"))?;
    let a: Ipv4Addr = text.parse().map_err(|_| format!("\"receiver\": {text:?} is not an IPv4 address"))?;
    match config::receiver_problem(a, own) {
        Some(why) => Err(format!("\"receiver\": {a}: {why}")),
        None => Ok(a),
    }
}

fn port(f: &Map<String, Value>, key: &str) -> Result<Option<u16>, String> {
    match f.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(p @ 1..=65535) => Ok(Some(p as u16)),
            _ => Err(format!("\"{key}\" must be a port, 1 to 65535 (got {v})")),
        },
    }
}

/// The flow a sender request names: `proto` with `sport` and/or `dport` (an application's
/// own flow), or nothing (the kernel's pure ACKs toward R). `None` when nothing is named.
fn selection(f: &Map<String, Value>) -> Result<Option<Selection>, String> {
    let (sport, dport) = (port(f, "sport")?, port(f, "dport")?);
    match f.get("proto") {
        None | Some(Value::Null) if sport.is_none() && dport.is_none() => Ok(None),
        None | Some(Value::Null) => Err("\"sport\"/\"dport\" name an application flow: give \"proto\" (\"udp\" or \"tcp\") too".into()),
        Some(Value::String(p)) if p == "acks" => Ok(Some(Selection::Acks)),
        Some(Value::String(p)) => Ok(Some(Selection::flow(FlowProto::parse(p)?, sport, dport)?)),
        Some(v) => Err(format!("\"proto\" must be \"udp\", \"tcp\" or \"acks\" (got {v})")),
    }
}

/// The sender parameters a receiver request may carry and ignore (paper 4.1: the delays
/// are each sender's to choose; R only unbundles).
const SENDER_ONLY: [&str; 7] = ["receiver", "max_local_delay_ms", "max_total_delay_ms", "size_threshold", "proto", "sport", "dport"];

/// `{"op":"mplex","action":"on"|"off"|"status","role":"sender"|"receiver","group":G,...}`.
pub fn parse(f: &Map<String, Value>, own: Ipv4Addr, spec: impl FnOnce() -> Result<Vec<u8>, String>) -> Result<MplexRequest, String> {
    let action = f.get("action").and_then(Value::as_str).ok_or("\"action\" must be \"on\", \"off\" or \"status\"")?;
    if action == "status" {
        return Ok(MplexRequest::Status);
    }
    if action != "on" && action != "off" {
        return Err(format!("\"action\": {action:?} is not \"on\", \"off\" or \"status\""));
    }
    let group = match f.get("group") {
        None | Some(Value::Null) => concast_wire::MPLEX_GROUP,
        Some(v) => config::check_group(v.as_u64().ok_or_else(|| format!("\"group\" must be an integer (got {v})"))?)?,
    };
    match f.get("role").and_then(Value::as_str) {
        Some("sender") => {
            let receiver = address(f, own)?;
            let sel = selection(f)?;
            if action == "off" {
                return Ok(MplexRequest::SenderOff { receiver, selection: sel });
            }
            let local = number(f, "max_local_delay_ms")?;
            let total = number(f, "max_total_delay_ms")?;
            let threshold = match f.get("size_threshold") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_u64().ok_or_else(|| format!("\"size_threshold\" must be a whole number of bytes (got {v})"))?),
            };
            let (Some(local), Some(total)) = (local, total) else {
                return Err("a sender needs \"max_local_delay_ms\" and \"max_total_delay_ms\"".into());
            };
            let cfg = SenderConfig::new(receiver, own, u64::from(group), local, total, None)?;
            Ok(MplexRequest::SenderOn(cfg.for_selection(sel.unwrap_or(Selection::Acks), threshold)?))
        }
        Some("receiver") => {
            // Given to a receiver, the senders' parameters are ignored, not refused; the reply
            // names them so a mistaken script can tell.
            let ignored: Vec<&'static str> = SENDER_ONLY.into_iter().filter(|k| f.get(*k).is_some_and(|v| !v.is_null())).collect();
            if action == "off" {
                return Ok(MplexRequest::ReceiverOff { group });
            }
            Ok(MplexRequest::ReceiverOn { group, spec: spec()?, ignored })
        }
        _ => Err("\"role\" must be \"sender\" or \"receiver\"".into()),
    }
}

/// Hands the multiplex module's captured datagrams to [`Host::forward_mplex`], so they are
/// bundled by this host's own merge engine (the multiplex spec routers run) before leaving.
pub struct HostForward<'a> {
    pub host: &'a mut Host,
    pub wire: &'a mut dyn Wire,
    pub now: u64,
}

impl Forward for HostForward<'_> {
    fn forward(&mut self, receiver: Ipv4Addr, group: u32, pkt: &[u8]) -> bool {
        self.host.forward_mplex(self.now, FlowId { receiver, group }, pkt, self.wire)
    }

    fn before_pass(&mut self, receiver: Ipv4Addr, group: u32) {
        self.host.flush_mplex(self.now, FlowId { receiver, group }, self.wire);
    }
}

/// The multiplex module and what hostd knows about it.
pub struct MplexGlue {
    pub service: Mplex,
    /// Groups this host receives through `mplex on --role receiver` (their spec is ours).
    groups: BTreeSet<u32>,
    events: Vec<Event>,
}

impl MplexGlue {
    pub fn new(opts: Options) -> MplexGlue {
        MplexGlue { service: Mplex::new(opts), groups: BTreeSet::new(), events: Vec::new() }
    }

    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn tell(&mut self, host: &Host, flow: &FlowId, state: &str, reason: Option<&str>) {
        let Some(s) = host.senders.flows.get(flow) else { return };
        let line = json!({
            "event": "mplex", "role": "sender", "receiver": flow.receiver.to_string(),
            "group": flow.group, "state": state, "reason": reason,
        })
        .to_string();
        self.events.extend(s.watchers.iter().map(|&client| Event { client, line: line.clone() }));
    }

    pub fn request(&mut self, host: &mut Host, now: u64, client: ClientId, req: MplexRequest, wire: &mut dyn Wire) -> Result<Value, String> {
        host.counters.api_requests += 1;
        let result = self.carry_out(host, now, client, req, wire);
        if result.is_err() {
            host.counters.api_errors += 1;
        }
        result
    }

    fn carry_out(&mut self, host: &mut Host, now: u64, client: ClientId, req: MplexRequest, wire: &mut dyn Wire) -> Result<Value, String> {
        match req {
            MplexRequest::SenderOn(cfg) => {
                let flow = FlowId { receiver: cfg.receiver, group: cfg.group };
                let fresh = self.service.sender(cfg.receiver, cfg.selection).is_none();
                // Starts at once if other flows toward R capture already (their join is active).
                self.service.add_sender(cfg)?;
                if let Err(e) = host.join(now, client, flow, MPLEX_SELECTOR, wire) {
                    if fresh {
                        let _ = self.service.remove_sender(cfg.receiver, Some(cfg.selection));
                    }
                    return Err(e);
                }
                let what = cfg.selection.to_string();
                emit(Level::Info, "mplex_sender_on", &[("flow", &flow), ("selection", &what), ("max_local_us", &cfg.delays.max_local_us), ("max_total_us", &cfg.delays.max_total_us), ("threshold", &cfg.size_threshold)]);
                // Joined before (a repeated `on`, another flow toward R): no activation will
                // come, start now.
                if host.senders.flows.get(&flow).is_some_and(|s| s.phase == Phase::Joined) {
                    self.start(host, flow);
                }
                let join = host.senders.flows.get(&flow).map_or("joining", |s| s.state_name());
                let state = self.service.sender(cfg.receiver, cfg.selection).map_or("waiting".to_string(), |f| f.state.name().to_string());
                Ok(json!({"role": "sender", "receiver": flow.receiver.to_string(), "group": flow.group, "flow": what, "join": join, "state": state}))
            }
            MplexRequest::SenderOff { receiver, selection } => {
                let group = self.service.senders_toward(receiver).next().map(|f| f.config.group);
                let removed = self.service.remove_sender(receiver, selection)?;
                // The join is shared by every flow toward R: it goes with the last of them.
                if let (Some(group), None) = (group, self.service.senders_toward(receiver).next()) {
                    let flow = FlowId { receiver, group };
                    if host.senders.flows.contains_key(&flow) {
                        host.leave(now, flow, wire)?;
                    }
                    emit(Level::Info, "mplex_sender_off", &[("flow", &flow)]);
                }
                let counters: Map<String, Value> = removed.iter().map(|f| (f.config.selection.to_string(), f.counters.to_json())).collect();
                Ok(json!({"role": "sender", "receiver": receiver.to_string(), "was_on": !removed.is_empty(), "counters": counters}))
            }
            MplexRequest::ReceiverOn { group, spec, ignored } => {
                if host.receiver.served.contains_key(&group) && !self.groups.contains(&group) {
                    return Err(format!("group {group} is served here with another merge spec; remove it first or pick another group"));
                }
                self.service.add_receiver(group)?;
                match host.install_spec(now, group, spec, wire) {
                    Ok(v) => {
                        self.groups.insert(group);
                        emit(Level::Info, "mplex_receiver_on", &[("group", &group), ("tun", &self.service.tun_name().unwrap_or("-"))]);
                        Ok(json!({"role": "receiver", "group": group, "spec": v["spec"], "tun": self.service.tun_name(), "ignored": ignored}))
                    }
                    Err(e) => {
                        if !self.groups.contains(&group) {
                            self.service.remove_receiver(group);
                        }
                        Err(e)
                    }
                }
            }
            MplexRequest::ReceiverOff { group } => {
                if !self.groups.remove(&group) {
                    return Err(format!("multiplexing is not on for group {group} here"));
                }
                let counters = self.service.remove_receiver(group);
                let _ = host.remove_spec(now, group, wire);
                emit(Level::Info, "mplex_receiver_off", &[("group", &group)]);
                Ok(json!({"role": "receiver", "group": group, "was_on": true, "counters": counters.map(|c| c.to_json())}))
            }
            MplexRequest::Status => Ok(self.stats(host)),
        }
    }

    /// The module's counters, each sender flow with what this host's engine did with the
    /// datagrams of its join (`bundled_here`: received, bundles built and sent, passed).
    pub fn stats(&self, host: &Host) -> Value {
        let mut v = self.service.stats();
        if let Some(Value::Array(senders)) = v.get_mut("senders") {
            for s in senders {
                let receiver = s["receiver"].as_str().and_then(|r| r.parse().ok());
                let group = s["group"].as_u64().and_then(|g| u32::try_from(g).ok());
                let (Some(receiver), Some(group)) = (receiver, group) else { continue };
                let here = host.sender_engine_counters(&FlowId { receiver, group }).map(|c| {
                    json!({"received": c.received, "merged": c.merged, "out": c.out,
                           "unmerged_forwarded": c.unmerged_forwarded, "dropped": c.dropped})
                });
                s["bundled_here"] = here.unwrap_or(Value::Null);
            }
        }
        v
    }

    fn start(&mut self, host: &Host, flow: FlowId) {
        if self.service.senders_toward(flow.receiver).all(|f| f.state == concast_mplex::SenderState::Capturing) {
            return; // a spec switch re-activates the join: nothing changes here
        }
        match self.service.start_capture(flow.receiver) {
            Ok(()) => {
                emit(Level::Info, "mplex_capturing", &[("flow", &flow)]);
                self.tell(host, &flow, "capturing", None);
            }
            Err(e) => {
                emit(Level::Error, "mplex_capture_failed", &[("flow", &flow), ("error", &e)]);
                let _ = self.service.stop_capture(flow.receiver, &e);
                self.tell(host, &flow, "stopped", Some(&e));
            }
        }
    }

    /// A multiplex join that became active starts capture; one that fell back stops it.
    pub fn on_flow_changes(&mut self, host: &Host, changes: Vec<FlowChange>) {
        for change in changes {
            let (FlowChange::Active(flow) | FlowChange::Fallback(flow, _)) = &change;
            let ours = self.service.senders_toward(flow.receiver).any(|f| f.config.group == flow.group);
            if !ours {
                continue;
            }
            match change {
                FlowChange::Active(flow) => self.start(host, flow),
                FlowChange::Fallback(flow, reason) => {
                    let why = format!("fell back to unicast: {reason}");
                    if let Err(e) = self.service.stop_capture(flow.receiver, &why) {
                        emit(Level::Error, "mplex_rule_removal_failed", &[("flow", &flow), ("error", &e)]);
                    }
                    emit(Level::Warn, "mplex_stopped", &[("flow", &flow), ("reason", &why)]);
                    self.tell(host, &flow, "stopped", Some(&why));
                }
            }
        }
    }

    /// Removes every rule and the device (hostd is stopping).
    pub fn shutdown(&mut self) {
        for e in self.service.shutdown() {
            emit(Level::Error, "mplex_rule_removal_failed", &[("error", &e)]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 2);

    fn p(line: &str) -> Result<MplexRequest, String> {
        let Value::Object(f) = serde_json::from_str(line).unwrap() else { panic!() };
        parse(&f, OWN, || Ok(vec![0, 97, 115, 109]))
    }

    #[test]
    fn requests_parse() {
        let r = p(r#"{"action":"on","role":"sender","receiver":"10.2.1.2","max_local_delay_ms":2,"max_total_delay_ms":10}"#).unwrap();
        let MplexRequest::SenderOn(c) = r else { panic!("{r:?}") };
        assert_eq!((c.group, c.delays.max_local_us, c.delays.max_total_us, c.size_threshold), (1, 2000, 10_000, 128));
        assert_eq!(c.selection, Selection::Acks);
        let r2: Ipv4Addr = "10.2.1.2".parse().unwrap();
        assert_eq!(p(r#"{"action":"off","role":"sender","receiver":"10.2.1.2"}"#).unwrap(), MplexRequest::SenderOff { receiver: r2, selection: None });
        assert_eq!(p(r#"{"action":"on","role":"receiver"}"#).unwrap(), MplexRequest::ReceiverOn { group: 1, spec: vec![0, 97, 115, 109], ignored: vec![] });
        assert_eq!(p(r#"{"action":"off","role":"receiver","group":7}"#).unwrap(), MplexRequest::ReceiverOff { group: 7 });
        assert_eq!(p(r#"{"action":"status"}"#).unwrap(), MplexRequest::Status);
    }

    #[test]
    fn an_application_names_its_own_flow() {
        let r = p(r#"{"action":"on","role":"sender","receiver":"10.2.1.2","proto":"udp","sport":5000,"max_local_delay_ms":5,"max_total_delay_ms":20,"size_threshold":300}"#).unwrap();
        let MplexRequest::SenderOn(c) = r else { panic!("{r:?}") };
        assert_eq!(c.selection, Selection::flow(FlowProto::Udp, Some(5000), None).unwrap());
        assert_eq!((c.delays.max_local_us, c.delays.max_total_us, c.size_threshold), (5000, 20_000, 300));
        let r = p(r#"{"action":"off","role":"sender","receiver":"10.2.1.2","proto":"tcp","dport":80}"#).unwrap();
        let want = Selection::flow(FlowProto::Tcp, None, Some(80)).unwrap();
        assert_eq!(r, MplexRequest::SenderOff { receiver: "10.2.1.2".parse().unwrap(), selection: Some(want) });
        // UDP datagrams start at 28 bytes, so does a UDP flow's threshold.
        assert!(p(r#"{"action":"on","role":"sender","receiver":"10.2.1.2","proto":"udp","sport":5000,"max_local_delay_ms":5,"max_total_delay_ms":20,"size_threshold":28}"#).is_ok());
        let e = |l| p(l).unwrap_err();
        assert!(e(r#"{"action":"on","role":"sender","receiver":"10.2.1.2","sport":5000,"max_local_delay_ms":1,"max_total_delay_ms":2}"#).contains("\"proto\""));
        assert!(e(r#"{"action":"on","role":"sender","receiver":"10.2.1.2","proto":"udp","max_local_delay_ms":1,"max_total_delay_ms":2}"#).contains("sport"));
        assert!(e(r#"{"action":"on","role":"sender","receiver":"10.2.1.2","proto":"sctp","sport":1,"max_local_delay_ms":1,"max_total_delay_ms":2}"#).contains("\"udp\" or \"tcp\""));
        assert!(e(r#"{"action":"on","role":"sender","receiver":"10.2.1.2","proto":"udp","sport":70000,"max_local_delay_ms":1,"max_total_delay_ms":2}"#).contains("1 to 65535"));
    }

    #[test]
    fn a_receiver_ignores_the_senders_delays() {
        // Paper 4.1: delays are each sender's; given to R they are ignored, and named.
        let r = p(r#"{"action":"on","role":"receiver","max_local_delay_ms":1,"max_total_delay_ms":"x","size_threshold":96,"group":3}"#).unwrap();
        let MplexRequest::ReceiverOn { group, ignored, .. } = r else { panic!("{r:?}") };
        assert_eq!((group, ignored), (3, vec!["max_local_delay_ms", "max_total_delay_ms", "size_threshold"]));
        assert_eq!(p(r#"{"action":"off","role":"receiver","max_local_delay_ms":1}"#).unwrap(), MplexRequest::ReceiverOff { group: 1 });
    }

    #[test]
    fn refusals_name_the_problem() {
        let e = |l| p(l).unwrap_err();
        assert!(e(r#"{"action":"up"}"#).contains("action"));
        assert!(e(r#"{"action":"on","role":"router"}"#).contains("role"));
        assert!(e(r#"{"action":"on","role":"sender","receiver":"10.2.1.2"}"#).contains("max_local_delay_ms"));
        assert!(e(r#"{"action":"on","role":"sender","receiver":"10.1.1.2","max_local_delay_ms":1,"max_total_delay_ms":2}"#).contains("this host"));
        assert!(e(r#"{"action":"on","role":"sender","receiver":"10.2.1.300","max_local_delay_ms":1,"max_total_delay_ms":2}"#).contains("not an IPv4"));
        assert!(e(r#"{"action":"on","role":"sender","receiver":"10.2.1.2","max_local_delay_ms":5,"max_total_delay_ms":2}"#).contains("exceeds"));
        assert!(e(r#"{"action":"on","role":"sender","receiver":"10.2.1.2","group":0,"max_local_delay_ms":1,"max_total_delay_ms":2}"#).contains("group 0"));
        assert!(e(r#"{"action":"on","role":"sender","receiver":"10.2.1.2","max_local_delay_ms":1,"max_total_delay_ms":2,"size_threshold":20}"#).contains("size-threshold"));
    }
}
