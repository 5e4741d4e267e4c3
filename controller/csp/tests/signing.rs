//! Receiver-signed specs (docs/protocol.md 2.9) in virtual time: one router A between a
//! child C and the receiver R; forged JOIN_ACKs, SPEC_UPDATEs and chunks are fed to A by hand.

use std::net::Ipv4Addr;

use concast_csp::*;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

const SPEC_REJECTED: u16 = 2;

fn c() -> Ipv4Addr {
    ip("10.0.1.1")
}
fn a() -> Ipv4Addr {
    ip("10.0.5.1")
}
fn r() -> Ipv4Addr {
    ip("10.0.9.9")
}
fn flow() -> FlowId {
    FlowId { receiver: r(), group: 7 }
}
fn spec(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

struct Lab {
    a: Node,
    r: Node,
    /// Messages A sent to C, and A's other actions.
    to_child: Vec<Msg>,
    actions: Vec<Action>,
    /// Every message A sent, to anyone.
    a_sent: Vec<Msg>,
}

impl Lab {
    fn new(cfg: Config) -> Lab {
        let mut r = Node::new(r(), Role::Host, Config::default());
        r.set_signing_key(sign::key_from_secret([9; 32]));
        r.install_spec(7, spec(2500, 1));
        r.install_spec(8, spec(300, 2));
        Lab { a: Node::new(a(), Role::Router, cfg), r, to_child: Vec::new(), actions: Vec::new(), a_sent: Vec::new() }
    }

    /// Hands `msg` from `src` to A and carries every message between A and R until quiet.
    fn feed_a(&mut self, src: Ipv4Addr, msg: Msg) {
        let mut queue = vec![(src, a(), msg)];
        while let Some((from, to, m)) = queue.pop() {
            let out = if to == a() { self.a.handle(0, from, to, m) } else { self.r.handle(0, from, to, m) };
            for act in out {
                if let (Action::Send { msg, .. }, true) = (&act, to == a()) {
                    self.a_sent.push(msg.clone());
                }
                match act {
                    Action::Send { to: dst, msg } if dst == r() && to == a() => queue.push((a(), r(), msg)),
                    Action::Send { to: dst, msg } if dst == a() && to == r() => queue.push((r(), a(), msg)),
                    Action::Send { msg, .. } if to == a() => self.to_child.push(msg),
                    other if to == a() => self.actions.push(other),
                    _ => {}
                }
            }
        }
    }

    fn join(&mut self) {
        let body = Body::Join(JoinBody { hold_s: 30, selector: Selector::default(), hash: NO_HASH, signed: true });
        self.feed_a(c(), Msg { flow: flow(), seq: 100, body });
    }

    fn state(&self) -> &'static str {
        self.a.flows().iter().find(|f| f.flow == flow()).map_or("none", |f| f.state)
    }

    fn activated(&self) -> usize {
        self.actions.iter().filter(|x| matches!(x, Action::Activate { .. } | Action::SwitchSpec { .. })).count()
    }

    /// A's ERRORs SPEC_REJECTED sent back to whoever offered the spec.
    fn rejections(&self) -> usize {
        self.a_sent.iter().filter(|m| matches!(m.body, Body::Error { code: SPEC_REJECTED, .. })).count()
    }

    /// What R itself would answer to a JOIN for `group` (its genuine, signed JOIN_ACK).
    fn genuine_ack(&mut self, group: u32) -> Msg {
        let body = Body::Join(JoinBody { hold_s: 30, selector: Selector::default(), hash: NO_HASH, signed: true });
        let out = self.r.handle(0, ip("10.0.5.99"), r(), Msg { flow: FlowId { receiver: r(), group }, seq: 1, body });
        match out.into_iter().next() {
            Some(Action::Send { msg, .. }) => msg,
            other => panic!("R did not answer: {other:?}"),
        }
    }
}

/// A JOIN_ACK from "R" for `flow()` naming (size, hash), signed as `sig`.
fn ack(size: u32, hash: SpecHash, sig: Option<SpecSig>) -> Msg {
    Msg { flow: flow(), seq: 100, body: Body::JoinAck { hold_s: 30, path_mtu: 0, spec_size: size, hash, sig } }
}

/// A pending flow at A: C's JOIN went to R but R's answer is lost; forged answers come next.
fn pending_lab(cfg: Config) -> Lab {
    let mut lab = Lab::new(cfg);
    let body = Body::Join(JoinBody { hold_s: 30, selector: Selector::default(), hash: NO_HASH, signed: true });
    let out = lab.a.handle(0, c(), r(), Msg { flow: flow(), seq: 100, body });
    assert!(matches!(&out[0], Action::Send { to, msg: Msg { body: Body::Join(_), .. } } if *to == r()));
    assert_eq!(lab.state(), "pending");
    lab
}

