//! The crate against the shared vectors of `tests/vectors/vectors.json`.
//!
//! Every vector is classified; its validity, error name, kind and every decoded field listed
//! in it are compared. A field this test does not know fails the test rather than being
//! skipped, so a generator change cannot pass silently. Valid vectors are rebuilt with the
//! builders and compared byte for byte.

mod common;

use std::collections::BTreeSet;
use std::fmt::Write as _;

use concast_wire::build::{self, MplexBuilder};
use concast_wire::csp::{self, Body};
use concast_wire::ipv4::{self, Params};
use concast_wire::mplex::{self, RecordRepr};
use concast_wire::{classify, options, Datagram, Error};
use serde_json::{json, Value};

use common::{load, Vector};

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// The decoded value of field `name` of a classified datagram, as the generator writes it.
fn actual_field(d: &Datagram<'_>, name: &str) -> Result<Value, String> {
    let ip = d.ip();
    let common = match name {
        "src" => Some(json!(ip.src_addr().to_string())),
        "dst" => Some(json!(ip.dst_addr().to_string())),
        "ttl" => Some(json!(ip.ttl())),
        "proto" => Some(json!(ip.protocol())),
        "ihl" => Some(json!(ip.ihl())),
        "total_length" => Some(json!(ip.total_len())),
        _ => None,
    };
    if let Some(v) = common {
        return Ok(v);
    }
    let missing = || {
        Err(format!(
            "field {name:?} does not apply to a {} datagram",
            d.kind().name()
        ))
    };
    match d {
        Datagram::Ipv4(_) => missing(),
        Datagram::Concast { group, .. } => match name {
            "group" => Ok(json!(group)),
            _ => missing(),
        },
        Datagram::Mplex { group, mplex, .. } => Ok(match name {
            "group" => json!(group),
            "initial_ttl" => json!(mplex.initial_ttl()),
            "version" => json!(mplex.version()),
            "max_total_delay" => json!(mplex.max_total_delay()),
            "delayed_so_far" => json!(mplex.delayed_so_far()),
            "max_local_delay" => json!(mplex.max_local_delay()),
            "records" => Value::Array(
                mplex
                    .records()
                    .map(|r| {
                        json!({
                            "src": r.src_addr().to_string(),
                            "ttl": r.ttl(),
                            "proto": r.protocol(),
                            "tos": r.tos(),
                            "payload_len": r.payload_len(),
                            "payload_hex": hex(r.payload()),
                        })
                    })
                    .collect(),
            ),
            _ => return missing(),
        }),
        Datagram::Csp { message: m, .. } => {
            let header = match name {
                "csp_type" => Some(json!(m.msg_type() as u8)),
                "csp_type_name" => Some(json!(m.msg_type().name())),
                "group" => Some(json!(m.group())),
                "receiver" => Some(json!(m.receiver().to_string())),
                "seq" => Some(json!(m.seq())),
                _ => None,
            };
            if let Some(v) = header {
                return Ok(v);
            }
            let v = match (&m.body, name) {
                (Body::Join(b) | Body::Refresh(b), "hold_time") => json!(b.hold_time()),
                (Body::Join(b) | Body::Refresh(b), "selector_proto") => json!(b.selector_proto()),
                (Body::Join(b) | Body::Refresh(b), "selector_dport") => json!(b.selector_dport()),
                (Body::Join(b) | Body::Refresh(b), "spec_hash") => json!(hex(b.spec_hash())),
                (Body::Join(b) | Body::Refresh(b), "S") => json!(u8::from(b.signed())),
                (Body::JoinAck(b), "hold_time") => json!(b.hold_time()),
                (Body::JoinAck(b), "path_mtu") => json!(b.path_mtu()),
                (Body::JoinAck(b), "spec_size") => json!(b.spec_size()),
                (Body::JoinAck(b), "spec_hash") => json!(hex(b.spec_hash())),
                (Body::JoinAck(b), "spec_key") => json!(hex(&b.signature().ok_or("unsigned")?.key)),
                (Body::JoinAck(b), "signature") => json!(hex(&b.signature().ok_or("unsigned")?.sig)),
                (Body::SpecRequest(b), "spec_hash") => json!(hex(b.spec_hash())),
                (Body::SpecRequest(b), "chunk_index") => json!(b.chunk_index()),
                (Body::SpecChunk(b), "spec_hash") => json!(hex(b.spec_hash())),
                (Body::SpecChunk(b), "spec_size") => json!(b.spec_size()),
                (Body::SpecChunk(b), "chunk_index") => json!(b.chunk_index()),
                (Body::SpecChunk(b), "chunk_count") => json!(b.chunk_count()),
                (Body::SpecChunk(b), "data_len") => json!(b.data().len()),
                (Body::SpecUpdate(b), "spec_size") => json!(b.spec_size()),
                (Body::SpecUpdate(b), "spec_hash") => json!(hex(b.spec_hash())),
                (Body::SpecUpdate(b), "spec_key") => json!(hex(&b.signature().ok_or("unsigned")?.key)),
                (Body::SpecUpdate(b), "signature") => json!(hex(&b.signature().ok_or("unsigned")?.sig)),
                (Body::Error(b), "error_code") => json!(b.code()),
                (Body::Error(b), "offending_type") => json!(b.offending_type()),
                (Body::Error(b), "reason") => {
                    json!(b.reason_str().ok_or("reason is not UTF-8")?)
                }
                _ => return missing(),
            };
            Ok(v)
        }
    }
}

