//! CSP across a simulated network in virtual time: senders, routers (capable and
//! oblivious) and a receiver exchanging real `Msg`s along static paths.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::Ipv4Addr;

use concast_csp::*;

const MS: u64 = 1_000;
const S: u64 = 1_000_000;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// A network: nodes by address, and for each (from, to) the hops in between.
struct Net {
    nodes: BTreeMap<Ipv4Addr, Node>,
    oblivious: Vec<Ipv4Addr>,
    paths: HashMap<(Ipv4Addr, Ipv4Addr), Vec<Ipv4Addr>>,
    now: u64,
    queue: VecDeque<(Ipv4Addr, Ipv4Addr, Msg)>,
    /// Every action a node produced, for assertions: (node, action).
    log: Vec<(Ipv4Addr, Action)>,
    /// Drop a message when this returns true.
    loss: Box<dyn FnMut(&Msg) -> bool>,
    sent: usize,
}

impl Net {
    /// senders s1..s4 -> routers a (s1,s2) and b (s3,s4) -> router c -> receiver r.
    fn tree(c_capable: bool) -> Net {
        let (r, a, b, c) = (ip("10.0.9.9"), ip("10.0.5.1"), ip("10.0.5.2"), ip("10.0.5.3"));
        let senders = [ip("10.0.1.1"), ip("10.0.1.2"), ip("10.0.2.1"), ip("10.0.2.2")];
        let mut nodes = BTreeMap::new();
        let cfg = Config::default();
        let mut rx = Node::new(r, Role::Host, cfg.clone());
        rx.set_signing_key(sign::key_from_secret([9; 32])); // R signs; everyone else verifies
        nodes.insert(r, rx);
        for x in [a, b, c] {
            nodes.insert(x, Node::new(x, Role::Router, cfg.clone()));
        }
        for s in senders {
            nodes.insert(s, Node::new(s, Role::Host, cfg.clone()));
        }
        let mut up: HashMap<Ipv4Addr, Vec<Ipv4Addr>> = HashMap::new(); // node -> hops to r
        for (i, s) in senders.iter().enumerate() {
            up.insert(*s, vec![if i < 2 { a } else { b }, c, r]);
        }
        up.insert(a, vec![c, r]);
        up.insert(b, vec![c, r]);
        up.insert(c, vec![r]);
        up.insert(r, vec![r]);
        let mut paths = HashMap::new();
        for (&x, hops) in &up {
            for (&y, hops_y) in &up {
                // path x -> y: up from x to the first common node, then down to y
                let mut xs = vec![x];
                xs.extend(hops.iter().copied());
                let mut ys = vec![y];
                ys.extend(hops_y.iter().copied());
                let meet = xs.iter().position(|n| ys.contains(n)).unwrap();
                let mut p: Vec<Ipv4Addr> = xs[1..=meet].to_vec();
                let down = ys.iter().position(|n| *n == xs[meet]).unwrap();
                p.extend(ys[..down].iter().rev());
                p.dedup();
                paths.insert((x, y), p);
            }
        }
        Net {
            nodes,
            oblivious: if c_capable { vec![] } else { vec![c] },
            paths,
            now: 0,
            queue: VecDeque::new(),
            log: Vec::new(),
            loss: Box::new(|_| false),
            sent: 0,
        }
    }

    fn r() -> Ipv4Addr {
        ip("10.0.9.9")
    }
    fn senders() -> [Ipv4Addr; 4] {
        [ip("10.0.1.1"), ip("10.0.1.2"), ip("10.0.2.1"), ip("10.0.2.2")]
    }
    fn flow() -> FlowId {
        FlowId { receiver: Net::r(), group: 7 }
    }

    fn node(&mut self, a: Ipv4Addr) -> &mut Node {
        self.nodes.get_mut(&a).unwrap()
    }

    fn apply(&mut self, at: Ipv4Addr, actions: Vec<Action>) {
        for a in actions {
            if let Action::Send { to, msg } = &a {
                self.sent += 1;
                if !(self.loss)(msg) {
                    self.queue.push_back((at, *to, msg.clone()));
                }
            }
            self.log.push((at, a));
        }
    }

    /// Deliver one message hop by hop; capable routers on the path may take it.
    fn deliver(&mut self, src: Ipv4Addr, dst: Ipv4Addr, msg: Msg) {
        let path = self.paths[&(src, dst)].clone();
        for hop in path {
            if self.oblivious.contains(&hop) || !self.nodes.contains_key(&hop) {
                continue;
            }
            let now = self.now;
            let out = self.node(hop).handle(now, src, dst, msg.clone());
            if out == vec![Action::Forward] {
                continue;
            }
            self.apply(hop, out);
            return;
        }
    }

