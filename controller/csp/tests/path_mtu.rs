//! Path MTU learned through CSP (docs/protocol.md 2.3), in virtual time on a line of nodes:
//! sender S, routers A, B, C, receiver R. Each JOIN_ACK carries the smallest MTU from its
//! sender to R, its link toward the joiner included; each joiner keeps the minimum of that
//! and its own link toward R.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use concast_csp::*;

const MS: u64 = 1_000;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// S - A - B - C - R, with `mtus[i]` the MTU of the link between node i and node i+1.
struct Line {
    addrs: Vec<Ipv4Addr>,
    nodes: Vec<Node>,
    queue: VecDeque<(usize, Ipv4Addr, Msg)>,
    now: u64,
    old: Vec<usize>,
}

const S: usize = 0;
const R: usize = 4;

impl Line {
    /// `mtus: None` gives the nodes no link MTUs at all; JOIN_ACKs from `old` nodes carry
    /// 0, as from a node that predates the field.
    fn new(mtus: Option<[u16; 4]>, old: &[usize]) -> Line {
        let addrs: Vec<Ipv4Addr> =
            ["10.0.1.1", "10.0.5.1", "10.0.5.2", "10.0.5.3", "10.0.9.9"].iter().map(|a| ip(a)).collect();
        let mut nodes = Vec::new();
        for (i, &a) in addrs.iter().enumerate() {
            let role = if i == S || i == R { Role::Host } else { Role::Router };
            let mut n = Node::new(a, role, Config::default());
            if i == R {
                n.set_signing_key(concast_csp::sign::key_from_secret([9; 32]));
            }
            if let Some(m) = mtus {
                let line = addrs.clone();
                // The route toward a node further up the line leaves by link i, else by i-1.
                n.set_link_mtu(Box::new(move |to| {
                    let j = line.iter().position(|&x| x == to)?;
                    if j > i {
                        Some(m[i])
                    } else if j < i {
                        Some(m[i - 1])
                    } else {
                        None
                    }
                }));
            }
            nodes.push(n);
        }
        Line { addrs, nodes, queue: VecDeque::new(), now: 0, old: old.to_vec() }
    }

    fn flow(&self) -> FlowId {
        FlowId { receiver: self.addrs[R], group: 1 }
    }

    fn index(&self, a: Ipv4Addr) -> usize {
        self.addrs.iter().position(|&x| x == a).expect("a node of the line")
    }

    fn apply(&mut self, at: usize, actions: Vec<Action>) {
        for a in actions {
            if let Action::Send { to, mut msg } = a {
                if let Body::JoinAck { path_mtu, .. } = &mut msg.body {
                    if self.old.contains(&at) {
                        *path_mtu = 0;
                    }
                }
                self.queue.push_back((at, to, msg));
            }
        }
    }

    /// Hands a message to each node between `from` and `to` in turn until one takes it.
    fn deliver(&mut self, from: usize, to: Ipv4Addr, msg: Msg) {
        let dst = self.index(to);
        let hops: Vec<usize> = if dst > from { (from + 1..=dst).collect() } else { (dst..from).rev().collect() };
        for h in hops {
            let src = self.addrs[from];
            let out = self.nodes[h].handle(self.now, src, to, msg.clone());
            if out == vec![Action::Forward] {
                continue;
            }
            self.apply(h, out);
            return;
        }
    }

    fn run(&mut self, until: u64) {
        while self.now < until {
            while let Some((from, to, msg)) = self.queue.pop_front() {
                self.deliver(from, to, msg);
            }
            self.now += 10 * MS;
            for i in 0..self.nodes.len() {
                let out = self.nodes[i].poll(self.now);
                self.apply(i, out);
            }
        }
    }

    fn join(&mut self) {
        let flow = self.flow();
        self.nodes[R].install_spec(1, vec![7; 3000]);
        let out = self.nodes[S].join(0, flow, Selector { proto: 254, dport: 0 });
        self.apply(S, out);
        self.run(200 * MS);
        for i in 1..R {
            assert_eq!(self.nodes[i].flows()[0].state, "active", "router {i} active");
        }
        assert_eq!(self.nodes[S].flows()[0].state, "joined");
    }

    fn mtus(&self) -> Vec<Option<u16>> {
        (S..R).map(|i| self.nodes[i].path_mtu(self.flow())).collect()
    }
}

#[test]
fn each_router_learns_the_smallest_mtu_between_it_and_r() {
    // S -9000- A -1000- B -9000- C -9000- R: B and C see only jumbo links toward R; A and
    // S are behind the 1000-byte link.
    let mut line = Line::new(Some([9000, 1000, 9000, 9000]), &[]);
    line.join();
    assert_eq!(line.mtus(), vec![Some(1000), Some(1000), Some(9000), Some(9000)]);
    let status = line.nodes[1].flows();
    assert_eq!(status[0].path_mtu, Some(1000), "shown in the router's flow status");
}

#[test]
fn the_small_link_counts_wherever_it_is() {
    // Next to R: everyone is behind it.
    let mut line = Line::new(Some([9000, 9000, 9000, 1500]), &[]);
    line.join();
    assert_eq!(line.mtus(), vec![Some(1500); 4]);
    // Next to S: only S is.
    let mut line = Line::new(Some([576, 9000, 9000, 9000]), &[]);
    line.join();
    assert_eq!(line.mtus(), vec![Some(576), Some(9000), Some(9000), Some(9000)]);
}

#[test]
fn behind_a_node_that_sends_zero_only_own_links_count() {
    // C predates the field (its JOIN_ACK says 0): B still counts its own 1500-byte link
    // toward R, and everyone behind B learns it from B.
    let mut line = Line::new(Some([9000, 9000, 1500, 9000]), &[3]);
    line.join();
    assert_eq!(line.mtus(), vec![Some(1500), Some(1500), Some(1500), Some(9000)]);
    // The limit: a small link beyond the old node is not learned (C-R here).
    let mut line = Line::new(Some([9000, 9000, 9000, 1000]), &[3]);
    line.join();
    assert_eq!(line.mtus(), vec![Some(9000), Some(9000), Some(9000), Some(1000)]);
}

#[test]
fn without_link_mtus_nothing_is_known() {
    let mut line = Line::new(None, &[]);
    line.join();
    assert_eq!(line.mtus(), vec![None; 4]);
}
