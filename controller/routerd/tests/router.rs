//! A router in process: real CSP with a receiver node, the real merge engine running the
//! bundled `sum.wasm`, frames in and out as on the CPU port. No network needed.

use std::net::Ipv4Addr;

use concast_aggregate::payload::Contribution;
use concast_csp::{codec, Action, Body, Config, FlowId, JoinBody, Msg, Node, Role, Selector, NO_HASH};
use concast_engine::{Engine, EngineConfig};
use concast_routerd::{dataplane, Router};
use concast_wire::datagram::{classify, Datagram};
use concast_wire::ipv4::Params;

mod common;
use common::spec_bytes;

const ROUTER: &str = "10.0.0.1";
const RX: &str = "10.0.0.9";
const C1: &str = "10.1.1.2";
const C2: &str = "10.1.2.2";
const ROUTER_MAC: [u8; 6] = [2, 0xcc, 10, 0, 0, 1];

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn frame(datagram: &[u8]) -> Vec<u8> {
    let mut f = ROUTER_MAC.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x00]);
    f.extend_from_slice(datagram);
    f
}

fn csp_frame(src: &str, dst: &str, msg: &Msg) -> Vec<u8> {
    let mut buf = vec![0; codec::MAX_DATAGRAM];
    let n = codec::encode(ip(src), ip(dst), msg, &mut buf).unwrap();
    frame(&buf[..n])
}

fn contribution(src: &str, key: u32, value: i64) -> Vec<u8> {
    let c = Contribution { sport: 4000, dport: 5000, key, count: 1, value };
    let mut buf = vec![0; 100];
    let n = concast_wire::build::concast(&mut buf, &Params::new(ip(src), ip(RX), 17), 7, &c.encode()).unwrap();
    frame(&buf[..n])
}

/// Decoded frames the router wrote: (src, dst, what).
enum Out {
    Csp(Ipv4Addr, Ipv4Addr, Msg),
    Concast(Ipv4Addr, Ipv4Addr, u32, Vec<u8>),
    Other,
}

fn decode(frames: &[Vec<u8>]) -> Vec<Out> {
    frames
        .iter()
        .map(|f| {
            assert_eq!(&f[0..6], &ROUTER_MAC, "frames go to the router's MAC");
            match classify(&f[14..]) {
                Ok(Datagram::Csp { ip, message }) => Out::Csp(ip.src_addr(), ip.dst_addr(), codec::decode(&message)),
                Ok(Datagram::Concast { ip, group }) => Out::Concast(ip.src_addr(), ip.dst_addr(), group, ip.payload().to_vec()),
                _ => Out::Other,
            }
        })
        .collect()
}

struct Lab {
    router: Router,
    receiver: Node,
    now: u64,
    /// Every CSP message the router sent to R (R's node handles them too).
    to_rx: Vec<Msg>,
}

impl Lab {
    fn new() -> Lab {
        Lab::with(Config::default())
    }

    fn with(csp: Config) -> Lab {
        Lab::with_dataplane(csp, Box::new(dataplane::Static))
    }

    fn with_dataplane(csp: Config, dp: Box<dyn dataplane::Dataplane>) -> Lab {
        let engine = Engine::new(EngineConfig { node: ip(ROUTER), ..EngineConfig::default() }).unwrap();
        let router = Router::new(ip(ROUTER), ROUTER_MAC, [2, 0, 0, 0, 0xff, 1], csp, engine, dp);
        let mut receiver = Node::new(ip(RX), Role::Host, Config::default());
        receiver.set_signing_key(concast_csp::sign::key_from_secret([9; 32]));
        receiver.install_spec(7, spec_bytes("sum"));
        Lab { router, receiver, now: 1_000, to_rx: Vec::new() }
    }

    /// Feeds frames to the router; CSP the router sends to the receiver is answered until quiet.
    /// Returns every other frame the router wrote.
    fn feed(&mut self, frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let mut inbox = frames;
        let mut outside = Vec::new();
        while !inbox.is_empty() {
            let mut sink: Vec<Vec<u8>> = Vec::new();
            self.router.handle_batch(self.now, inbox.iter().map(|f| f.as_slice()), &mut sink);
            inbox = Vec::new();
            for (f, o) in sink.iter().zip(decode(&sink)) {
                match o {
                    Out::Csp(src, dst, msg) if dst == ip(RX) => {
                        self.to_rx.push(msg.clone());
                        for a in self.receiver.handle(self.now, src, dst, msg) {
                            if let Action::Send { to, msg } = a {
                                inbox.push(csp_frame(RX, &to.to_string(), &msg));
                            }
                        }
                    }
                    _ => outside.push(f.clone()),
                }
            }
        }
        outside
    }

