//! Two sessions over an emulated link, in virtual time: seeded random loss, delay, and an
//! optional rate limit with a drop-tail queue. The tests drive the real sessions through it;
//! nothing is mocked but the wire.
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::composite::{Composite, Preset};
use crate::session::{Config, Output, Session};

/// One direction of the link.
pub struct Link {
    pub loss: f64,
    pub delay_us: u64,
    pub rate_bps: Option<f64>,
    pub queue_pkts: usize,
    /// Count the queue in packets waiting, whatever their size, as a pfifo does (HTB's leaf
    /// queue on the emulated paths); otherwise a datagram is dropped when the backlog exceeds
    /// `queue_pkts` of its own transmission time.
    pub queue_in_packets: bool,
    /// Drop exactly these datagrams (0-based count of datagrams offered), besides random loss.
    pub drop_nth: Vec<u64>,
    /// Drop the datagrams this picks (by their bytes: a test that must lose one segment's
    /// retransmission), besides the rest.
    pub drop_if: Option<Box<dyn FnMut(&[u8]) -> bool + Send>>,
    /// Deliver these datagrams (0-based count offered) once more for each time listed, as
    /// a network that duplicates packets does (RFC 5681 §2 names it a cause of duplicate ACKs).
    pub duplicate_nth: Vec<u64>,
    /// Deliver these datagrams (0-based count offered) this many µs late, after the ones
    /// behind them, as a network that reorders does (RFC 6675 §1: why DupThresh segments).
    pub delay_nth: Vec<(u64, u64)>,
    pub offered: u64,
    pub dropped: u64,
    busy_until: f64,
    /// When each datagram still queued starts its transmission (`queue_in_packets`).
    starts: std::collections::VecDeque<f64>,
    rng: u64,
}

impl Link {
    pub fn new(seed: u64) -> Link {
        Link {
            loss: 0.0,
            delay_us: 1_000,
            rate_bps: None,
            queue_pkts: 100,
            queue_in_packets: false,
            drop_nth: Vec::new(),
            drop_if: None,
            duplicate_nth: Vec::new(),
            delay_nth: Vec::new(),
            offered: 0,
            dropped: 0,
            busy_until: 0.0,
            starts: std::collections::VecDeque::new(),
            rng: seed.max(1),
        }
    }

    fn uniform(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `offer` for a datagram `drop_if` may pick.
    pub fn offer_datagram(&mut self, now: u64, d: &[u8]) -> Option<u64> {
        if self.drop_if.as_mut().is_some_and(|pick| pick(d)) {
            self.offered += 1;
            self.dropped += 1;
            return None;
        }
        self.offer(now, d.len())
    }

    /// When a datagram offered at `now` arrives, or None when it is lost.
    pub fn offer(&mut self, now: u64, len: usize) -> Option<u64> {
        let n = self.offered;
        self.offered += 1;
        if self.drop_nth.contains(&n) || (self.loss > 0.0 && self.uniform() < self.loss) {
            self.dropped += 1;
            return None;
        }
        let mut at = now as f64;
        if let Some(rate) = self.rate_bps {
            let tx = len as f64 * 8.0 * 1e6 / rate;
            let start = self.busy_until.max(at);
            if self.queue_in_packets {
                while self.starts.front().is_some_and(|&s| s <= at) {
                    self.starts.pop_front();
                }
                if self.starts.len() >= self.queue_pkts {
                    self.dropped += 1;
                    return None;
                }
                self.starts.push_back(start);
            } else if start - at > self.queue_pkts as f64 * tx {
                self.dropped += 1;
                return None;
            }
            self.busy_until = start + tx;
            at = self.busy_until;
        }
        let late = self.delay_nth.iter().filter(|(k, _)| *k == n).map(|(_, us)| *us).sum::<u64>();
        Some(at as u64 + self.delay_us + late)
    }
}

/// How the client's driver handles a wake-up after a stall (`Pair::a_stalls`): the
/// datagrams that waited, and the timers that came due while it did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeOrder {
    /// The datagrams first (`Session::on_waiting_datagram`), then the timers: the UDP
    /// driver's order (`udp::Conn::pump`).
    DatagramsFirst,
    /// Each datagram after the timers due (`Session::on_datagram_shared`): the driver's order
    /// before issue #23's session 15, kept to show what it cost.
    TimersFirst,
}

