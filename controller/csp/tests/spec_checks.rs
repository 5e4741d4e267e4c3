//! What a router does with a spec it cannot use, and the answers it owes its children, in
//! virtual time on a chain: sender S -> router A -> router B -> receiver R. Routers check
//! every fetched spec as routerd does (`handle_checked`); here a spec "loads" when it starts
//! with the Wasm magic, so a spec without it stands for bytes that are not a valid module.
//! Each test names the docs/protocol.md sentences it pins.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use concast_csp::*;

const MS: u64 = 1_000;
const S: u64 = 1_000_000;
const SPEC_REJECTED: u16 = 2;
const FLOW_QUARANTINED: u16 = 6;
const NO_SPEC: u16 = 1;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}
fn s() -> Ipv4Addr {
    ip("10.0.1.1")
}
fn a() -> Ipv4Addr {
    ip("10.0.5.1")
}
fn b() -> Ipv4Addr {
    ip("10.0.5.2")
}
fn r() -> Ipv4Addr {
    ip("10.0.9.9")
}
fn flow() -> FlowId {
    FlowId { receiver: r(), group: 7 }
}

/// A module the routers' check accepts (Wasm magic first), `n` bytes.
fn good_spec(n: usize, salt: u8) -> Vec<u8> {
    let mut v: Vec<u8> = b"\0asm".to_vec();
    v.extend((4..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt)));
    v
}

/// Bytes R signs but that are not a module: the check refuses them.
fn junk_spec(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(7).wrapping_add(3)).collect()
}

fn loads(bytes: &[u8]) -> Result<(), String> {
    if bytes.starts_with(b"\0asm") {
        Ok(())
    } else {
        Err("not a valid WebAssembly module".into())
    }
}

/// One message on the wire: (from, to, msg).
type Wire = (Ipv4Addr, Ipv4Addr, Msg);

struct Chain {
    nodes: Vec<(Ipv4Addr, Node)>,
    now: u64,
    queue: VecDeque<Wire>,
    /// Every message sent, in order.
    sent: Vec<Wire>,
    /// Every other action, by node.
    log: Vec<(Ipv4Addr, Action)>,
    /// Drop a message when this returns true.
    loss: Box<dyn FnMut(&Msg) -> bool>,
}

impl Chain {
    fn new(cfg: Config) -> Chain {
        let mut rx = Node::new(r(), Role::Host, Config::default());
        rx.set_signing_key(sign::key_from_secret([9; 32]));
        let nodes = vec![
            (s(), Node::new(s(), Role::Host, cfg.clone())),
            (a(), Node::new(a(), Role::Router, cfg.clone())),
            (b(), Node::new(b(), Role::Router, cfg)),
            (r(), rx),
        ];
        Chain { nodes, now: 0, queue: VecDeque::new(), sent: Vec::new(), log: Vec::new(), loss: Box::new(|_| false) }
    }

    fn node(&mut self, at: Ipv4Addr) -> &mut Node {
        &mut self.nodes.iter_mut().find(|(x, _)| *x == at).unwrap().1
    }

    fn apply(&mut self, at: Ipv4Addr, out: Vec<Action>) {
        for act in out {
            match act {
                Action::Send { to, msg } => {
                    self.sent.push((at, to, msg.clone()));
                    if !(self.loss)(&msg) {
                        self.queue.push_back((at, to, msg));
                    }
                }
                other => self.log.push((at, other)),
            }
        }
    }

    /// Hop by hop along the chain; the first node that does not forward takes it.
    fn deliver(&mut self, src: Ipv4Addr, dst: Ipv4Addr, msg: Msg) {
        let order: Vec<Ipv4Addr> = self.nodes.iter().map(|(x, _)| *x).collect();
        let from = order.iter().position(|x| *x == src).unwrap_or(0);
        let to = order.iter().position(|x| *x == dst).unwrap();
        let hops: Vec<Ipv4Addr> = if from < to {
            order[from + 1..=to].to_vec()
        } else {
            order[to..from].iter().rev().copied().collect()
        };
        for hop in hops {
            let now = self.now;
            let out = self.node(hop).handle_checked(now, src, dst, msg.clone(), &mut loads);
            if out == vec![Action::Forward] {
                continue;
            }
            self.apply(hop, out);
            return;
        }
    }

