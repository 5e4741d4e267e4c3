//! API requests: one JSON object per line, checked here into a [`Request`] so that the rest
//! of hostd never sees an invalid address, group, selector, port or payload. Every refusal
//! names the field and says what is wrong (docs/hostd.md, "The socket protocol").

use std::net::Ipv4Addr;

use concast_csp::{FlowId, Selector, MAX_SPEC_SIZE};
use serde_json::{Map, Value};

use crate::udp::MAX_PAYLOAD;

/// The well-known multiplex group (protocol.md): reserved for the multiplex service.
pub const MPLEX_GROUP: u32 = concast_wire::MPLEX_GROUP;
pub const DEFAULT_SPORT: u16 = 4000;
pub const DEFAULT_DPORT: u16 = 5000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Join { flow: FlowId, selector: Selector },
    Leave { flow: FlowId },
    Send { flow: FlowId, sport: u16, dport: u16, ttl: u8, payload: Vec<u8> },
    InstallSpec { group: u32, spec: Vec<u8> },
    RemoveSpec { group: u32 },
    Subscribe { group: u32, port: Option<u16> },
    Unsubscribe { group: u32 },
    Status,
    Flows,
    Stats,
    /// Mplex_Control (docs/multiplex.md), carried out by the daemon's multiplex module.
    Mplex(crate::mplex::MplexRequest),
}

/// A line that could not be turned into a request: the `id` to echo (if one was readable)
/// and the message.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub id: Option<Value>,
    /// The `op` the line named, if it named one (a refused `send` counts as a rejected datagram).
    pub op: Option<String>,
    pub error: String,
}

type Fields = Map<String, Value>;

fn need<'a>(f: &'a Fields, key: &str) -> Result<&'a Value, String> {
    f.get(key).ok_or_else(|| format!("missing field \"{key}\""))
}

fn uint(f: &Fields, key: &str, max: u64) -> Result<Option<u64>, String> {
    match f.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n <= max => Ok(Some(n)),
            _ => Err(format!("\"{key}\" must be an integer from 0 to {max} (got {v})")),
        },
    }
}

fn port(f: &Fields, key: &str, default: Option<u16>) -> Result<Option<u16>, String> {
    match uint(f, key, 65535)? {
        None => Ok(default),
        Some(0) => Err(format!("\"{key}\" must be a port from 1 to 65535 (got 0)")),
        Some(p) => Ok(Some(p as u16)),
    }
}

/// A concast group: a 32-bit number, not the multiplex service's.
fn group(f: &Fields) -> Result<u32, String> {
    let g = uint(f, "group", u64::from(u32::MAX))?.ok_or("missing field \"group\"")? as u32;
    if g == MPLEX_GROUP {
        return Err(format!("group {MPLEX_GROUP} is reserved for the multiplex service; pick another"));
    }
    Ok(g)
}

/// Why `a` cannot be a concast receiver, if it cannot.
pub fn receiver_problem(a: Ipv4Addr, own: Ipv4Addr) -> Option<&'static str> {
    if a.is_unspecified() || a.octets()[0] == 0 {
        Some("is not a host address (0.0.0.0/8)")
    } else if a.is_loopback() {
        Some("is a loopback address; concast needs a receiver across the network")
    } else if a.is_multicast() {
        Some("is a multicast address; a concast receiver is one unicast host")
    } else if a.is_broadcast() || a.octets()[0] >= 240 {
        Some("is a broadcast or reserved address")
    } else if a == own {
        Some("is this host: a host cannot be a sender of its own flow")
    } else {
        None
    }
}

fn receiver(f: &Fields, own: Ipv4Addr) -> Result<Ipv4Addr, String> {
    let v = need(f, "receiver")?;
    let text = v.as_str().ok_or_else(|| format!("\"receiver\" must be an IPv4 address string (got {v})"))?;
    let a: Ipv4Addr = text.parse().map_err(|_| format!("\"receiver\": {text:?} is not an IPv4 address"))?;
    match receiver_problem(a, own) {
        Some(why) => Err(format!("\"receiver\": {a} {why}")),
        None => Ok(a),
    }
}

fn flow(f: &Fields, own: Ipv4Addr) -> Result<FlowId, String> {
    Ok(FlowId { receiver: receiver(f, own)?, group: group(f)? })
}