/// A path's bandwidth-delay product in datagrams of `frame` bytes: `rate_bps` over a round
/// trip of twice `delay_us`.
pub fn bdp_datagrams(rate_bps: f64, delay_us: u64, frame: usize) -> f64 {
    rate_bps / 8.0 * 2.0 * delay_us as f64 / 1e6 / frame as f64
}

/// The Bulk composite's client, running congestion control `cc`, and its server (session
/// seeds `seeds`), each with a receive window of `wnd_segs` and a send buffer of `buf_segs`:
/// the pair the transport's virtual-time tests put on a [`Pair::bottleneck`].
pub fn bulk_configs(cc: &str, seeds: (u64, u64), wnd_segs: u32, buf_segs: usize) -> (Config, Config) {
    let (mut c, mut s) = (Config::preset(Preset::Bulk), Config::preset(Preset::Bulk));
    c.cc = cc.into();
    (c.seed, s.seed) = seeds;
    for cfg in [&mut c, &mut s] {
        cfg.recv_wnd_segs = wnd_segs;
        cfg.send_buf_segs = buf_segs;
    }
    (c, s)
}

/// A datagram on the wire: arrival time, order sent, towards b, bytes.
type InFlight = (u64, u64, bool, Vec<u8>);

/// A client session `a` and the server session `b` it opens.
pub struct Pair {
    pub now: u64,
    pub a: Session,
    pub b: Option<Session>,
    pub ab: Link,
    pub ba: Link,
    pub server_cfg: Config,
    pub serve: Option<Composite>,
    pub delivered_a: Vec<Vec<u8>>,
    pub delivered_b: Vec<Vec<u8>>,
    /// Everything but Transmit and Deliver, per end.
    pub events_a: Vec<Output>,
    pub events_b: Vec<Output>,
    /// Datagrams the server could not accept a session from.
    pub refused: Vec<String>,
    /// Times the client's process does not run, (start, end) in virtual µs, ascending: its
    /// datagrams wait (as in a socket buffer) and its timers are not run until `end`, when
    /// it takes both in `wake_order`. A loaded machine's scheduler does this to a sender.
    pub a_stalls: std::collections::VecDeque<(u64, u64)>,
    pub wake_order: WakeOrder,
    /// How late each of the client's timers runs, µs: a timed wait on a real machine ends
    /// after its timeout (a normal thread's timer slack is 50 µs).
    pub a_timer_late_us: u64,
    wire: BinaryHeap<Reverse<InFlight>>,
    order: u64,
}

impl Pair {
    pub fn new(client: Config, server: Config, seed: u64) -> Pair {
        let a = Session::connect(client, 0);
        Pair {
            now: 0,
            a,
            b: None,
            ab: Link::new(seed),
            ba: Link::new(seed.wrapping_mul(31).wrapping_add(7)),
            server_cfg: server,
            serve: None,
            delivered_a: Vec::new(),
            delivered_b: Vec::new(),
            events_a: Vec::new(),
            events_b: Vec::new(),
            refused: Vec::new(),
            a_stalls: std::collections::VecDeque::new(),
            wake_order: WakeOrder::DatagramsFirst,
            a_timer_late_us: 0,
            wire: BinaryHeap::new(),
            order: 0,
        }
    }

    /// `new` on a path of `delay_us` each way whose client-to-server direction is a
    /// `rate_bps` bottleneck queueing at most `queue_pkts`.
    pub fn bottleneck(client: Config, server: Config, seed: u64, delay_us: u64, rate_bps: f64, queue_pkts: usize) -> Pair {
        let mut p = Pair::new(client, server, seed);
        for l in [&mut p.ab, &mut p.ba] {
            l.delay_us = delay_us;
        }
        p.ab.rate_bps = Some(rate_bps);
        p.ab.queue_pkts = queue_pkts;
        p
    }

    fn put(&mut self, to_b: bool, d: Vec<u8>) {
        let link = if to_b { &mut self.ab } else { &mut self.ba };
        if let Some(at) = link.offer_datagram(self.now, &d) {
            let n = link.offered - 1;
            for _ in 0..link.duplicate_nth.iter().filter(|&&k| k == n).count() {
                self.order += 1;
                self.wire.push(Reverse((at, self.order, to_b, d.clone())));
            }
            self.order += 1;
            self.wire.push(Reverse((at, self.order, to_b, d)));
        }
    }