    /// Deliver everything queued (instantly), then advance time in 10 ms steps to `until`.
    fn run_until(&mut self, until: u64) {
        loop {
            while let Some((src, dst, msg)) = self.queue.pop_front() {
                self.deliver(src, dst, msg);
            }
            if self.now >= until {
                break;
            }
            self.now += 10 * MS;
            let addrs: Vec<Ipv4Addr> = self.nodes.keys().copied().collect();
            for a in addrs {
                let now = self.now;
                let out = self.node(a).poll(now);
                self.apply(a, out);
            }
        }
    }

    fn state(&self, at: Ipv4Addr) -> Vec<(&'static str, &'static str)> {
        self.nodes[&at].flows().iter().map(|f| (f.role, f.state)).collect()
    }

    fn actions(&self, at: Ipv4Addr) -> Vec<&Action> {
        self.log.iter().filter(|(n, _)| *n == at).map(|(_, a)| a).collect()
    }

    fn join_all(&mut self) {
        for s in Net::senders() {
            let now = self.now;
            let out = self.node(s).join(now, Net::flow(), Selector { proto: 17, dport: 6000 });
            self.apply(s, out);
        }
    }
}

fn spec(n: usize, salt: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt)).collect()
}

fn activated(net: &Net, at: Ipv4Addr) -> Option<SpecHash> {
    net.actions(at).iter().rev().find_map(|a| match a {
        Action::Activate { hash, .. } | Action::SwitchSpec { hash, .. } => Some(*hash),
        _ => None,
    })
}

#[test]
fn join_through_two_levels_fetches_the_spec_hop_by_hop() {
    let mut net = Net::tree(true);
    let bytes = spec(5000, 1); // 5 chunks
    let h = sha256(&bytes);
    net.node(Net::r()).install_spec(7, bytes.clone());
    net.join_all();
    net.run_until(100 * MS);
    for x in ["10.0.5.1", "10.0.5.2", "10.0.5.3"] {
        assert_eq!(net.state(ip(x)), vec![("router", "active")], "router {x}");
        assert_eq!(activated(&net, ip(x)), Some(h));
        assert_eq!(net.nodes[&ip(x)].store.get(&h).unwrap().as_slice(), &bytes[..]);
    }
    for s in Net::senders() {
        assert_eq!(net.state(s), vec![("sender", "joined")]);
        assert_eq!(activated(&net, s), Some(h));
    }
    // The receiver sees one child only: router c. Routers a and b each see two senders.
    let rx = &net.nodes[&Net::r()].flows()[0];
    assert_eq!(rx.children, vec![ip("10.0.5.3")]);
    let a = &net.nodes[&ip("10.0.5.1")].flows()[0];
    assert_eq!(a.children, vec![ip("10.0.1.1"), ip("10.0.1.2")]);
    assert_eq!(a.upstream, Some(ip("10.0.5.3")));
}

#[test]
fn oblivious_router_is_crossed_untouched() {
    let mut net = Net::tree(false);
    net.node(Net::r()).install_spec(7, spec(300, 2));
    net.join_all();
    net.run_until(100 * MS);
    assert!(net.state(ip("10.0.5.3")).is_empty(), "oblivious c holds no state");
    let rx = &net.nodes[&Net::r()].flows()[0];
    assert_eq!(rx.children, vec![ip("10.0.5.1"), ip("10.0.5.2")]);
    for s in Net::senders() {
        assert_eq!(net.state(s), vec![("sender", "joined")]);
    }
}

#[test]
fn no_spec_at_receiver_makes_senders_fall_back() {
    let mut net = Net::tree(true);
    net.join_all();
    net.run_until(100 * MS);
    for s in Net::senders() {
        assert_eq!(net.state(s), vec![("sender", "unicast")]);
        assert!(net.actions(s).iter().any(|a| matches!(a, Action::Fallback { reason, .. } if reason.contains("NoSpec"))));
    }
    for x in ["10.0.5.1", "10.0.5.2", "10.0.5.3"] {
        assert!(net.state(ip(x)).is_empty(), "router {x} forgot the flow");
    }
}

#[test]
fn silent_receiver_makes_senders_fall_back_after_retries() {
    let mut net = Net::tree(false);
    net.nodes.remove(&Net::r());
    net.oblivious.extend([ip("10.0.5.1"), ip("10.0.5.2")]);
    net.join_all();
    net.run_until(40 * S);
    for s in Net::senders() {
        assert_eq!(net.state(s), vec![("sender", "unicast")]);
        let joins = net.log.iter().filter(|(n, a)| *n == s && matches!(a, Action::Send { msg: Msg { body: Body::Join(_), .. }, .. })).count();
        assert_eq!(joins, 5, "one JOIN and four retransmissions");
    }
}