/// A flow selector: `{"proto": P, "dport": D}` or `"P/D"`; hostd sends UDP, so P is 17 or 0.
fn selector(f: &Fields, default_dport: u16) -> Result<Selector, String> {
    let (proto, dport) = match f.get("selector") {
        None | Some(Value::Null) => (17u64, u64::from(default_dport)),
        Some(Value::String(s)) => {
            let bad = || format!("\"selector\": {s:?} is not PROTO/DPORT (e.g. \"17/5000\", \"17/0\" for any port)");
            let (p, d) = s.split_once('/').ok_or_else(bad)?;
            (p.trim().parse().map_err(|_| bad())?, d.trim().parse().map_err(|_| bad())?)
        }
        Some(Value::Object(o)) => (
            uint(o, "proto", 255)?.ok_or("\"selector\" needs \"proto\"")?,
            uint(o, "dport", 65535)?.unwrap_or(0),
        ),
        Some(v) => return Err(format!("\"selector\" must be an object or \"PROTO/DPORT\" (got {v})")),
    };
    if proto > 255 || dport > 65535 {
        return Err(format!("\"selector\": protocol {proto} or port {dport} out of range"));
    }
    if proto != 17 && proto != 0 {
        return Err(format!(
            "\"selector\": protocol {proto} would never match: hostd sends UDP, so use 17 (or 0 for any protocol)"
        ));
    }
    if proto == 0 && dport != 0 {
        return Err("\"selector\": a port needs protocol 17 (\"17/PORT\")".into());
    }
    Ok(Selector { proto: proto as u8, dport: dport as u16 })
}

fn hex(f: &Fields, key: &str) -> Result<Vec<u8>, String> {
    let v = need(f, key)?;
    let s = v.as_str().ok_or_else(|| format!("\"{key}\" must be a string of hex digits"))?;
    // Bytes, not chars: a non-ASCII character is simply not a hex digit (slicing the string
    // at byte offsets could split it and panic; found by tests/fuzz, hostd_request).
    let s: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !s.len().is_multiple_of(2) {
        return Err(format!("\"{key}\" has an odd number of hex digits"));
    }
    let digit = |b: u8| char::from(b).to_digit(16);
    s.chunks(2)
        .enumerate()
        .map(|(i, pair)| match (digit(pair[0]), digit(pair[1])) {
            (Some(hi), Some(lo)) => Ok((hi * 16 + lo) as u8),
            _ => Err(format!("\"{key}\" is not hex (at digit {})", 2 * i)),
        })
        .collect()
}

fn spec_bytes(f: &Fields) -> Result<Vec<u8>, String> {
    match (f.get("spec_hex"), f.get("spec_path")) {
        (Some(_), Some(_)) => Err("give \"spec_hex\" or \"spec_path\", not both".into()),
        (Some(_), None) => {
            let bytes = hex(f, "spec_hex")?;
            check_spec_size(bytes.len())?;
            Ok(bytes)
        }
        (None, Some(p)) => {
            let path = p.as_str().ok_or("\"spec_path\" must be a file path string")?;
            let meta = std::fs::metadata(path).map_err(|e| format!("\"spec_path\" {path}: {e}"))?;
            check_spec_size(meta.len() as usize)?;
            std::fs::read(path).map_err(|e| format!("\"spec_path\" {path}: {e}"))
        }
        (None, None) => Err("missing field \"spec_hex\" or \"spec_path\"".into()),
    }
}

fn check_spec_size(n: usize) -> Result<(), String> {
    if n == 0 {
        Err("the spec is empty".into())
    } else if n > MAX_SPEC_SIZE {
        Err(format!("the spec is {n} bytes; CSP moves at most {MAX_SPEC_SIZE}"))
    } else {
        Ok(())
    }
}

fn parse_fields(f: &Fields, own: Ipv4Addr) -> Result<Request, String> {
    let op = need(f, "op")?.as_str().ok_or("\"op\" must be a string")?;
    Ok(match op {
        "join" => {
            let default_dport = port(f, "dport", Some(DEFAULT_DPORT))?.unwrap_or(DEFAULT_DPORT);
            Request::Join { flow: flow(f, own)?, selector: selector(f, default_dport)? }
        }
        "leave" => Request::Leave { flow: flow(f, own)? },
        "send" => {
            let payload = hex(f, "payload")?;
            if payload.len() > MAX_PAYLOAD {
                return Err(format!(
                    "\"payload\" is {} bytes; at most {MAX_PAYLOAD} fit in one unfragmented concast datagram",
                    payload.len()
                ));
            }
            let ttl = uint(f, "ttl", 255)?.unwrap_or(64);
            if ttl == 0 {
                return Err("\"ttl\" must be from 1 to 255".into());
            }
            Request::Send {
                flow: flow(f, own)?,
                sport: port(f, "sport", Some(DEFAULT_SPORT))?.unwrap_or(DEFAULT_SPORT),
                dport: port(f, "dport", Some(DEFAULT_DPORT))?.unwrap_or(DEFAULT_DPORT),
                ttl: ttl as u8,
                payload,
            }
        }
        "install_spec" => Request::InstallSpec { group: group(f)?, spec: spec_bytes(f)? },
        "remove_spec" => Request::RemoveSpec { group: group(f)? },
        "subscribe" => Request::Subscribe { group: group(f)?, port: port(f, "port", None)? },
        "unsubscribe" => Request::Unsubscribe { group: group(f)? },
        "status" => Request::Status,
        "flows" => Request::Flows,
        "stats" => Request::Stats,
        "mplex" => Request::Mplex(crate::mplex::parse(f, own, || spec_bytes(f))?),
        other => {
            return Err(format!(
                "unknown op {other:?}: join, leave, send, install_spec, remove_spec, subscribe, unsubscribe, status, flows, stats, mplex"
            ))
        }
    })
}