    fn join(&mut self, child: &str) -> Vec<Vec<u8>> {
        let flow = FlowId { receiver: ip(RX), group: 7 };
        let body = Body::Join(JoinBody { hold_s: 30, selector: Selector { proto: 17, dport: 5000 }, hash: NO_HASH, signed: true });
        self.feed(vec![csp_frame(child, RX, &Msg { flow, seq: 11, body })])
    }
}

fn leave(child: &str) -> Vec<u8> {
    let flow = FlowId { receiver: ip(RX), group: 7 };
    csp_frame(child, RX, &Msg { flow, seq: 12, body: Body::Leave })
}

/// (count, value) of every concast datagram among `out` that carries a contribution.
fn contributions(out: &[Vec<u8>]) -> Vec<(u32, i64)> {
    decode(out)
        .into_iter()
        .filter_map(|o| if let Out::Concast(_, _, _, p) = o { Contribution::parse(&p) } else { None })
        .map(|c| (c.count, c.value))
        .collect()
}

#[test]
fn joins_fetch_the_spec_and_contributions_are_summed() {
    let mut lab = Lab::new();
    let mut out = lab.join(C1);
    out.extend(lab.join(C2));
    // Each child got a JOIN_ACK naming the spec the receiver installed.
    let acks: Vec<Ipv4Addr> = decode(&out)
        .into_iter()
        .filter_map(|o| match o {
            Out::Csp(src, dst, Msg { body: Body::JoinAck { hash, .. }, .. }) => {
                assert_eq!(src, ip(ROUTER));
                assert_eq!(hash, concast_csp::sha256(&spec_bytes("sum")));
                Some(dst)
            }
            _ => None,
        })
        .collect();
    assert_eq!(acks, vec![ip(C1), ip(C2)]);
    assert_eq!(lab.router.counters.flows_activated, 1);

    // Two children, so the sum spec forwards once both contributed.
    let out = lab.feed(vec![contribution(C1, 1, 5), contribution(C2, 1, 7), contribution(C1, 2, 100)]);
    let merged: Vec<(Ipv4Addr, u32, Contribution)> = decode(&out)
        .into_iter()
        .filter_map(|o| match o {
            Out::Concast(src, dst, g, payload) => {
                assert_eq!(dst, ip(RX));
                Some((src, g, Contribution::parse(&payload).unwrap()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(merged.len(), 1, "key 1 complete, key 2 still waiting");
    let (src, group, c) = merged[0];
    assert_eq!((src, group, c.key, c.count, c.value), (ip(ROUTER), 7, 1, 2, 12));
    assert_eq!(lab.router.counters.merged_in, 3);
    assert_eq!(lab.router.counters.merged_out, 1);

    // Key 2's round is forwarded when its timeout fires.
    let mut sink: Vec<Vec<u8>> = Vec::new();
    let deadline = lab.router.next_deadline().expect("a timer for key 2");
    lab.router.tick(deadline, &mut sink);
    let late: Vec<Contribution> = decode(&sink)
        .into_iter()
        .filter_map(|o| if let Out::Concast(_, _, _, p) = o { Contribution::parse(&p) } else { None })
        .collect();
    assert_eq!(late.len(), 1);
    assert_eq!((late[0].key, late[0].count, late[0].value), (2, 1, 100));
}

#[test]
fn malformed_frames_are_counted_and_dropped_and_good_ones_still_pass() {
    let mut lab = Lab::new();
    let good = contribution(C1, 1, 5); // no state for the flow yet: passed through as is
    let mut bad_len = good.clone();
    bad_len[14 + 21] = 8; // Concast ID option length 8
    let mut overflow = good.clone();
    overflow[14] = 0x46; // IHL 6: the 6-byte option no longer fits
    let truncated = good[..14 + 10].to_vec();
    let out = lab.feed(vec![bad_len, overflow, truncated, good.clone(), vec![1, 2, 3]]);
    assert_eq!(out, vec![good], "only the good frame comes back, unchanged");
    let m = &lab.router.counters.malformed;
    assert_eq!(m.get("concast_option_bad_length"), Some(&1));
    assert_eq!(m.get("option_overflow"), Some(&1));
    assert_eq!(m.get("truncated"), Some(&1));
    assert_eq!(m.get("not_ipv4_frame"), Some(&1));
    assert_eq!(lab.router.counters.passed_through, 1);
}

#[test]
fn csp_for_other_nodes_is_forwarded_unchanged() {
    let mut lab = Lab::new();
    let flow = FlowId { receiver: ip(RX), group: 7 };
    let msg = Msg { flow, seq: 3, body: Body::JoinAck { hold_s: 30, path_mtu: 0, spec_size: 10, hash: [1; 32], sig: None } };
    let f = csp_frame(RX, C1, &msg);
    assert_eq!(lab.feed(vec![f.clone()]), vec![f]);
}

#[test]
fn a_first_spec_that_fails_to_load_is_rejected_to_r_and_quarantines_the_flow() {
    // protocol.md 2.7-4 and 2.8-15: R hears SPEC_REJECTED (the bytes failed validation
    // here), the pending child FLOW_QUARANTINED answering its JOIN, and datagrams flow on.
    let mut lab = Lab::new();
    lab.receiver.install_spec(7, b"\0asm\x01\0\0\0 not really".to_vec());
    let out = lab.join(C1);
    let errors: Vec<(u16, u32)> = decode(&out)
        .into_iter()
        .filter_map(|o| match o {
            Out::Csp(_, dst, Msg { seq, body: Body::Error { code, .. }, .. }) if dst == ip(C1) => Some((code, seq)),
            _ => None,
        })
        .collect();
    assert_eq!(errors, vec![(6, 11)], "FLOW_QUARANTINED to the child, copying its JOIN's number");
    assert!(decode(&out).iter().all(|o| !matches!(o, Out::Csp(_, _, Msg { body: Body::JoinAck { .. }, .. }))));
    let to_rx: Vec<u16> = lab.to_rx.iter().filter_map(|m| match m.body {
        Body::Error { code, .. } => Some(code),
        _ => None,
    }).collect();
    assert_eq!(to_rx, vec![2], "SPEC_REJECTED to R, which uploaded the spec");
    assert_eq!(lab.router.node.flows()[0].state, "quarantined");
    let good = contribution(C1, 1, 5);
    assert_eq!(lab.feed(vec![good.clone()]), vec![good]);
}

#[test]
fn sum_waits_for_as_many_contributions_as_the_router_has_children() {
    let mut lab = Lab::new();
    const C3: &str = "10.1.3.2";
    for c in [C1, C2, C3] {
        lab.join(c);
    }
    let merged = |out: &[Vec<u8>]| -> Vec<Contribution> {
        decode(out)
            .into_iter()
            .filter_map(|o| if let Out::Concast(_, _, _, p) = o { Contribution::parse(&p) } else { None })
            .collect()
    };
    let out = lab.feed(vec![contribution(C1, 1, 5), contribution(C2, 1, 7)]);
    assert!(merged(&out).is_empty(), "three children joined: two contributions are not a round");
    let out = lab.feed(vec![contribution(C3, 1, 30)]);
    let m = merged(&out);
    assert_eq!(m.len(), 1);
    assert_eq!((m[0].count, m[0].value), (3, 42));
}

#[test]
fn data_ahead_of_a_leave_in_the_same_batch_is_merged_before_the_leave() {
    let mut lab = Lab::with(Config { leave_delay_us: 0, ..Config::default() });
    lab.join(C1);
    lab.join(C2);
    let out = lab.feed(vec![contribution(C1, 1, 5), contribution(C2, 1, 7), leave(C1), leave(C2)]);
    assert_eq!(contributions(&out), vec![(2, 12)], "one merged datagram, built before the flow went");
    assert_eq!((lab.router.counters.merged_in, lab.router.counters.forwarded_unmerged), (2, 0));
    assert!(lab.router.node.flows().is_empty(), "no leave delay: pruned at once");
}

#[test]
fn a_leave_that_overtakes_its_senders_data_still_lets_the_data_merge() {
    let mut lab = Lab::new();
    lab.join(C1);
    lab.join(C2);
    // The data plane put C2's LEAVE ahead of the datagram C2 sent before it.
    let out = lab.feed(vec![contribution(C1, 1, 5), leave(C1), leave(C2), contribution(C2, 1, 7)]);
    assert_eq!(contributions(&out), vec![(2, 12)]);
    assert_eq!(lab.router.node.flows()[0].children.len(), 2, "both still count during the leave delay");

    let mut sink: Vec<Vec<u8>> = Vec::new();
    let end = lab.now + Config::default().leave_delay_us;
    lab.router.tick(end, &mut sink);
    assert!(lab.router.node.flows().is_empty(), "pruned when the leave delay ended");
    let leaves = decode(&sink)
        .into_iter()
        .filter(|o| matches!(o, Out::Csp(_, dst, Msg { body: Body::Leave, .. }) if *dst == ip(RX)))
        .count();
    assert_eq!(leaves, 1, "and left upstream");
}

#[test]
fn a_datagram_whose_header_checksum_is_wrong_is_counted_and_dropped() {
    // The Linux data plane diverts with tc before the kernel checks the checksum.
    let mut lab = Lab::new();
    let good = contribution(C1, 1, 5);
    let mut bad = good.clone();
    bad[14 + 10] ^= 0xff;
    let out = lab.feed(vec![bad, good.clone()]);
    assert_eq!(out, vec![good]);
    assert_eq!(lab.router.counters.malformed.get("bad_header_checksum"), Some(&1));
}

#[test]
fn the_path_mtu_learned_from_upstream_reaches_the_child_and_the_flow_status() {
    let mut lab = Lab::new();
    lab.receiver.set_link_mtu(Box::new(|_| Some(1200))); // R's link toward the router
    lab.router.node.set_link_mtu(Box::new(|_| Some(9000)));
    let out = lab.join(C1);
    let acks: Vec<u16> = decode(&out)
        .into_iter()
        .filter_map(|o| match o {
            Out::Csp(_, _, Msg { body: Body::JoinAck { path_mtu, .. }, .. }) => Some(path_mtu),
            _ => None,
        })
        .collect();
    assert_eq!(acks, vec![1200], "min(1200 told, 9000 toward the child)");
    assert_eq!(lab.router.flows_json()["flows"][0]["path_mtu"], 1200);
}

/// The CSP ERRORs (code, destination) among the router's output.
fn errors(out: &[Vec<u8>]) -> Vec<(u16, Ipv4Addr)> {
    decode(out)
        .into_iter()
        .filter_map(|o| match o {
            Out::Csp(_, dst, Msg { body: Body::Error { code, .. }, .. }) => Some((code, dst)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_fragment_of_an_active_flow_is_passed_by_before_any_spec_sees_it() {
    let mut lab = Lab::new();
    lab.join(C1);
    let mut frag = contribution(C1, 1, 5);
    {
        let ip = &mut frag[14..];
        ip[6..8].copy_from_slice(&0x2000u16.to_be_bytes()); // MF set: a first fragment
        concast_wire::ipv4::Packet::new_unchecked(&mut *ip).fill_checksum();
    }
    let out = lab.feed(vec![frag.clone()]);
    assert_eq!(out, vec![frag], "sent on unchanged");
    let c = &lab.router.counters;
    assert_eq!((c.fragments_passed, c.diverted, c.merged_in), (1, 0, 0));
}

#[test]
fn a_leave_for_a_flow_the_router_does_not_have_gets_unknown_flow() {
    let mut lab = Lab::new();
    let out = lab.feed(vec![leave(C1)]);
    assert_eq!(errors(&out), vec![(3, ip(C1))], "ERROR UNKNOWN_FLOW to the leaver");
    assert_eq!(lab.router.answer("stats")["csp"]["unknown_flow"], 1);
    // A child's own LEAVE is taken silently.
    lab.join(C1);
    assert_eq!(errors(&lab.feed(vec![leave(C1)])), vec![]);
}

#[test]
fn a_join_asking_for_a_longer_hold_than_the_bound_is_granted_the_bound() {
    let mut lab = Lab::new();
    let flow = FlowId { receiver: ip(RX), group: 7 };
    let body = Body::Join(JoinBody { hold_s: u16::MAX, selector: Selector { proto: 17, dport: 5000 }, hash: NO_HASH, signed: true });
    let out = lab.feed(vec![csp_frame(C1, RX, &Msg { flow, seq: 11, body })]);
    let granted: Vec<u16> = decode(&out)
        .into_iter()
        .filter_map(|o| match o {
            Out::Csp(_, _, Msg { body: Body::JoinAck { hold_s, .. }, .. }) => Some(hold_s),
            _ => None,
        })
        .collect();
    assert_eq!(granted, vec![Config::default().max_hold_s]);
}

#[test]
fn a_forged_join_ack_is_refused_counted_and_the_flow_keeps_merging() {
    let mut lab = Lab::new();
    lab.join(C1);
    lab.join(C2);
    let flow = FlowId { receiver: ip(RX), group: 7 };
    // Signed, but by an attacker's key: R's key is pinned for the flow.
    let evil = concast_csp::sign::key_from_secret([66; 32]);
    let hash = [0xEE; 32];
    let sig = Some(concast_csp::sign::sign(&evil, flow, 100, &hash));
    let forged = Msg { flow, seq: 99, body: Body::JoinAck { hold_s: 30, path_mtu: 0, spec_size: 100, hash, sig } };
    let out = lab.feed(vec![csp_frame(RX, ROUTER, &forged)]);
    assert_eq!(errors(&out), vec![], "the ERROR goes to the forger's claimed source, R");
    assert_eq!(lab.router.answer("stats")["csp"]["specs_rejected"], 1);
    let out = lab.feed(vec![contribution(C1, 1, 5), contribution(C2, 1, 7)]);
    assert_eq!(contributions(&out), vec![(2, 12)], "the honest spec still merges");
}

#[test]
fn an_update_to_bytes_that_are_not_a_module_is_refused_not_quarantined_and_not_passed_on() {
    // protocol.md 2.7-4, 2.6-4, 2.7-15: the engine's check refuses the bytes before the CSP
    // node puts them in force: SPEC_REJECTED to R (which served them), nothing to the
    // children, and the flow keeps merging with the spec it had.
    let mut lab = Lab::new();
    lab.join(C1);
    lab.join(C2);
    let junk: Vec<u8> = (0..1500u32).map(|i| (i * 7 + 1) as u8).collect();
    let updates: Vec<Vec<u8>> = lab
        .receiver
        .install_spec(7, junk)
        .into_iter()
        .filter_map(|a| if let Action::Send { to, msg } = a { Some(csp_frame(RX, &to.to_string(), &msg)) } else { None })
        .collect();
    assert_eq!(updates.len(), 1, "R's one child, the router, is sent the update");
    let out = lab.feed(updates);
    let told: Vec<(u16, u8)> = lab
        .to_rx
        .iter()
        .filter_map(|m| if let Body::Error { code, offending, .. } = m.body { Some((code, offending)) } else { None })
        .collect();
    assert_eq!(told, vec![(2, 6)], "SPEC_REJECTED answering the last SPEC_CHUNK, no FLOW_QUARANTINED");
    assert_eq!(errors(&out), vec![], "the children were told something");
    assert!(decode(&out).iter().all(|o| !matches!(o, Out::Csp(_, _, Msg { body: Body::SpecUpdate { .. }, .. }))), "the update was passed on");
    assert_eq!(lab.router.answer("stats")["csp"]["specs_rejected"], 1);
    assert_eq!(lab.router.counters.quarantined_flows, 0);
    let out = lab.feed(vec![contribution(C1, 1, 5), contribution(C2, 1, 7)]);
    assert_eq!(contributions(&out), vec![(2, 12)], "the spec in force still merges");
}

#[test]
fn a_fragment_of_a_csp_message_is_counted_as_a_fragment() {
    // protocol.md 1.2-11: any fragment diverted to routerd, CSP included.
    let mut lab = Lab::new();
    let flow = FlowId { receiver: ip("10.0.8.8"), group: 7 };
    let body = Body::Join(JoinBody { hold_s: 30, selector: Selector::default(), hash: NO_HASH, signed: true });
    let mut frag = csp_frame(C1, "10.0.8.8", &Msg { flow, seq: 1, body });
    {
        let ip = &mut frag[14..];
        ip[6..8].copy_from_slice(&0x2000u16.to_be_bytes()); // MF set: a first fragment
        concast_wire::ipv4::Packet::new_unchecked(&mut *ip).fill_checksum();
    }
    let out = lab.feed(vec![frag.clone()]);
    assert_eq!(out, vec![frag], "sent on unchanged");
    let c = &lab.router.counters;
    assert_eq!((c.fragments_passed, c.passed_through, c.csp_in), (1, 0, 0));
}

/// A data plane that writes down what it was asked to do.
struct Recording(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl dataplane::Dataplane for Recording {
    fn divert(&mut self, flow: FlowId, sel: Selector) -> std::io::Result<()> {
        self.0.lock().unwrap().push(format!("divert {flow} {}/{}", sel.proto, sel.dport));
        Ok(())
    }
    fn undivert(&mut self, flow: FlowId) -> std::io::Result<()> {
        self.0.lock().unwrap().push(format!("undivert {flow}"));
        Ok(())
    }
    fn clear(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn describe(&self) -> String {
        "recording".into()
    }
}

#[test]
fn a_spec_update_replaces_the_engine_flow_and_leaves_the_diversion_alone() {
    let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut lab = Lab::with_dataplane(Config::default(), Box::new(Recording(calls.clone())));
    lab.join(C1);
    lab.join(C2);
    assert_eq!(*calls.lock().unwrap(), vec![format!("divert ({RX}, 7) 17/5000")]);
    let updates: Vec<Vec<u8>> = lab
        .receiver
        .install_spec(7, spec_bytes("max"))
        .into_iter()
        .filter_map(|a| if let Action::Send { to, msg } = a { Some(csp_frame(RX, &to.to_string(), &msg)) } else { None })
        .collect();
    lab.feed(updates);
    assert_eq!(lab.router.counters.flows_activated, 2, "the new spec is in force");
    let seen = calls.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "the rule was installed once: {seen:?}");
    let out = lab.feed(vec![contribution(C1, 1, 5), contribution(C2, 1, 7)]);
    assert!(!contributions(&out).is_empty(), "the flow still merges after the switch");
}

/// A data plane whose installs are refused while another controller is primary (BMv2 with a
/// second P4Runtime client holding a higher election id: "Is backup").
struct Refusing {
    refusals_left: std::sync::Arc<std::sync::Mutex<u32>>,
    installs: std::sync::Arc<std::sync::Mutex<u32>>,
}

impl dataplane::Dataplane for Refusing {
    fn divert(&mut self, _: FlowId, _: Selector) -> std::io::Result<()> {
        let mut left = self.refusals_left.lock().unwrap();
        if *left > 0 {
            *left -= 1;
            return Err(std::io::Error::other("write refused: Is backup"));
        }
        *self.installs.lock().unwrap() += 1;
        Ok(())
    }
    fn undivert(&mut self, _: FlowId) -> std::io::Result<()> {
        Ok(())
    }
    fn clear(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn describe(&self) -> String {
        "refusing".into()
    }
}

#[test]
fn a_refused_diversion_is_shown_not_active_and_retried_until_it_is_installed() {
    use concast_routerd::diversion::{RETRY_FIRST_US, RETRY_MAX_US};
    let refusals = std::sync::Arc::new(std::sync::Mutex::new(3));
    let installs = std::sync::Arc::new(std::sync::Mutex::new(0));
    let dp = Refusing { refusals_left: refusals.clone(), installs: installs.clone() };
    let mut lab = Lab::with_dataplane(Config::default(), Box::new(dp));
    lab.join(C1);
    let flows = lab.router.answer("flows");
    let f = &flows["flows"][0];
    assert_eq!(f["state"], "divert_failed", "{f}");
    assert_eq!(f["diversion"]["installed"], false);
    assert!(f["diversion"]["error"].as_str().unwrap().contains("Is backup"));
    assert_eq!(lab.router.answer("stats")["flows_not_diverted"], 1);
    assert_eq!(lab.router.counters.divert_failures, 1);

    // Nothing is tried before the retry is due; the loop is told when it is.
    let due = lab.router.next_deadline().unwrap();
    assert!(due <= lab.now + RETRY_FIRST_US, "the loop would not wake for the retry");
    let mut sink: Vec<Vec<u8>> = Vec::new();
    lab.router.tick(lab.now + RETRY_FIRST_US - 1, &mut sink);
    assert_eq!(*refusals.lock().unwrap(), 2, "retried before it was due");

    // Two more refusals, then the install goes through.
    let mut now = lab.now;
    for _ in 0..10 {
        now += RETRY_MAX_US;
        lab.router.tick(now, &mut sink);
        if *installs.lock().unwrap() == 1 {
            break;
        }
    }
    assert_eq!(*installs.lock().unwrap(), 1, "never installed");
    assert_eq!(lab.router.counters.divert_failures, 3);
    assert_eq!(lab.router.counters.divert_retries_installed, 1);
    let flows = lab.router.answer("flows");
    assert_eq!(flows["flows"][0]["state"], "active");
    assert_eq!(flows["flows"][0]["diversion"]["installed"], true);
    assert_eq!(lab.router.answer("stats")["flows_not_diverted"], 0);
    lab.router.tick(now + 10 * RETRY_MAX_US, &mut sink);
    assert_eq!(*installs.lock().unwrap(), 1, "an installed diversion is not written again");
}