#[test]
fn refreshes_keep_state_and_rebuild_it_after_a_router_restart() {
    let mut net = Net::tree(true);
    net.node(Net::r()).install_spec(7, spec(2000, 3));
    net.join_all();
    net.run_until(95 * S); // three hold times: nothing may expire
    assert_eq!(net.state(ip("10.0.5.1")), vec![("router", "active")]);
    assert_eq!(net.nodes[&Net::r()].flows()[0].children.len(), 1);
    // routerd on a restarts with empty state
    net.nodes.insert(ip("10.0.5.1"), Node::new(ip("10.0.5.1"), Role::Router, Config::default()));
    let t = net.now;
    net.run_until(t + 11 * S); // one refresh interval
    assert_eq!(net.state(ip("10.0.5.1")), vec![("router", "active")]);
    let a = &net.nodes[&ip("10.0.5.1")].flows()[0];
    assert_eq!(a.children.len(), 2);
    assert_eq!(a.upstream, Some(ip("10.0.5.3")));
}

#[test]
fn leave_prunes_hop_by_hop() {
    let mut net = Net::tree(true);
    net.node(Net::r()).install_spec(7, spec(100, 4));
    net.join_all();
    net.run_until(100 * MS);
    for s in &Net::senders()[..2] {
        let out = net.node(*s).leave(Net::flow());
        assert!(out.iter().any(|a| matches!(a, Action::Deactivate { .. })));
        net.apply(*s, out);
    }
    net.run_until(150 * MS);
    let a = &net.nodes[&ip("10.0.5.1")].flows()[0];
    assert_eq!(a.children.len(), 2, "within the leave delay, the children still count");
    net.run_until(400 * MS);
    assert!(net.state(ip("10.0.5.1")).is_empty(), "a lost both children and pruned itself");
    assert!(net.actions(ip("10.0.5.1")).iter().any(|a| matches!(a, Action::Deactivate { .. })));
    assert_eq!(net.nodes[&ip("10.0.5.3")].flows()[0].children, vec![ip("10.0.5.2")]);
}

#[test]
fn without_a_leave_delay_a_leave_prunes_at_once() {
    let mut net = Net::tree(true);
    let cfg = Config { leave_delay_us: 0, ..Config::default() };
    let a = ip("10.0.5.1");
    net.nodes.insert(a, Node::new(a, Role::Router, cfg));
    net.node(Net::r()).install_spec(7, spec(100, 4));
    net.join_all();
    net.run_until(100 * MS);
    for s in &Net::senders()[..2] {
        let out = net.node(*s).leave(Net::flow());
        net.apply(*s, out);
        net.run_until(100 * MS);
    }
    assert!(net.state(a).is_empty(), "pruned without waiting");
}

#[test]
fn a_child_that_joins_again_within_its_leave_delay_stays() {
    let mut net = Net::tree(true);
    net.node(Net::r()).install_spec(7, spec(100, 4));
    net.join_all();
    net.run_until(100 * MS);
    let s1 = Net::senders()[0];
    let out = net.node(s1).leave(Net::flow());
    net.apply(s1, out);
    net.run_until(130 * MS);
    let now = net.now;
    let out = net.node(s1).join(now, Net::flow(), Selector { proto: 17, dport: 6000 });
    net.apply(s1, out);
    net.run_until(1000 * MS);
    assert_eq!(net.nodes[&ip("10.0.5.1")].flows()[0].children.len(), 2);
}

/// Merge state is flushed before the LEAVE goes upstream, so what a leaving node held
/// reaches its upstream router while that router still merges the flow.
#[test]
fn leaving_flushes_before_the_leave_is_sent() {
    let mut net = Net::tree(true);
    net.node(Net::r()).install_spec(7, spec(100, 4));
    net.join_all();
    net.run_until(100 * MS);
    let is_leave = |a: &Action| matches!(a, Action::Send { msg, .. } if msg.body == Body::Leave);
    let deactivate = |a: &Action| matches!(a, Action::Deactivate { .. });
    for s in &Net::senders()[..2] {
        let out = net.node(*s).leave(Net::flow());
        let flush = out.iter().position(deactivate).expect("sender flushes");
        let leave = out.iter().position(is_leave).expect("sender sends LEAVE");
        assert!(flush < leave, "sender {s}: {out:?}");
        net.apply(*s, out);
    }
    net.run_until(200 * MS);
    let a = net.actions(ip("10.0.5.1"));
    let flush = a.iter().position(|x| deactivate(x)).expect("router a flushes");
    let leave = a.iter().position(|x| is_leave(x)).expect("router a sends LEAVE");
    assert!(flush < leave, "router a: {a:?}");
}