#[test]
fn a_validly_signed_spec_is_fetched_run_and_its_signature_passed_to_the_child() {
    let mut lab = Lab::new(Config::default());
    lab.join();
    assert_eq!(lab.state(), "active");
    assert_eq!(lab.activated(), 1);
    assert_eq!(lab.a.counters.specs_rejected, 0);
    let key = lab.r.public_key().unwrap();
    let to_c: Vec<&Msg> = lab.to_child.iter().collect();
    match &to_c[..] {
        [Msg { body: Body::JoinAck { sig: Some(s), spec_size, hash, .. }, .. }] => {
            assert_eq!(s.key, key);
            assert!(sign::verify(flow(), *spec_size, hash, s), "C can check R's signature itself");
        }
        other => panic!("expected one signed JOIN_ACK to C, got {other:?}"),
    }
}

#[test]
fn an_altered_hash_is_refused_with_spec_rejected_and_counted() {
    let mut lab = pending_lab(Config::default());
    let Body::JoinAck { spec_size, mut hash, sig, .. } = lab.genuine_ack(7).body else { panic!() };
    hash[0] ^= 1;
    lab.feed_a(r(), ack(spec_size, hash, sig));
    assert_eq!((lab.a.counters.specs_rejected, lab.rejections(), lab.activated()), (1, 1, 0));
    assert_eq!(lab.state(), "pending", "the forgery changes nothing: the real answer is still awaited");
}

#[test]
fn an_altered_size_is_refused() {
    let mut lab = pending_lab(Config::default());
    let Body::JoinAck { spec_size, hash, sig, .. } = lab.genuine_ack(7).body else { panic!() };
    lab.feed_a(r(), ack(spec_size + 1, hash, sig));
    assert_eq!((lab.a.counters.specs_rejected, lab.activated()), (1, 0));
}

#[test]
fn an_altered_spec_byte_is_refused_after_the_fetch_and_never_run() {
    let mut lab = pending_lab(Config::default());
    let genuine = lab.genuine_ack(7);
    let Body::JoinAck { spec_size, hash, .. } = genuine.body else { panic!() };
    // An upstream that signs honestly but serves one altered byte.
    let mut bytes = spec(2500, 1);
    bytes[1500] ^= 0x80;
    let out = lab.a.handle(0, r(), a(), genuine);
    let requests: Vec<Msg> = out
        .into_iter()
        .filter_map(|x| match x {
            Action::Send { msg: m @ Msg { body: Body::SpecRequest { .. }, .. }, .. } => Some(m),
            _ => None,
        })
        .collect();
    assert!(!requests.is_empty(), "A fetches the signed hash");
    let count = chunk_count(spec_size);
    let mut errors = 0;
    for i in 0..count {
        let start = usize::from(i) * CHUNK_SIZE;
        let data = bytes[start..(start + CHUNK_SIZE).min(bytes.len())].to_vec();
        let body = Body::SpecChunk { hash, size: spec_size, index: i, count, data };
        for x in lab.a.handle(0, r(), a(), Msg { flow: flow(), seq: 200 + u32::from(i), body }) {
            match x {
                Action::Send { to, msg: Msg { body: Body::Error { code: SPEC_REJECTED, .. }, .. } } if to == r() => errors += 1,
                Action::Activate { .. } | Action::SwitchSpec { .. } => panic!("altered spec activated"),
                _ => {}
            }
        }
    }
    assert_eq!((errors, lab.a.counters.specs_rejected), (1, 1));
    assert_eq!(lab.state(), "quarantined", "datagrams go unmerged rather than through an unverified spec");
}

#[test]
fn a_signature_under_another_key_is_refused() {
    let mut lab = pending_lab(Config::default());
    let Body::JoinAck { spec_size, hash, sig, .. } = lab.genuine_ack(7).body else { panic!() };
    // R's signature presented with the attacker's key, and the attacker's own signature.
    let evil = sign::key_from_secret([66; 32]);
    let mut swapped = sig.unwrap();
    swapped.key = evil.verifying_key().to_bytes();
    lab.feed_a(r(), ack(spec_size, hash, Some(swapped)));
    assert_eq!(lab.a.counters.specs_rejected, 1);
    // Once R's key is pinned, a spec the attacker validly signed is refused too.
    let mut lab = Lab::new(Config::default());
    lab.join();
    let forged_spec = spec(400, 9);
    let fhash = sha256(&forged_spec);
    let fsig = sign::sign(&evil, flow(), 400, &fhash);
    assert!(sign::verify(flow(), 400, &fhash, &fsig), "the forgery is a valid signature in itself");
    lab.feed_a(ip("10.0.66.6"), ack(400, fhash, Some(fsig)));
    let update = Msg { flow: flow(), seq: 5, body: Body::SpecUpdate { size: 400, hash: fhash, sig: Some(fsig) } };
    lab.feed_a(ip("10.0.66.6"), update);
    assert_eq!((lab.a.counters.specs_rejected, lab.rejections()), (2, 2));
    assert_eq!((lab.state(), lab.activated()), ("active", 1), "the honest spec stays in force");
    assert_eq!(lab.a.flows()[0].hash, sha256(&spec(2500, 1)));
}