/// Parses one request line; `own` is this host's address (it cannot be a receiver here).
pub fn parse(line: &str, own: Ipv4Addr) -> Result<(Option<Value>, Request), Refusal> {
    let refuse = |error: String| Refusal { id: None, op: None, error };
    let v: Value = serde_json::from_str(line).map_err(|e| refuse(format!("not a JSON object: {e}")))?;
    let Value::Object(f) = v else {
        return Err(refuse("a request is one JSON object per line".into()));
    };
    let id = f.get("id").cloned();
    let op = f.get("op").and_then(Value::as_str).map(str::to_string);
    parse_fields(&f, own).map(|r| (id.clone(), r)).map_err(|error| Refusal { id, op, error })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 2);

    fn err(line: &str) -> String {
        parse(line, OWN).unwrap_err().error
    }

    #[test]
    fn hex_with_a_non_ascii_character_is_refused_not_a_panic() {
        // The input tests/fuzz found (hostd_request): a two-byte character inside spec_hex.
        let line = "{\"op\":\"install_spec\",\"group\":7,\"spec_hex\":\"0061\u{0410}00\"}";
        assert!(err(line).contains("not hex (at digit 4)"), "{}", err(line));
        let line = r#"{"op":"send","receiver":"10.0.0.9","group":7,"payload":"0g"}"#;
        assert!(err(line).contains("not hex (at digit 0)"));
        assert!(parse(r#"{"op":"send","receiver":"10.0.0.9","group":7,"payload":"00 ff"}"#, OWN).is_ok());
    }

    #[test]
    fn a_join_with_defaults() {
        let (id, r) = parse(r#"{"op":"join","receiver":"10.1.2.2","group":7,"id":3}"#, OWN).unwrap();
        assert_eq!(id, Some(Value::from(3)));
        let flow = FlowId { receiver: "10.1.2.2".parse().unwrap(), group: 7 };
        assert_eq!(r, Request::Join { flow, selector: Selector { proto: 17, dport: 5000 } });
        let (_, r) = parse(r#"{"op":"join","receiver":"10.1.2.2","group":7,"selector":"0/0"}"#, OWN).unwrap();
        assert_eq!(r, Request::Join { flow, selector: Selector { proto: 0, dport: 0 } });
    }

    #[test]
    fn bad_addresses_groups_selectors_and_payloads_are_named() {
        assert!(err(r#"{"op":"join","receiver":"10.1.2.300","group":7}"#).contains("not an IPv4 address"));
        assert!(err(r#"{"op":"join","receiver":"224.0.0.1","group":7}"#).contains("multicast"));
        assert!(err(r#"{"op":"join","receiver":"10.1.1.2","group":7}"#).contains("is this host"));
        assert!(err(r#"{"op":"join","receiver":"127.0.0.1","group":7}"#).contains("loopback"));
        assert!(err(r#"{"op":"join","receiver":"10.1.2.2","group":-1}"#).contains("\"group\" must be an integer"));
        assert!(err(r#"{"op":"join","receiver":"10.1.2.2","group":4294967296}"#).contains("\"group\""));
        assert!(err(r#"{"op":"join","receiver":"10.1.2.2","group":1}"#).contains("multiplex"));
        assert!(err(r#"{"op":"join","receiver":"10.1.2.2","group":7,"selector":"6/80"}"#).contains("hostd sends UDP"));
        assert!(err(r#"{"op":"join","receiver":"10.1.2.2","group":7,"selector":"udp"}"#).contains("PROTO/DPORT"));
        assert!(err(r#"{"op":"join","receiver":"10.1.2.2","group":7,"selector":{"proto":17,"dport":70000}}"#).contains("dport"));
        assert!(err(r#"{"op":"send","receiver":"10.1.2.2","group":7,"payload":"abc"}"#).contains("odd number"));
        assert!(err(r#"{"op":"send","receiver":"10.1.2.2","group":7,"payload":"zz"}"#).contains("not hex"));
        assert!(err(r#"{"op":"send","receiver":"10.1.2.2","group":7,"payload":"00","dport":0}"#).contains("1 to 65535"));
        let big = format!(r#"{{"op":"send","receiver":"10.1.2.2","group":7,"payload":"{}"}}"#, "00".repeat(MAX_PAYLOAD + 1));
        assert!(err(&big).contains("unfragmented"));
        assert!(err(r#"{"op":"install_spec","group":7}"#).contains("spec_hex"));
        assert!(err(r#"{"op":"install_spec","group":7,"spec_path":"/nonexistent.wasm"}"#).contains("/nonexistent.wasm"));
        assert!(err(r#"{"op":"dance"}"#).contains("unknown op"));
        assert!(err("[1,2]").contains("one JSON object"));
        assert!(err("{").contains("not a JSON object"));
    }

    #[test]
    fn refusals_echo_the_id() {
        let r = parse(r#"{"op":"leave","id":"x"}"#, OWN).unwrap_err();
        assert_eq!(r.id, Some(Value::from("x")));
        assert!(r.error.contains("receiver"));
    }
}