    fn collect(&mut self) {
        while let Some(o) = self.a.poll() {
            match o {
                Output::Transmit(d) => self.put(true, d),
                Output::Deliver(m) => self.delivered_a.push(m),
                e => self.events_a.push(e),
            }
        }
        while let Some(o) = self.b.as_mut().and_then(Session::poll) {
            match o {
                Output::Transmit(d) => self.put(false, d),
                Output::Deliver(m) => self.delivered_b.push(m),
                e => self.events_b.push(e),
            }
        }
    }

    /// Advance to the next arrival or timer. False when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.collect();
        let arrival = self.wire.peek().map(|Reverse((at, ..))| *at);
        let ta = self.a.next_timer().map(|t| t + self.a_timer_late_us);
        let tb = self.b.as_mut().and_then(Session::next_timer);
        let Some(next) = [arrival, ta, tb].into_iter().flatten().min() else { return false };
        if let Some((start, end)) = self.a_stalls.front().copied().filter(|(s, _)| next >= *s) {
            self.a_stalls.pop_front();
            self.stall_a(start.max(self.now), end);
            return true;
        }
        self.now = self.now.max(next);
        if arrival == Some(next) {
            let Reverse((_, _, to_b, d)) = self.wire.pop().unwrap();
            // as the UDP driver hands them over: the session's segments share the datagram
            if !to_b {
                self.a.on_datagram_shared(d.into(), self.now);
            } else {
                self.to_b(d);
            }
        } else {
            self.a.on_timer(self.now);
            if let Some(b) = self.b.as_mut() {
                b.on_timer(self.now);
            }
        }
        self.collect();
        true
    }

    fn to_b(&mut self, d: Vec<u8>) {
        if let Some(b) = self.b.as_mut() {
            b.on_datagram_shared(d.into(), self.now);
            return;
        }
        match Session::accept(&self.server_cfg, self.serve, &d, self.now) {
            Ok(b) => self.b = Some(b),
            Err((why, refuse)) => {
                self.refused.push(why);
                if !refuse.is_empty() {
                    self.put(false, refuse);
                }
            }
        }
    }

    /// The client does not run from `from` to `until`: the server and the wire go on, the
    /// client's datagrams wait; then it wakes as its driver would (`wake_order`).
    fn stall_a(&mut self, from: u64, until: u64) {
        self.now = from;
        let mut waiting = Vec::new();
        loop {
            self.collect();
            let arrival = self.wire.peek().map(|Reverse((at, ..))| *at);
            let tb = self.b.as_mut().and_then(Session::next_timer);
            let Some(next) = [arrival, tb].into_iter().flatten().min().filter(|t| *t < until) else { break };
            self.now = self.now.max(next);
            if arrival == Some(next) {
                let Reverse((_, _, to_b, d)) = self.wire.pop().unwrap();
                if to_b {
                    self.to_b(d);
                } else {
                    waiting.push(d);
                }
            } else if let Some(b) = self.b.as_mut() {
                b.on_timer(self.now);
            }
        }
        self.now = self.now.max(until);
        wake(&mut self.a, waiting, self.now, self.wake_order);
        self.collect();
    }

    /// Step until `done` holds or virtual time passes `limit_us`; true when `done` held.
    pub fn run_until(&mut self, limit_us: u64, mut done: impl FnMut(&Pair) -> bool) -> bool {
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

    /// A bulk sender until virtual time `end_us`: a's send queue kept full with `msg`, time
    /// stepped a millisecond at a time, `each_ms` called after every step.
    pub fn saturate(&mut self, msg: &[u8], end_us: u64, mut each_ms: impl FnMut(&Pair)) {
        while self.now < end_us {
            while self.a.can_send(msg.len()) {
                self.a.send(msg, self.now).expect("can_send said yes");
            }
            let until = self.now + 1_000;
            self.run_until(until, |p| p.now >= until);
            self.now = self.now.max(until);
            each_ms(self);
        }
    }

    /// Send `data` from a to b as messages of `msg` bytes, as fast as the session takes them;
    /// then close. Returns when b has everything a reliable composite must deliver, a closed,
    /// or `limit_us` passed.
    pub fn transfer(&mut self, data: &[u8], msg: usize, limit_us: u64) {
        let mut off = 0;
        let mut closed = false;
        while self.now <= limit_us {
            while off < data.len() && self.a.can_send(msg.min(data.len() - off)) {
                let end = (off + msg).min(data.len());
                self.a.send(&data[off..end], self.now).expect("can_send said yes");
                off = end;
            }
            if off == data.len() && !closed {
                self.a.close(self.now);
                closed = true;
            }
            if self.a.is_closed() || !self.step() {
                break;
            }
        }
        self.collect();
    }
}