    fn run_until(&mut self, until: u64) {
        loop {
            while let Some((src, dst, msg)) = self.queue.pop_front() {
                self.deliver(src, dst, msg);
            }
            if self.now >= until {
                break;
            }
            self.now += 10 * MS;
            for at in [s(), a(), b(), r()] {
                let now = self.now;
                let out = self.node(at).poll(now);
                self.apply(at, out);
            }
        }
    }

    fn join(&mut self) {
        let now = self.now;
        let out = self.node(s()).join(now, flow(), Selector { proto: 17, dport: 6000 });
        self.apply(s(), out);
    }

    fn state(&self, at: Ipv4Addr) -> &'static str {
        let n = &self.nodes.iter().find(|(x, _)| *x == at).unwrap().1;
        n.flows().iter().find(|f| f.flow == flow()).map_or("none", |f| f.state)
    }

    fn hash_at(&self, at: Ipv4Addr) -> SpecHash {
        let n = &self.nodes.iter().find(|(x, _)| *x == at).unwrap().1;
        n.flows().iter().find(|f| f.flow == flow()).map_or(NO_HASH, |f| f.hash)
    }

    /// Messages `from` sent to `to`, from `since` on in `sent`.
    fn between(&self, from: Ipv4Addr, to: Ipv4Addr, since: usize) -> Vec<Msg> {
        self.sent[since..].iter().filter(|(f, t, _)| *f == from && *t == to).map(|(_, _, m)| m.clone()).collect()
    }
}

fn errors(msgs: &[Msg]) -> Vec<(u16, u8, u32)> {
    msgs.iter()
        .filter_map(|m| match &m.body {
            Body::Error { code, offending, .. } => Some((*code, *offending, m.seq)),
            _ => None,
        })
        .collect()
}

fn of_type(msgs: &[Msg], t: u8) -> Vec<Msg> {
    msgs.iter().filter(|m| m.body.type_num() == t).cloned().collect()
}

/// [2.7-4], [2.6-4], [2.7-15]: an update to bytes that are not a valid module is refused
/// with SPEC_REJECTED (not FLOW_QUARANTINED), answering the SPEC_CHUNK that completed it;
/// the router keeps merging with the spec it had, does not store the bytes, does not pass
/// the update on, and does not fetch the same bytes again when they are offered again.
#[test]
fn an_update_whose_bytes_do_not_load_is_refused_kept_back_and_not_fetched_again() {
    let mut net = Chain::new(Config::default());
    let good = good_spec(1500, 1);
    let old = net.node(r()).install_spec(7, good.clone());
    assert!(old.is_empty());
    net.join();
    net.run_until(100 * MS);
    assert_eq!((net.state(a()), net.state(b()), net.state(s())), ("active", "active", "joined"));
    let since = net.sent.len();
    let junk = junk_spec(2100);
    let junk_hash = sha256(&junk);
    let out = net.node(r()).install_spec(7, junk.clone());
    net.apply(r(), out);
    net.run_until(200 * MS);

    let requests = of_type(&net.between(b(), r(), since), 5);
    assert_eq!(requests.len(), 3, "B fetched the three chunks once");
    let chunks = of_type(&net.between(r(), b(), since), 6);
    let last_chunk_seq = chunks.last().unwrap().seq;
    assert_eq!(errors(&net.between(b(), r(), since)), vec![(SPEC_REJECTED, 6, last_chunk_seq)],
               "SPEC_REJECTED with the completing SPEC_CHUNK's number and type, and nothing else");
    assert!(of_type(&net.between(b(), a(), since), 7).is_empty(), "the update was passed on");
    assert!(errors(&net.between(b(), a(), since)).is_empty(), "A was told something");
    assert_eq!(net.state(b()), "active");
    assert_eq!(net.hash_at(b()), sha256(&good), "B no longer runs the spec it had");
    assert!(!net.node(b()).store.contains(&junk_hash), "refused bytes are kept and would be served");
    assert_eq!(net.node(b()).counters.specs_rejected, 1);

    // B's refreshes name the old hash, so R offers the junk again in its JOIN_ACK: refused
    // again at once, not fetched again.
    net.run_until(25 * S);
    assert_eq!(of_type(&net.between(b(), r(), since), 5).len(), 3, "the refused bytes were fetched again");
    let again = errors(&net.between(b(), r(), since));
    assert!(again.len() >= 2 && again[1..].iter().all(|&(c, t, _)| c == SPEC_REJECTED && t == 2), "{again:?}");
    assert_eq!(net.hash_at(b()), sha256(&good));
}

