//! Two hosts in process, a sender and a receiver R wired back to back (no routers): real CSP,
//! the real merge engine with the bundled specs, API requests as the socket would pass them.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use concast_aggregate::payload::Contribution;
use concast_csp::Config;
use concast_engine::EngineConfig;
use concast_hostd::api::{parse, Request};
use concast_hostd::{hex, Event, Host};
use concast_wire::datagram::{classify, Datagram};
use serde_json::Value;

const S: &str = "10.1.1.2";
const R: &str = "10.2.1.2";
const MS: u64 = 1_000;
const APP: u64 = 1; // the API client id used throughout

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn spec_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/mergespecs").join(format!("{name}.wasm"))
}

fn spec_hex(name: &str) -> String {
    let p = spec_path(name);
    hex(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e} (run `make specs` first)", p.display())))
}

struct Lab {
    s: Host,
    r: Host,
    now: u64,
    /// Datagrams that left each host and were not CSP (what a capture would see).
    data_to_r: Vec<Vec<u8>>,
}

impl Lab {
    fn new() -> Lab {
        let cfg = Config { hold_s: 3, ..Config::default() };
        let mut r = Host::new(ip(R), cfg.clone(), EngineConfig::default());
        r.node.set_signing_key(concast_csp::sign::key_from_secret([9; 32])); // as hostd does
        Lab {
            s: Host::new(ip(S), cfg, EngineConfig::default()),
            r,
            now: 1_000,
            data_to_r: Vec::new(),
        }
    }

    /// An API request at `who` ("s" or "r"), parsed as the socket would parse it.
    fn api(&mut self, who: &str, line: &str) -> Result<Value, String> {
        let host = if who == "s" { &mut self.s } else { &mut self.r };
        let (_, req) = parse(line, host.addr()).map_err(|r| r.error)?;
        let mut wire: Vec<Vec<u8>> = Vec::new();
        let reply = host.request(self.now, APP, req, &mut wire);
        self.carry(if who == "s" { "s" } else { "r" }, wire);
        reply
    }

    /// Delivers what `from` sent to the other host, and the answers back, until quiet.
    fn carry(&mut self, from: &str, wire: Vec<Vec<u8>>) {
        let mut queue: Vec<(String, Vec<u8>)> = wire.into_iter().map(|d| (from.to_string(), d)).collect();
        while let Some((from, d)) = queue.pop() {
            let to_r = from == "s";
            let is_csp = matches!(classify(&d), Ok(Datagram::Csp { .. }));
            if to_r && !is_csp {
                self.data_to_r.push(d.clone());
            }
            let host = if to_r { &mut self.r } else { &mut self.s };
            let mut out: Vec<Vec<u8>> = Vec::new();
            if is_csp {
                host.on_csp(self.now, &d, &mut out);
            } else {
                host.on_capture(self.now, &d, &mut out);
            }
            let next = if to_r { "r" } else { "s" };
            queue.extend(out.into_iter().map(|d| (next.to_string(), d)));
        }
    }

    fn advance(&mut self, by: u64) {
        self.now += by;
        let mut w: Vec<Vec<u8>> = Vec::new();
        self.s.tick(self.now, &mut w);
        self.carry("s", w);
        let mut w: Vec<Vec<u8>> = Vec::new();
        self.r.tick(self.now, &mut w);
        self.carry("r", w);
    }

    fn events(host: &mut Host) -> Vec<Value> {
        host.take_events()
            .into_iter()
            .map(|Event { client, line }| {
                assert_eq!(client, APP);
                serde_json::from_str(&line).unwrap()
            })
            .collect()
    }

