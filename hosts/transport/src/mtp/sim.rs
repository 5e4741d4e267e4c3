//! An MTP client and server in virtual time over the crate's emulated link (`sim::Link`, the
//! one the Bulk tests use): seeded loss, delay, rate and drop-tail queue each way, plus what
//! MTP's tests need besides: a path MTU that silently drops bigger datagrams, a server that can
//! be down (restarted), and datagrams injected toward the client (forgeries, duplicates).
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::client::{Client, Output};
use super::server::{Responder, Server};
use crate::sim::Link;

/// A datagram on the wire: arrival time, order sent, toward the server, bytes.
type InFlight = (u64, u64, bool, Vec<u8>);

pub struct Net<R: Responder> {
    pub now: u64,
    pub client: Client,
    pub server: Server<R>,
    pub up: Link,
    pub down: Link,
    /// Datagrams longer than this (UDP payload bytes) are dropped silently, both ways.
    pub mtu: Option<usize>,
    /// While true, requests reaching the server are lost (it is down).
    pub server_down: bool,
    /// Every reply the server sent, in order (tests replay them as duplicates).
    pub replies_sent: Vec<Vec<u8>>,
    pub outputs: Vec<Output>,
    wire: BinaryHeap<Reverse<InFlight>>,
    order: u64,
}

impl<R: Responder> Net<R> {
    pub fn new(client: Client, server: Server<R>, seed: u64) -> Net<R> {
        Net {
            now: 0,
            client,
            server,
            up: Link::new(seed),
            down: Link::new(seed.wrapping_mul(31).wrapping_add(7)),
            mtu: None,
            server_down: false,
            replies_sent: Vec::new(),
            outputs: Vec::new(),
            wire: BinaryHeap::new(),
            order: 0,
        }
    }

    /// Puts a datagram on the wire toward the client (`to_server` false) or the server,
    /// through that direction's link.
    pub fn put(&mut self, to_server: bool, d: Vec<u8>) {
        if self.mtu.is_some_and(|m| d.len() > m) {
            return;
        }
        let link = if to_server { &mut self.up } else { &mut self.down };
        if let Some(at) = link.offer(self.now, d.len() + 28) {
            self.order += 1;
            self.wire.push(Reverse((at, self.order, to_server, d)));
        }
    }

    /// Delivers a datagram to the client at `at` without a link (forgeries, replays).
    pub fn inject(&mut self, at: u64, d: Vec<u8>) {
        self.order += 1;
        self.wire.push(Reverse((at, self.order, false, d)));
    }

    fn collect(&mut self) {
        while let Some(o) = self.client.poll() {
            match o {
                Output::Transmit(d) => self.put(true, d),
                o => self.outputs.push(o),
            }
        }
    }

    /// Advances to the next arrival or timer; false when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.collect();
        let arrival = self.wire.peek().map(|Reverse((at, ..))| *at);
        let Some(next) = [arrival, self.client.next_timer()].into_iter().flatten().min() else { return false };
        self.now = self.now.max(next);
        if arrival == Some(next) {
            let Reverse((_, _, to_server, d)) = self.wire.pop().expect("peeked");
            if !to_server {
                self.client.on_datagram(self.now, &d);
            } else if !self.server_down {
                for r in self.server.handle(&d) {
                    self.replies_sent.push(r.clone());
                    self.put(false, r);
                }
            }
        } else {
            self.client.on_timer(self.now);
        }
        self.collect();
        true
    }

    /// Steps until `done` holds or virtual time passes `limit_us`; true when `done` held.
    pub fn run_until(&mut self, limit_us: u64, mut done: impl FnMut(&Net<R>) -> bool) -> bool {
        while self.now <= limit_us {
            if done(self) {
                return true;
            }
            if !self.step() {
                return done(self);
            }
        }
        false
    }
}