/// A client woken after a stall takes what waited as its driver would: the datagrams as one
/// batch (in `order`), then the timers that came due.
fn wake(a: &mut Session, waiting: Vec<Vec<u8>>, now: u64, order: WakeOrder) {
    a.begin_batch();
    for d in waiting {
        match order {
            WakeOrder::DatagramsFirst => a.on_waiting_datagram(d.into(), now),
            WakeOrder::TimersFirst => a.on_datagram_shared(d.into(), now),
        }
    }
    a.end_batch(now);
    a.on_timer(now);
}

/// A datagram on a shared wire: arrival time, order sent, flow, towards b, bytes.
type FlowInFlight = (u64, u64, usize, bool, Vec<u8>);

/// Several client sessions `a[i]`, each with its server `b[i]`, whose client-to-server
/// datagrams share one bottleneck `ab` (the parallel flows of UDT/CCC §4's Table 2); the
/// ACK direction `ba` is shared too. Each client can be stalled on its own (`stalls`), as a
/// loaded machine's scheduler stalls one sender process and not another.
pub struct Flows {
    pub now: u64,
    pub a: Vec<Session>,
    pub b: Vec<Option<Session>>,
    pub ab: Link,
    pub ba: Link,
    pub server_cfg: Vec<Config>,
    /// Bytes each server delivered so far.
    pub delivered: Vec<u64>,
    /// Per client, the times its process does not run, (start, end) in virtual µs,
    /// ascending; it wakes in `WakeOrder::DatagramsFirst`, the UDP driver's order.
    pub stalls: Vec<std::collections::VecDeque<(u64, u64)>>,
    stalled: Vec<Option<(u64, Vec<Vec<u8>>)>>,
    wire: BinaryHeap<Reverse<FlowInFlight>>,
    order: u64,
}

impl Flows {
    /// `configs[i]` is flow i's (client, server); each client connects at `i * start_gap_us`
    /// on a path of `delay_us` each way whose client-to-server direction is a `rate_bps`
    /// bottleneck queueing at most `queue_pkts` packets (counted as a pfifo does).
    pub fn bottleneck(configs: Vec<(Config, Config)>, seed: u64, delay_us: u64, rate_bps: f64, queue_pkts: usize) -> Flows {
        let n = configs.len();
        let (mut ab, mut ba) = (Link::new(seed), Link::new(seed.wrapping_mul(31).wrapping_add(7)));
        ab.delay_us = delay_us;
        ba.delay_us = delay_us;
        ab.rate_bps = Some(rate_bps);
        ab.queue_pkts = queue_pkts;
        ab.queue_in_packets = true;
        let (clients, servers): (Vec<_>, Vec<_>) = configs.into_iter().unzip();
        Flows {
            now: 0,
            a: clients.into_iter().map(|c| Session::connect(c, 0)).collect(),
            b: (0..n).map(|_| None).collect(),
            ab,
            ba,
            server_cfg: servers,
            delivered: vec![0; n],
            stalls: vec![Default::default(); n],
            stalled: vec![None; n],
            wire: BinaryHeap::new(),
            order: 0,
        }
    }

    fn put(&mut self, i: usize, to_b: bool, d: Vec<u8>) {
        let link = if to_b { &mut self.ab } else { &mut self.ba };
        if let Some(at) = link.offer_datagram(self.now, &d) {
            self.order += 1;
            self.wire.push(Reverse((at, self.order, i, to_b, d)));
        }
    }

    fn collect(&mut self, i: usize) {
        while let Some(o) = self.a[i].poll() {
            if let Output::Transmit(d) = o {
                self.put(i, true, d);
            }
        }
        while let Some(o) = self.b[i].as_mut().and_then(Session::poll) {
            match o {
                Output::Transmit(d) => self.put(i, false, d),
                Output::Deliver(m) => self.delivered[i] += m.len() as u64,
                _ => {}
            }
        }
    }