#[test]
fn silent_children_expire_after_the_hold_time() {
    let mut net = Net::tree(true);
    net.node(Net::r()).install_spec(7, spec(100, 5));
    net.join_all();
    net.run_until(100 * MS);
    for s in Net::senders() {
        net.nodes.remove(&s); // hosts vanish without LEAVE
    }
    net.run_until(31 * S);
    assert!(net.state(ip("10.0.5.1")).is_empty());
    assert!(net.state(ip("10.0.5.3")).is_empty(), "c pruned after a and b left");
    net.run_until(62 * S);
    assert!(net.nodes[&Net::r()].flows()[0].children.is_empty());
}

#[test]
fn spec_update_reaches_every_node() {
    let mut net = Net::tree(true);
    net.node(Net::r()).install_spec(7, spec(1500, 6));
    net.join_all();
    net.run_until(100 * MS);
    let new = spec(3000, 7);
    let h2 = sha256(&new);
    let out = net.node(Net::r()).install_spec(7, new);
    assert_eq!(out.len(), 1, "one SPEC_UPDATE, to router c");
    net.apply(Net::r(), out);
    net.run_until(200 * MS);
    for x in ["10.0.5.1", "10.0.5.2", "10.0.5.3", "10.0.1.1", "10.0.2.2"] {
        assert_eq!(activated(&net, ip(x)), Some(h2), "node {x} switched");
    }
    assert!(net.log.iter().any(|(_, a)| matches!(a, Action::SwitchSpec { .. })));
}

#[test]
fn lost_chunks_are_requested_again() {
    let mut net = Net::tree(true);
    let mut n = 0;
    net.loss = Box::new(move |m| {
        if let Body::SpecChunk { .. } = m.body {
            n += 1;
            n % 3 == 0
        } else {
            false
        }
    });
    net.node(Net::r()).install_spec(7, spec(20_000, 8)); // 20 chunks
    net.join_all();
    // Retries back off (0.5, 1, 2, 4 s) and the window halves on each timeout.
    net.run_until(15 * S);
    for s in Net::senders() {
        assert_eq!(net.state(s), vec![("sender", "joined")]);
    }
}

#[test]
fn a_chunk_that_never_arrives_quarantines_the_router_flow() {
    let mut net = Net::tree(true);
    net.loss = Box::new(|m| matches!(m.body, Body::SpecChunk { index: 1, .. }));
    net.node(Net::r()).install_spec(7, spec(5000, 9));
    net.join_all();
    net.run_until(20 * S); // five tries: 0.5 + 1 + 2 + 4 + 4 s
    assert_eq!(net.state(ip("10.0.5.3")), vec![("router", "quarantined")]);
    assert!(net.log.iter().any(|(_, a)| matches!(a, Action::Log { text } if text.contains("chunk 1 unanswered"))));
}

#[test]
fn spec_request_for_unknown_hash_gets_spec_not_found() {
    let mut net = Net::tree(true);
    let r = Net::r();
    let msg = Msg { flow: Net::flow(), seq: 9, body: Body::SpecRequest { hash: [1; 32], index: 0 } };
    let out = net.node(r).handle(0, ip("10.0.5.3"), r, msg);
    match &out[..] {
        [Action::Send { msg: Msg { seq: 9, body: Body::Error { code: 4, .. }, .. }, .. }] => {}
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn messages_for_others_are_forwarded_by_routers() {
    let mut net = Net::tree(true);
    let msg = Msg { flow: Net::flow(), seq: 1, body: Body::JoinAck { hold_s: 30, path_mtu: 0, spec_size: 1, hash: [2; 32], sig: None } };
    let out = net.node(ip("10.0.5.3")).handle(0, Net::r(), ip("10.0.1.1"), msg);
    assert_eq!(out, vec![Action::Forward]);
}

#[test]
fn timers_wake_only_when_due() {
    let mut net = Net::tree(true);
    net.node(Net::r()).install_spec(7, spec(100, 10));
    net.join_all();
    net.run_until(100 * MS);
    let before = net.sent;
    net.run_until(9 * S);
    assert_eq!(net.sent, before, "nothing is sent between refreshes");
    net.run_until(11 * S);
    assert!(net.sent > before, "refreshes went out at H/3");
}