/// [2.8-15], [2.3-1]: a first spec that does not load quarantines the router's flow; its
/// pending child gets FLOW_QUARANTINED copying its JOIN's number and type and no JOIN_ACK;
/// that child router quarantines too, and the sender behind it falls back to unicast.
#[test]
fn a_first_spec_that_does_not_load_quarantines_and_answers_pending_children_with_the_error() {
    let mut net = Chain::new(Config::default());
    net.node(r()).install_spec(7, junk_spec(900));
    net.join();
    net.run_until(200 * MS);
    assert_eq!(net.state(b()), "quarantined");
    let a_join = of_type(&net.between(a(), r(), 0), 1)[0].seq;
    let to_a = net.between(b(), a(), 0);
    assert_eq!(errors(&to_a), vec![(FLOW_QUARANTINED, 1, a_join)]);
    assert!(of_type(&to_a, 2).is_empty(), "a JOIN_ACK followed the error");
    assert_eq!(net.state(a()), "quarantined");
    let s_join = of_type(&net.between(s(), r(), 0), 1)[0].seq;
    assert_eq!(errors(&net.between(a(), s(), 0)), vec![(FLOW_QUARANTINED, 1, s_join)]);
    assert_eq!(net.state(s()), "unicast");
    assert_eq!(errors(&net.between(b(), r(), 0))[0].0, SPEC_REJECTED, "R was not told why");
    assert!(net.log.iter().all(|(_, x)| !matches!(x, Action::Activate { .. })));

    // A later JOIN to the quarantined flow (no spec ever in force) gets the same error.
    let since = net.sent.len();
    let body = Body::Join(JoinBody { hold_s: 30, selector: Selector::default(), hash: NO_HASH, signed: true });
    let now = net.now;
    let out = net.node(b()).handle(now, ip("10.0.3.3"), r(), Msg { flow: flow(), seq: 4242, body });
    net.apply(b(), out);
    assert_eq!(errors(&net.between(b(), ip("10.0.3.3"), since)), vec![(FLOW_QUARANTINED, 1, 4242)]);
}

/// [2.3-1]: a transfer that fails answers pending children the same way.
#[test]
fn a_failed_first_transfer_answers_pending_children_with_flow_quarantined() {
    let mut net = Chain::new(Config::default());
    net.loss = Box::new(|m| matches!(m.body, Body::SpecChunk { index: 1, .. }));
    net.node(r()).install_spec(7, good_spec(3000, 2));
    net.join();
    net.run_until(20 * S);
    assert_eq!(net.state(b()), "quarantined");
    let a_join = of_type(&net.between(a(), r(), 0), 1)[0].seq;
    let to_a = net.between(b(), a(), 0);
    assert_eq!(errors(&to_a), vec![(FLOW_QUARANTINED, 1, a_join)]);
    assert!(of_type(&to_a, 2).is_empty());
    assert_eq!(net.state(s()), "unicast");
}

/// [2.7-14]: a child that joined by REFRESH is answered with the REFRESH's own number and,
/// for errors, type 3.
#[test]
fn a_child_that_joined_by_refresh_gets_its_refreshs_number_echoed() {
    let mut net = Chain::new(Config::default());
    // No spec at R: the pending child is passed NO_SPEC.
    let body = Body::Refresh(JoinBody { hold_s: 30, selector: Selector::default(), hash: NO_HASH, signed: true });
    let out = net.node(b()).handle(0, a(), r(), Msg { flow: flow(), seq: 777, body: body.clone() });
    net.apply(b(), out);
    net.run_until(50 * MS);
    assert_eq!(errors(&net.between(b(), a(), 0)), vec![(NO_SPEC, 3, 777)]);

    // With a spec: the JOIN_ACK copies 777.
    let mut net = Chain::new(Config::default());
    net.node(r()).install_spec(7, good_spec(500, 3));
    let out = net.node(b()).handle(0, a(), r(), Msg { flow: flow(), seq: 777, body });
    net.apply(b(), out);
    net.run_until(50 * MS);
    let acks = of_type(&net.between(b(), a(), 0), 2);
    assert_eq!(acks.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![777]);
}