    fn wake(&mut self, i: usize) {
        let Some((_, waiting)) = self.stalled[i].take() else { return };
        wake(&mut self.a[i], waiting, self.now, WakeOrder::DatagramsFirst);
        self.collect(i);
    }

    /// Advance to the next arrival, timer, stall or wake-up. False when nothing is left.
    pub fn step(&mut self) -> bool {
        let n = self.a.len();
        let mut next: Option<(u64, u8, usize)> = None; // (time, kind, flow): 0 wake, 1 stall, 2 timer
        let mut consider = |t: u64, kind: u8, i: usize| {
            if next.is_none_or(|(bt, bk, _)| (t, kind) < (bt, bk)) {
                next = Some((t, kind, i));
            }
        };
        for i in 0..n {
            if let Some((until, _)) = &self.stalled[i] {
                consider(*until, 0, i);
            } else {
                if let Some(&(s, _)) = self.stalls[i].front() {
                    consider(s, 1, i);
                }
                if let Some(t) = self.a[i].next_timer() {
                    consider(t, 2, i);
                }
            }
            if let Some(t) = self.b[i].as_mut().and_then(Session::next_timer) {
                consider(t, 2, i);
            }
        }
        let arrival = self.wire.peek().map(|Reverse((at, ..))| *at);
        match (arrival, next) {
            (None, None) => false,
            (Some(at), nx) if nx.is_none_or(|(t, ..)| at < t) => {
                self.now = self.now.max(at);
                let Reverse((_, _, i, to_b, d)) = self.wire.pop().unwrap();
                if to_b {
                    self.to_b(i, d);
                } else if let Some((_, waiting)) = self.stalled[i].as_mut() {
                    waiting.push(d);
                } else {
                    self.a[i].on_datagram_shared(d.into(), self.now);
                }
                self.collect(i);
                true
            }
            (_, Some((t, kind, i))) => {
                self.now = self.now.max(t);
                match kind {
                    0 => self.wake(i),
                    1 => {
                        let (_, end) = self.stalls[i].pop_front().unwrap();
                        self.stalled[i] = Some((end.max(self.now), Vec::new()));
                    }
                    _ => {
                        let now = self.now;
                        for j in 0..n {
                            if self.stalled[j].is_none() {
                                self.a[j].on_timer(now);
                            }
                            if let Some(b) = self.b[j].as_mut() {
                                b.on_timer(now);
                            }
                            self.collect(j);
                        }
                    }
                }
                true
            }
            _ => unreachable!(),
        }
    }

    fn to_b(&mut self, i: usize, d: Vec<u8>) {
        if let Some(b) = self.b[i].as_mut() {
            b.on_datagram_shared(d.into(), self.now);
            return;
        }
        match Session::accept(&self.server_cfg[i], None, &d, self.now) {
            Ok(b) => self.b[i] = Some(b),
            Err((_, refuse)) => {
                if !refuse.is_empty() {
                    self.put(i, false, refuse);
                }
            }
        }
    }

    /// Bulk senders until virtual time `end_us`: every client that runs keeps its send
    /// queue full with `msg`; time stepped a millisecond at a time, `each_ms` after each.
    pub fn saturate(&mut self, msg: &[u8], end_us: u64, mut each_ms: impl FnMut(&Flows)) {
        while self.now < end_us {
            for i in 0..self.a.len() {
                if self.stalled[i].is_none() {
                    while self.a[i].can_send(msg.len()) {
                        self.a[i].send(msg, self.now).expect("can_send said yes");
                    }
                    self.collect(i);
                }
            }
            let until = self.now + 1_000;
            while self.now < until {
                let before = self.now;
                if !self.step() {
                    break;
                }
                // a step past `until` is taken; the next millisecond starts from there
                if self.now >= until && before < until {
                    break;
                }
            }
            self.now = self.now.max(until);
            each_ms(self);
        }
    }
}

/// Jain's fairness index of `x` (1 when all equal, 1/n when one takes everything).
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if q == 0.0 { 1.0 } else { s * s / (x.len() as f64 * q) }
}