    fn send(&mut self, key: u32, value: i64) -> Value {
        let c = Contribution { sport: 4000, dport: 5000, key, count: 1, value };
        let payload = hex(&c.encode()[8..]); // the UDP payload: hostd writes the UDP header
        let line = format!(r#"{{"op":"send","receiver":"{R}","group":7,"payload":"{payload}"}}"#);
        self.api("s", &line).unwrap()
    }
}

fn contributions(events: &[Value]) -> Vec<(String, Contribution)> {
    events
        .iter()
        .filter(|e| e["event"] == "datagram")
        .map(|e| {
            let payload: Vec<u8> = (0..e["payload"].as_str().unwrap().len() / 2)
                .map(|i| u8::from_str_radix(&e["payload"].as_str().unwrap()[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            let mut udp = vec![0u8; 8];
            udp.extend_from_slice(&payload);
            (e["kind"].as_str().unwrap().to_string(), Contribution::parse(&udp).expect("an aggregate payload"))
        })
        .collect()
}

fn joined(lab: &mut Lab) {
    lab.api("r", &format!(r#"{{"op":"install_spec","group":7,"spec_hex":"{}"}}"#, spec_hex("sum"))).unwrap();
    lab.api("r", r#"{"op":"subscribe","group":7,"port":5000}"#).unwrap();
    let reply = lab.api("s", &format!(r#"{{"op":"join","receiver":"{R}","group":7}}"#)).unwrap();
    assert_eq!(reply["state"], "joining");
    let ev = Lab::events(&mut lab.s);
    assert_eq!(ev.iter().map(|e| e["event"].as_str().unwrap()).collect::<Vec<_>>(), ["active"], "{ev:?}");
    assert_eq!(ev[0]["merging_here"], true);
}

#[test]
fn sender_side_merging_then_the_final_merge_at_r() {
    let mut lab = Lab::new();
    joined(&mut lab);
    assert_eq!(lab.send(3, 10)["sent"], "merging");
    assert_eq!(lab.send(3, 32)["sent"], "merging");
    // The sender's sum spec (fan-in 2 by default) merged both into one datagram.
    assert_eq!(lab.data_to_r.len(), 1);
    lab.advance(20 * MS);
    let ev = Lab::events(&mut lab.r);
    let got = contributions(&ev);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].0.as_str(), got[0].1.key, got[0].1.count, got[0].1.value), ("merged", 3, 2, 42));
    // R's final merge made it: its own source is R, "from" names the sender on the wire.
    assert_eq!((ev[0]["src"].as_str(), ev[0]["from"].clone()), (Some(R), serde_json::json!([S])));
    let c = lab.r.counters.clone();
    assert_eq!((c.concast_in, c.final_merge_in, c.final_merge_out, c.delivered), (1, 1, 1, 1));
    assert_eq!(lab.s.counters.app_merging, 2);
    assert_eq!(lab.s.counters.merged_out, 1);
}

#[test]
fn a_lone_contribution_leaves_the_sender_after_the_spec_timeout() {
    let mut lab = Lab::new();
    joined(&mut lab);
    lab.send(1, 5);
    assert!(lab.data_to_r.is_empty(), "held for a partner until the timeout");
    lab.advance(11 * MS);
    assert_eq!(lab.data_to_r.len(), 1);
    lab.advance(11 * MS);
    let got = contributions(&Lab::events(&mut lab.r));
    assert_eq!(got.iter().map(|(_, c)| c.value).sum::<i64>(), 5);
}

#[test]
fn a_receiver_without_a_spec_makes_the_sender_fall_back_to_plain_udp() {
    let mut lab = Lab::new();
    lab.api("r", r#"{"op":"subscribe","group":7,"port":5000}"#).unwrap();
    lab.api("s", &format!(r#"{{"op":"join","receiver":"{R}","group":7}}"#)).unwrap();
    let ev = Lab::events(&mut lab.s);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["event"], "fallback");
    assert!(ev[0]["reason"].as_str().unwrap().contains("NoSpec"), "{ev:?}");
    assert_eq!(lab.send(2, 9)["sent"], "plain");
    let d = lab.data_to_r.last().unwrap();
    assert!(matches!(classify(d), Ok(Datagram::Ipv4(_))), "no Concast ID option after fallback");
    let got = contributions(&Lab::events(&mut lab.r));
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].0.as_str(), got[0].1.value), ("plain", 9));
    assert_eq!(lab.s.counters.fallbacks, 1);
    assert_eq!(lab.s.counters.app_plain, 1);
    // Joining again is a fresh attempt: with a spec now, the flow becomes active.
    lab.api("r", &format!(r#"{{"op":"install_spec","group":7,"spec_hex":"{}"}}"#, spec_hex("sum"))).unwrap();
    lab.api("s", &format!(r#"{{"op":"join","receiver":"{R}","group":7}}"#)).unwrap();
    assert_eq!(Lab::events(&mut lab.s)[0]["event"], "active");
}

#[test]
fn datagrams_of_a_flow_never_joined_go_out_unmerged_and_arrive() {
    let mut lab = Lab::new();
    lab.api("r", &format!(r#"{{"op":"install_spec","group":7,"spec_hex":"{}"}}"#, spec_hex("sum"))).unwrap();
    lab.api("r", r#"{"op":"subscribe","group":7}"#).unwrap();
    let reply = lab.send(4, 11);
    assert_eq!((reply["sent"].as_str(), reply["why"].as_str()), (Some("unmerged"), Some("not joined")));
    assert!(matches!(classify(&lab.data_to_r[0]), Ok(Datagram::Concast { group: 7, .. })));
    lab.advance(20 * MS);
    let got = contributions(&Lab::events(&mut lab.r));
    assert_eq!(got.iter().map(|(_, c)| c.value).sum::<i64>(), 11);
}

#[test]
fn replacing_the_spec_mid_flow_switches_the_sender_too() {
    let mut lab = Lab::new();
    joined(&mut lab);
    lab.send(1, 4);
    lab.send(1, 6);
    let reply = lab.api("r", &format!(r#"{{"op":"install_spec","group":7,"spec_hex":"{}"}}"#, spec_hex("max"))).unwrap();
    assert_eq!(reply["replaced"], true);
    let ev = Lab::events(&mut lab.s);
    assert!(ev.iter().any(|e| e["event"] == "spec_changed"), "{ev:?}");
    lab.send(2, 4);
    lab.send(2, 6);
    lab.advance(20 * MS);
    let mut got: Vec<(u32, i64)> = contributions(&Lab::events(&mut lab.r)).into_iter().map(|(_, c)| (c.key, c.value)).collect();
    got.sort();
    assert_eq!(got, vec![(1, 10), (2, 6)], "round 1 summed, round 2 took the max");
}

#[test]
fn bad_specs_are_refused_and_the_old_one_stays() {
    let mut lab = Lab::new();
    let e = lab.api("r", r#"{"op":"install_spec","group":7,"spec_hex":"0061736d"}"#).unwrap_err();
    assert!(e.starts_with("spec rejected: "), "{e}");
    lab.api("r", &format!(r#"{{"op":"install_spec","group":7,"spec_hex":"{}"}}"#, spec_hex("sum"))).unwrap();
    let e = lab.api("r", r#"{"op":"install_spec","group":7,"spec_hex":"00"}"#).unwrap_err();
    assert!(e.contains("not a valid WebAssembly module"), "{e}");
    assert_eq!(lab.r.receiver.served.len(), 1, "the sum spec still serves group 7");
    let e = lab.api("r", r#"{"op":"remove_spec","group":8}"#).unwrap_err();
    assert!(e.contains("no spec"), "{e}");
}

#[test]
fn malformed_csp_and_concast_datagrams_are_counted_and_dropped() {
    let mut lab = Lab::new();
    let mut w: Vec<Vec<u8>> = Vec::new();
    // A CSP datagram whose message is cut short (Router Alert present, 4 bytes of payload).
    let mut csp = vec![0x46, 0, 0, 28, 0, 0, 0x40, 0, 64, 253, 0, 0, 10, 1, 1, 2, 10, 2, 1, 2, 0x94, 4, 0, 0, 1, 1, 0, 16];
    let c = concast_wire::ipv4::checksum(&csp[..24]);
    csp[10..12].copy_from_slice(&c.to_be_bytes());
    lab.r.on_csp(lab.now, &csp, &mut w);
    // A UDP datagram whose Concast ID option has length 4.
    let mut bad = vec![0x47, 0, 0, 36, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 1, 1, 2, 10, 2, 1, 2, 0x9e, 4, 0, 7, 0, 0, 0, 0];
    bad.extend_from_slice(&[0x0f, 0xa0, 0x13, 0x88, 0, 8, 0, 0]);
    lab.r.on_capture(lab.now, &bad, &mut w);
    // A concast datagram too short for its UDP header.
    let mut short = vec![0x47, 0, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 1, 1, 2, 10, 2, 1, 2, 0x9e, 6, 0, 0, 0, 7, 0, 0];
    short.extend_from_slice(&[0x0f, 0xa0, 0x13, 0x88]);
    lab.r.on_capture(lab.now, &short, &mut w);
    assert!(w.is_empty(), "nothing answered");
    let m = &lab.r.counters.malformed;
    assert_eq!(m.get("csp_truncated"), Some(&1), "{m:?}");
    assert_eq!(m.get("concast_option_bad_length"), Some(&1), "{m:?}");
    assert_eq!(m.get("udp_truncated"), Some(&1), "{m:?}");
    assert_eq!(lab.r.counters.csp_in, 0);
    assert_eq!(lab.r.counters.concast_in, 0);
}

#[test]
fn a_spec_that_loops_is_quarantined_and_delivers_unmerged() {
    let wat = r#"(module
      (memory (export "memory") 2)
      (func (export "concast_abi_version") (result i32) (i32.const 1))
      (func (export "concast_init") (result i32) (i32.const 65536))
      (func (export "concast_get_tag") (param i32) (result i64) (i64.const 0))
      (func (export "concast_state_new") (param i32 i64))
      (func (export "concast_merge") (param i32 i32) (result i32) (loop $l (br $l)) (i32.const 0))
      (func (export "concast_done") (param i32) (result i32) (i32.const 0))
      (func (export "concast_build") (param i32) (result i32) (i32.const 0)))"#;
    let wasm = wat::parse_str(wat).unwrap();
    let mut lab = Lab::new();
    lab.api("r", &format!(r#"{{"op":"install_spec","group":7,"spec_hex":"{}"}}"#, hex(&wasm))).unwrap();
    lab.api("r", r#"{"op":"subscribe","group":7}"#).unwrap();
    lab.send(1, 7); // not joined: unmerged at the sender, looping at R
    let ev = Lab::events(&mut lab.r);
    let kinds: Vec<&str> = ev.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["datagram", "quarantined"], "{ev:?}");
    assert_eq!(ev[0]["kind"], "fail_open");
    assert!(ev[1]["reason"].as_str().unwrap().contains("CPU"), "{ev:?}");
    lab.send(1, 8);
    let ev = Lab::events(&mut lab.r);
    assert_eq!((ev.len(), ev[0]["kind"].as_str()), (1, Some("fail_open")));
    assert_eq!(lab.r.counters.quarantined_flows, 1);
}

#[test]
fn leave_is_refused_for_flows_never_joined() {
    let mut lab = Lab::new();
    let e = lab.api("s", &format!(r#"{{"op":"leave","receiver":"{R}","group":7}}"#)).unwrap_err();
    assert!(e.contains("not joined"), "{e}");
    let (_, req) = parse(r#"{"op":"stats"}"#, ip(S)).unwrap();
    assert_eq!(req, Request::Stats);
}