/// [2.9-4]: an offer is taken from whatever source it comes from when R's signature checks
/// pass; the spec is fetched from that source.
#[test]
fn a_signed_update_from_a_node_other_than_the_upstream_is_taken_and_fetched_from_it() {
    let mut net = Chain::new(Config::default());
    net.node(r()).install_spec(7, good_spec(500, 4));
    net.join();
    net.run_until(100 * MS);
    assert_eq!(net.state(a()), "active");
    // R signs a new spec; a third node (here: the test, as 10.0.7.7) offers it to A.
    let new = good_spec(600, 5);
    let key = sign::key_from_secret([9; 32]);
    let hash = sha256(&new);
    let sig = Some(sign::sign(&key, flow(), new.len() as u32, &hash));
    let other = ip("10.0.7.7");
    let now = net.now;
    let out = net.node(a()).handle(now, other, a(), Msg { flow: flow(), seq: 5, body: Body::SpecUpdate { size: 600, hash, sig } });
    let asked: Vec<Ipv4Addr> = out
        .iter()
        .filter_map(|x| match x {
            Action::Send { to, msg: Msg { body: Body::SpecRequest { .. }, .. } } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![other], "the spec is fetched from the node that offered it");
}

/// [2.9-16]: a joiner whose JOIN lacks the S flag (a node from before signing) is answered
/// with the 40-byte unsigned JOIN_ACK, and sent 36-byte SPEC_UPDATEs, by R and by a router;
/// a joiner with the flag gets R's signature.
#[test]
fn a_joiner_without_the_signed_flag_gets_unsigned_offers_from_r_and_from_routers() {
    let join = |signed| Body::Join(JoinBody { hold_s: 30, selector: Selector::default(), hash: NO_HASH, signed });
    let sig_of = |out: &[Action]| -> Vec<bool> {
        out.iter()
            .filter_map(|x| match x {
                Action::Send { msg: Msg { body: Body::JoinAck { sig, .. } | Body::SpecUpdate { sig, .. }, .. }, .. } => Some(sig.is_some()),
                _ => None,
            })
            .collect()
    };
    // At R.
    let mut net = Chain::new(Config::default());
    net.node(r()).install_spec(7, good_spec(500, 6));
    let old_child = ip("10.0.3.3");
    let out = net.node(r()).handle(0, old_child, r(), Msg { flow: flow(), seq: 1, body: join(false) });
    assert_eq!(sig_of(&out), vec![false]);
    let (Action::Send { msg, .. },) = (&out[0],) else { panic!("{out:?}") };
    let mut buf = vec![0; codec::MAX_DATAGRAM];
    let n = codec::encode(r(), old_child, msg, &mut buf).unwrap();
    assert_eq!(n, 24 + 16 + 40, "the form a node from before 2.9 parses");
    let out = net.node(r()).handle(0, b(), r(), Msg { flow: flow(), seq: 2, body: join(true) });
    assert_eq!(sig_of(&out), vec![true]);
    let out = net.node(r()).install_spec(7, good_spec(700, 7));
    let mut updates = sig_of(&out);
    updates.sort();
    assert_eq!(updates, vec![false, true], "one unsigned update (old child), one signed (B)");

    // At a router: B holds R's signature, and passes it only to a child with the flag.
    net.join();
    net.run_until(100 * MS);
    assert_eq!(net.state(b()), "active");
    let now = net.now;
    let out = net.node(b()).handle(now, old_child, r(), Msg { flow: flow(), seq: 3, body: join(false) });
    assert_eq!(sig_of(&out), vec![false]);
    let now = net.now;
    let out = net.node(b()).handle(now, ip("10.0.3.4"), r(), Msg { flow: flow(), seq: 4, body: join(true) });
    assert_eq!(sig_of(&out), vec![true]);
    // Our own JOINs and REFRESHes carry the flag.
    assert!(net.sent.iter().all(|(_, _, m)| match &m.body {
        Body::Join(j) | Body::Refresh(j) => j.signed,
        _ => true,
    }));
}

/// [2.9-11] the other way: an R from before signing ignores the flag and answers unsigned;
/// a verifying joiner refuses that with SPEC_REJECTED to R, so R's operator sees it.
#[test]
fn an_r_from_before_signing_is_told_when_a_verifying_joiner_refuses_its_offer() {
    let mut net = Chain::new(Config::default());
    net.nodes[3].1 = Node::new(r(), Role::Host, Config::default()); // R without a key
    net.node(r()).install_spec(7, good_spec(500, 8));
    net.join();
    net.run_until(100 * MS);
    let told = errors(&net.between(b(), r(), 0));
    assert_eq!(told.first().map(|e| (e.0, e.1)), Some((SPEC_REJECTED, 2)));
    assert_eq!(net.state(b()), "pending");
}

/// [2.2-2]: a child is granted the hold time it asks for (0: this node's default H), cut to
/// the bound `max(--max-hold, H)`; never more, and never less than it asked within the bound.
#[test]
fn the_granted_hold_time_is_the_asked_one_cut_to_the_bound() {
    let cfg = Config { hold_s: 30, max_hold_s: 300, ..Config::default() };
    assert_eq!(cfg.granted_hold_us(0), 30 * S);
    assert_eq!(cfg.granted_hold_us(10), 10 * S);
    assert_eq!(cfg.granted_hold_us(300), 300 * S);
    assert_eq!(cfg.granted_hold_us(301), 300 * S);
    assert_eq!(cfg.granted_hold_us(u16::MAX), 300 * S);
    // A node whose own H exceeds --max-hold grants up to H.
    let long = Config { hold_s: 600, max_hold_s: 300, ..Config::default() };
    assert_eq!(long.granted_hold_us(u16::MAX), 600 * S);
    assert_eq!(long.granted_hold_us(400), 400 * S);
}

/// [2.8-16], [2.8-17]: the timer defaults of 2.8, pinned.
#[test]
fn the_timer_defaults_are_the_specs() {
    let c = Config::default();
    assert_eq!((c.hold_s, c.refresh_us()), (30, 10 * S));
    assert_eq!((c.join_retry_us, c.join_tries), (S, 5));
    assert_eq!((c.chunk_timeout_us, c.chunk_tries, c.chunk_window), (500 * MS, 5, 16));
}

/// [2.8-17]: a router's JOIN toward R is sent again with its own number after 1, 2, 4 and
/// 8 s; after the fifth try goes unanswered for 16 s the router forgets the flow.
#[test]
fn a_routers_unanswered_join_is_retried_doubling_then_the_flow_is_forgotten() {
    let mut net = Chain::new(Config::default());
    net.loss = Box::new(|m| matches!(m.body, Body::Join(_)) && m.flow == flow());
    let body = Body::Join(JoinBody { hold_s: 300, selector: Selector::default(), hash: NO_HASH, signed: true });
    let out = net.node(b()).handle(0, a(), r(), Msg { flow: flow(), seq: 1, body });
    net.apply(b(), out);
    let mut at = Vec::new();
    let mut seqs = Vec::new();
    let mut seen = 0;
    while net.now < 40 * S {
        let joins = of_type(&net.between(b(), r(), 0), 1);
        if joins.len() > seen {
            seen = joins.len();
            at.push(net.now / MS);
            seqs.push(joins.last().unwrap().seq);
        }
        if net.state(b()) == "none" {
            break;
        }
        net.run_until(net.now + 10 * MS);
    }
    assert_eq!(at, vec![0, 1000, 3000, 7000, 15000]);
    assert!(seqs.iter().all(|&x| x == seqs[0]), "retries keep the JOIN's number: {seqs:?}");
    assert_eq!(net.now / MS, 31_000, "forgotten 16 s after the fifth try");
}