const RECORD_KEYS: [&str; 6] = ["src", "ttl", "proto", "tos", "payload_len", "payload_hex"];

/// Compares one expected field; record objects are compared key by key so that an unknown
/// record key fails too.
fn check_field(d: &Datagram<'_>, name: &str, expected: &Value) -> Result<(), String> {
    let actual = actual_field(d, name)?;
    if name == "records" {
        let (exp, act) = (
            expected.as_array().ok_or("records is not an array")?,
            actual.as_array().unwrap(),
        );
        if exp.len() != act.len() {
            return Err(format!(
                "records: {} expected, {} decoded",
                exp.len(),
                act.len()
            ));
        }
        for (i, (e, a)) in exp.iter().zip(act).enumerate() {
            for (k, ev) in e.as_object().ok_or("record is not an object")? {
                if !RECORD_KEYS.contains(&k.as_str()) {
                    return Err(format!("records[{i}]: unknown record field {k:?}"));
                }
                if &a[k] != ev {
                    return Err(format!("records[{i}].{k}: expected {ev}, decoded {}", a[k]));
                }
            }
        }
        return Ok(());
    }
    if &actual == expected {
        Ok(())
    } else {
        Err(format!("{name}: expected {expected}, decoded {actual}"))
    }
}

fn check_vector(v: &Vector) -> Result<(), String> {
    let result = classify(&v.bytes);
    match (&result, v.valid) {
        (Ok(d), true) => {
            if v.error.is_some() {
                return Err("valid vector with an error name".into());
            }
            if d.kind().name() != v.kind {
                return Err(format!(
                    "kind: expected {}, classified {}",
                    v.kind,
                    d.kind().name()
                ));
            }
            if !d.ip().verify_checksum() {
                return Err("header checksum does not verify".into());
            }
            let mut errs = Vec::new();
            for (name, expected) in &v.fields {
                if let Err(e) = check_field(d, name, expected) {
                    errs.push(e);
                }
            }
            if errs.is_empty() {
                Ok(())
            } else {
                Err(errs.join("; "))
            }
        }
        (Err(e), false) => {
            let want = v
                .error
                .as_deref()
                .ok_or("invalid vector without an error name")?;
            if Error::from_name(want).is_none() {
                return Err(format!("error {want:?} is not a name of docs/protocol.md"));
            }
            if v.kind != "malformed" {
                return Err(format!("invalid vector of kind {:?}", v.kind));
            }
            if !v.fields.is_empty() {
                return Err("invalid vector with fields: nothing to check them against".into());
            }
            if e.name() == want {
                Ok(())
            } else {
                Err(format!("error: expected {want}, got {e}"))
            }
        }
        (Ok(d), false) => Err(format!(
            "accepted as {:?}, expected error {:?}",
            d.kind(),
            v.error
        )),
        (Err(e), true) => Err(format!("rejected with {e}, expected valid")),
    }
}