#[test]
fn a_signature_for_another_flow_is_refused() {
    let mut lab = pending_lab(Config::default());
    // R's genuine signature for group 8 replayed in a JOIN_ACK for group 7.
    let Body::JoinAck { spec_size, hash, sig, .. } = lab.genuine_ack(8).body else { panic!() };
    lab.feed_a(r(), ack(spec_size, hash, sig));
    assert_eq!((lab.a.counters.specs_rejected, lab.activated()), (1, 0));
    assert_eq!(lab.state(), "pending");
}

#[test]
fn unsigned_specs_are_refused_by_default_and_taken_when_the_node_opts_out() {
    let mut lab = pending_lab(Config::default());
    let Body::JoinAck { spec_size, hash, .. } = lab.genuine_ack(7).body else { panic!() };
    lab.feed_a(r(), ack(spec_size, hash, None));
    assert_eq!((lab.a.counters.specs_rejected, lab.activated()), (1, 0));

    let mut lab = Lab::new(Config { verify_specs: false, ..Config::default() });
    let mut r = Node::new(r(), Role::Host, Config::default()); // an R that does not sign
    r.install_spec(7, spec(2500, 1));
    lab.r = r;
    lab.join();
    assert_eq!((lab.state(), lab.a.counters.specs_rejected), ("active", 0));
}

#[test]
fn opting_out_still_checks_signatures_that_are_present_and_pins_their_key() {
    let mut lab = Lab::new(Config { verify_specs: false, ..Config::default() });
    lab.join();
    assert_eq!(lab.state(), "active");
    // The key is pinned: an unsigned offer is now a downgrade and refused.
    let h = sha256(&spec(10, 3));
    lab.feed_a(r(), Msg { flow: flow(), seq: 5, body: Body::SpecUpdate { size: 10, hash: h, sig: None } });
    assert_eq!(lab.a.counters.specs_rejected, 1);
}

#[test]
fn a_forged_chunk_for_no_transfer_is_ignored_and_counted() {
    let mut lab = Lab::new(Config::default());
    lab.join();
    let body = Body::SpecChunk { hash: [5; 32], size: 10, index: 0, count: 1, data: vec![0; 10] };
    lab.feed_a(r(), Msg { flow: flow(), seq: 9, body });
    assert_eq!(lab.a.counters.chunks_unsolicited, 1);
    assert_eq!((lab.state(), lab.activated()), ("active", 1));
}

#[test]
fn r_re_signs_when_the_spec_is_replaced_and_the_router_takes_the_update() {
    let mut lab = Lab::new(Config::default());
    lab.join();
    // R's SPEC_UPDATE to A (its child) carries R's signature over the new spec.
    let out = lab.r.install_spec(7, spec(700, 4));
    let [Action::Send { msg, .. }] = &out[..] else { panic!("one SPEC_UPDATE: {out:?}") };
    assert!(matches!(msg.body, Body::SpecUpdate { sig: Some(_), .. }));
    lab.feed_a(r(), msg.clone());
    assert_eq!(lab.a.counters.specs_rejected, 0);
    assert_eq!(lab.a.flows()[0].hash, sha256(&spec(700, 4)));
    // ... and A passes the same signature on to C.
    let last = lab.to_child.last().unwrap();
    assert!(matches!(&last.body, Body::SpecUpdate { sig: Some(s), .. } if s.key == lab.r.public_key().unwrap()));
}

#[test]
fn r_logs_a_childs_refusal_of_its_spec() {
    let mut lab = Lab::new(Config::default());
    let err = Msg::error(flow(), 100, ErrorCode::SpecRejected, 2, "unsigned spec");
    let out = lab.r.handle(0, a(), r(), err);
    assert!(
        matches!(&out[..], [Action::Log { text }] if text.contains("SPEC_REJECTED") && text.contains("unsigned spec")),
        "{out:?}"
    );
}

#[test]
fn a_receiver_key_configured_in_advance_leaves_no_first_use_to_win() {
    let evil = sign::key_from_secret([66; 32]);
    let real = sign::key_from_secret([9; 32]).verifying_key().to_bytes();
    let cfg = Config { receiver_keys: [(r(), real)].into_iter().collect(), ..Config::default() };
    let mut lab = pending_lab(cfg);
    // The attacker answers first, with a valid signature by its own key: refused.
    let forged_spec = spec(400, 9);
    let fhash = sha256(&forged_spec);
    lab.feed_a(r(), ack(400, fhash, Some(sign::sign(&evil, flow(), 400, &fhash))));
    assert_eq!((lab.a.counters.specs_rejected, lab.activated(), lab.state()), (1, 0, "pending"));
    // R's own answer is still taken.
    let genuine = lab.genuine_ack(7);
    lab.feed_a(r(), genuine);
    assert_eq!((lab.state(), lab.activated()), ("active", 1));
}