fn report(what: &str, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{what}: {} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn vectors_classify_and_fields() {
    let vectors = load();
    assert!(!vectors.is_empty());
    let failures = vectors
        .iter()
        .filter_map(|v| check_vector(v).err().map(|e| format!("{}: {e}", v.name)))
        .collect();
    report("classify", failures);
}

#[test]
fn vectors_cover_every_error_name() {
    let seen: BTreeSet<_> = load().iter().filter_map(|v| v.error.clone()).collect();
    let missing: Vec<_> = Error::ALL
        .iter()
        .map(|e| e.name())
        .filter(|n| !seen.contains(*n))
        .collect();
    assert!(missing.is_empty(), "no vector exercises {missing:?}");
}

/// Rebuilds a valid datagram with the builders. Canonical layouts (what senders emit) go
/// through `build::*`; other options layouts through `ipv4::build` with the original options
/// and a payload rebuilt by the CSP / MplexPkt builders where there is one.
fn rebuild(d: &Datagram<'_>, out: &mut [u8]) -> Result<usize, String> {
    let ip = d.ip();
    let params = Params::from_packet(ip);
    let opts = ip.options();
    let e = |e| format!("builder: {e}");
    match d {
        Datagram::Concast { group, .. } if opts == options::concast_area(*group) => {
            build::concast(out, &params, *group, ip.payload()).map_err(e)
        }
        Datagram::Csp { message, .. } => {
            let repr = csp::Repr::parse(message);
            if opts == options::ROUTER_ALERT_AREA {
                build::csp(out, &params, &repr).map_err(e)
            } else {
                let mut body = vec![0u8; repr.buffer_len()];
                repr.emit(&mut body).map_err(e)?;
                ipv4::build(out, &params, opts, &body).map_err(e)
            }
        }
        Datagram::Mplex { group, mplex, .. } => {
            let hdr = mplex.header_repr();
            if opts == options::concast_area(*group) {
                let mut b = MplexBuilder::new(out, &params, *group, &hdr).map_err(e)?;
                for r in mplex.records() {
                    b.push(&RecordRepr::from_record(&r)).map_err(e)?;
                }
                b.finish().map_err(e)
            } else {
                let mut body = vec![0u8; mplex.as_bytes().len()];
                let mut b = mplex::BodyBuilder::new(&mut body, &hdr).map_err(e)?;
                for r in mplex.records() {
                    b.push(&RecordRepr::from_record(&r)).map_err(e)?;
                }
                let n = b.finish().map_err(e)?;
                ipv4::build(out, &params, opts, &body[..n]).map_err(e)
            }
        }
        Datagram::Ipv4(_) | Datagram::Concast { .. } => {
            ipv4::build(out, &params, opts, ip.payload()).map_err(e)
        }
    }
}

#[test]
fn vectors_rebuild_byte_for_byte() {
    let mut failures = Vec::new();
    let mut rebuilt = 0;
    for v in load().iter().filter(|v| v.valid) {
        let d = classify(&v.bytes).expect("valid vector classifies");
        let want = d.ip().datagram(); // without Ethernet padding
        let mut out = vec![0xAAu8; 2048];
        match rebuild(&d, &mut out) {
            Ok(n) if &out[..n] == want => rebuilt += 1,
            Ok(n) => failures.push(format!(
                "{}: rebuilt\n  {}\nexpected\n  {}",
                v.name,
                hex(&out[..n]),
                hex(want)
            )),
            Err(err) => failures.push(format!("{}: {err}", v.name)),
        }
        // A buffer one byte short is refused, never overrun.
        let mut short = vec![0u8; want.len() - 1];
        if rebuild(&d, &mut short).is_ok() {
            failures.push(format!("{}: built into a buffer one byte short", v.name));
        }
    }
    report("rebuild", failures);
    assert!(rebuilt > 0);
}

/// The per-layer views give the same answer as `classify` for the layer they cover.
#[test]
fn vectors_layered_views_agree() {
    let ipv4_errors = &Error::ALL[..10];
    let mut failures = Vec::new();
    for v in load() {
        let class = classify(&v.bytes);
        let ip = ipv4::Packet::new_checked(&v.bytes[..]);
        match (&class, &ip) {
            (Err(e), Err(f)) if e == f && ipv4_errors.contains(e) => continue,
            (Err(e), Ok(_)) if !ipv4_errors.contains(e) => {}
            (Ok(_), Ok(_)) => {}
            _ => {
                failures.push(format!(
                    "{}: classify {class:?}, ipv4 view {:?}",
                    v.name,
                    ip.err()
                ));
                continue;
            }
        }
        let ip = ip.unwrap();
        let payload = ip.payload();
        // Fragments are not CSP or MplexPkt to classify (spec 1.2): nothing to compare.
        let protocol = if ip.is_fragment() { 0 } else { ip.protocol() };
        match protocol {
            253 if options::has_router_alert(ip.options()) == Ok(true) => {
                let a = csp::Packet::new_checked(payload).err();
                let b = csp::Message::parse(payload).err();
                if a != class.err() || b != class.err() {
                    failures.push(format!(
                        "{}: csp views {a:?}/{b:?}, classify {:?}",
                        v.name,
                        class.err()
                    ));
                }
            }
            254 if options::find_concast_group(ip.options()).unwrap().is_some() => {
                let a = mplex::Packet::new_checked(payload).err();
                if a != class.err() {
                    failures.push(format!(
                        "{}: mplex view {a:?}, classify {:?}",
                        v.name,
                        class.err()
                    ));
                }
            }
            _ => {}
        }
    }
    report("layered views", failures);
}
