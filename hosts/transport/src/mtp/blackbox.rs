//! The dissertation's simulator (Noble 1999, section 7.4 and Appendix F), re-made in virtual
//! time: its black-box network and its TCP model, with OUR sans-IO MTP client and server
//! driven through the network in place of its MTP model. Facts taken from the text and the
//! appendix (behaviour only; the code is ours):
//! - a message is 1 KB; the network delivers at most `bw / cong` of them per second (one per
//!   `period`), each no sooner than the minimum RTT after it was sent, and no sooner than one
//!   period after the latest arrival already scheduled (a dropped message leaves its hole);
//! - a message is dropped at random with the loss rate, or when the load (half the messages in
//!   transit) reaches the path's capacity: the bandwidth-delay product over `cong`, at least
//!   the buffer padding (8 messages); for TCP the capacity is divided by `cong` once more,
//!   the simulator's stand-in for synchronised TCP flows;
//! - its TCP: window from 4, slow-start threshold 2, one more message per window of ACKs above
//!   the threshold (per ACK below), a 1 s minimum retransmission timer doubling to 64 s, and
//!   on a timeout go-back-N: the window to one, the threshold to half the window (at least 2),
//!   the messages sent after the lost one wasted;
//! - throughput is messages received per second, utilization its share of `bw/cong × (1 −
//!   loss)`, delays are measured request to response.
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::client::{Client, ClientConfig, Output, RequestOpts};
use super::server::{Objects, Server};
use super::wire::HEADER_LEN;

/// Bytes of a message (Appendix F: `KBYTES` 1).
pub const MESSAGE: usize = 1024;
/// The network's smallest capacity in messages ("buffer padding"): 8 in Appendix F's listing
/// (`BUFFER`, version 1.3 of February 1998).
pub const BUFFER_PADDING_LISTING: f64 = 8.0;
/// The padding the printed runs of section 7.4 imply (ours, inferred): TCP's largest window is
/// 64 on the loss-free LAN (load = transit/2 reaches a capacity of 32 at 64 in transit) and 13
/// on the two-router path (32 / congestion factor 5 = 6, reached at 12–13 in transit); the
/// listing's 8 would stop TCP at 16 on the LAN and lose messages there.
pub const BUFFER_PADDING: f64 = 32.0;
/// The simulator's largest window, messages: 64, the largest the printed LAN run shows (TCP,
/// section 7.4); the listing's `MAXWINDOW` is 96, which with the printed runs' padding would
/// overflow the LAN and lose messages the printed run did not lose.
pub const MAX_WINDOW: usize = 64;
/// Both protocols start with this many messages in transit (Appendix F: `INIT_WINDOW` 4).
pub const INIT_WINDOW: usize = 4;
/// The TCP model's retransmission timer: 1 s at least, doubling to 64 s (Appendix F).
pub const TCP_RTO_MIN_US: u64 = 1_000_000;
pub const TCP_RTO_MAX_US: u64 = 64_000_000;

/// The black box's five characteristics (section 7.4, "Model").
#[derive(Clone, Copy, Debug)]
pub struct Model {
    /// Fraction of messages lost at random.
    pub loss: f64,
    /// KB per second.
    pub bw: f64,
    /// Minimum round trip, µs.
    pub rtt_us: u64,
    /// Congestion factor: the share of the bandwidth third-party traffic leaves is 1/cong.
    pub cong: f64,
    /// Smallest capacity, messages.
    pub buffer: f64,
}

impl Model {
    /// The dissertation's printed runs: (name, protocol-independent model, messages).
    pub fn printed_runs() -> Vec<(&'static str, Model, u64)> {
        let m = |loss, rtt_ms: u64, cong| Model { loss, bw: 1250.0, rtt_us: rtt_ms * 1000, cong, buffer: BUFFER_PADDING };
        vec![
            ("lan", m(0.0, 1, 1.0), 5120),
            ("two-routers", m(0.03, 2, 5.0), 5120),
            ("wan", m(0.10, 80, 20.0), 1024),
            ("wan-3pct-c10", m(0.03, 80, 10.0), 1024),
            ("wan-3pct-c1", m(0.03, 80, 1.0), 1024),
        ]
    }

    fn period_us(&self, bytes: usize) -> f64 {
        self.cong * 1e6 / self.bw * bytes as f64 / MESSAGE as f64
    }
}

/// The network: what is in transit decides each new message's fate.
struct BlackBox {
    m: Model,
    maxload: f64,
    /// Messages that will arrive (not dropped), in message units.
    transit: f64,
    last_arrive: f64,
    rng: u64,
}

impl BlackBox {
    fn new(m: Model, tcp: bool, seed: u64) -> BlackBox {
        let mut maxload = (m.bw * m.rtt_us as f64 / 1e6 / m.cong).floor().max(m.buffer);
        if tcp {
            maxload = (maxload / m.cong).floor().max(1.0);
        }
        BlackBox { m, maxload, transit: 0.0, last_arrive: 0.0, rng: seed.max(1) }
    }

    fn uniform(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A message of `bytes` sent at `now`: when it would arrive, and whether it is dropped.
    fn insert(&mut self, now: u64, bytes: usize) -> (u64, bool) {
        let expect = (now as f64 + self.m.rtt_us as f64).max(self.last_arrive + self.m.period_us(bytes));
        let dropped = self.transit / 2.0 >= self.maxload || self.uniform() < self.m.loss;
        self.last_arrive = self.last_arrive.max(expect);
        if !dropped {
            self.transit += bytes as f64 / MESSAGE as f64;
        }
        (expect.ceil() as u64, dropped)
    }

    fn arrived(&mut self, bytes: usize) {
        self.transit = (self.transit - bytes as f64 / MESSAGE as f64).max(0.0);
    }
}

/// A run's report, the fields the simulator prints (section 7.4, "Execution").
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub elapsed_us: u64,
    pub requested: u64,
    /// Messages (KB) received and used.
    pub received: f64,
    /// Declared lost by the sender's timer.
    pub lost: u64,
    /// Arrived after their timer had fired.
    pub late: u64,
    pub delay_min_us: u64,
    pub delay_sum_us: f64,
    pub delays: u64,
    pub delay_max_us: u64,
    /// Largest window, messages.
    pub max_window: f64,
}

impl Report {
    fn delay(&mut self, d: u64) {
        self.delay_min_us = if self.delays == 0 { d } else { self.delay_min_us.min(d) };
        self.delay_max_us = self.delay_max_us.max(d);
        self.delay_sum_us += d as f64;
        self.delays += 1;
    }

    /// KB per second.
    pub fn throughput(&self) -> f64 {
        self.received / (self.elapsed_us.max(1) as f64 / 1e6)
    }

    /// Share of the most the path can carry at this loss rate, percent.
    pub fn utilization(&self, m: &Model) -> f64 {
        let max = m.bw / m.cong * (self.elapsed_us as f64 / 1e6) * (1.0 - m.loss);
        if max > 0.0 {
            100.0 * self.received / max
        } else {
            0.0
        }
    }

    /// Received over received and lost, percent.
    pub fn efficiency(&self) -> f64 {
        100.0 * self.received / (self.received + self.lost as f64).max(1.0)
    }

    pub fn delay_avg_us(&self) -> f64 {
        self.delay_sum_us / self.delays.max(1) as f64
    }
}

/// Our MTP client and server through the black box until `messages` KB have arrived.
/// `repeat_floor_us`: the dissertation's 500 ms (`noble::REPEAT_FLOOR_US`) or its simulator's
/// 50 ms (`noble::SIM_REPEAT_FLOOR_US`). `cc`: "mtp", "mtp-1k" (the dissertation's rules with
/// the payload fixed at the simulator's 1 KB message: no halving below 4 per window) or a
/// comparison window ("mtp-cubic"); "mtp-listing": "mtp-1k" with Appendix F's MTP model's
/// loss and growth rules (`noble::Flow::listing_rules`).
pub fn run_mtp(m: Model, messages: u64, repeat_floor_us: u64, cc: &str, seed: u64) -> Result<Report, String> {
    let listing_rules = cc == "mtp-listing";
    let (cc, min_size) = match cc {
        "mtp-1k" | "mtp-listing" => ("mtp", MESSAGE),
        _ => (cc, MESSAGE / 2),
    };
    let period = m.period_us(MESSAGE) as u64;
    let cfg = ClientConfig {
        cc: cc.into(),
        max_size: MESSAGE,
        min_size,
        // the simulator's window ceiling: 96 messages (on a LAN-like path the cap is the buffer)
        rcvbuf: MAX_WINDOW * MESSAGE,
        // the simulator's repeat: 4 (rtt + period), here only the starting value
        repeat_us: 4 * (m.rtt_us + period),
        repeat_floor_us,
        initial_window: Some(INIT_WINDOW * MESSAGE),
        listing_rules,
        expire_us: 3_600_000_000,
        max_window: MAX_WINDOW as u32,
        seed,
        ..ClientConfig::default()
    };
    let mut c = Client::new(cfg)?;
    let mut server = Server::new(Objects::default());
    let mut bb = BlackBox::new(m, false, seed);
    let want = messages as f64;
    let object = format!("size:{}", ((messages + 4 * MAX_WINDOW as u64) * MESSAGE as u64).min(u32::MAX as u64));
    let mut r = Report::default();
    // arrivals: time, order, response, request sent at, payload bytes
    let mut wire: BinaryHeap<Arrival> = BinaryHeap::new();
    let mut order = 0u64;
    let mut now = 0u64;
    c.request(now, object.as_bytes(), RequestOpts::default())?;
    loop {
        while let Some(o) = c.poll() {
            match o {
                Output::Transmit(req) => {
                    r.requested += 1;
                    for resp in server.handle(&req) {
                        let payload = resp.len().saturating_sub(HEADER_LEN);
                        let (at, dropped) = bb.insert(now, payload);
                        if !dropped {
                            order += 1;
                            wire.push(Reverse((at, order, resp, now, payload)));
                        }
                    }
                }
                Output::Failed { reason, .. } => return Err(reason),
                Output::Expired { .. } => return Err("expired".into()),
                _ => {}
            }
        }
        r.max_window = r.max_window.max(c.window() * c.datagram_size() as f64 / MESSAGE as f64);
        if r.received >= want {
            break;
        }
        let arrival = wire.peek().map(|Reverse(a)| a.0);
        let Some(next) = [arrival, c.next_timer()].into_iter().flatten().min() else {
            return Err("nothing left to happen".into());
        };
        now = now.max(next);
        if arrival == Some(next) {
            let Reverse((_, _, resp, sent, payload)) = wire.pop().expect("peeked");
            bb.arrived(payload);
            let before = c.stats();
            c.on_datagram(now, &resp);
            let after = c.stats();
            if after.replies > before.replies {
                r.received += payload as f64 / MESSAGE as f64;
                r.delay(now - sent);
            } else if after.duplicates > before.duplicates || after.stale > before.stale {
                r.late += 1;
            }
        } else {
            c.on_timer(now);
        }
        if now > 36_000_000_000 {
            return Err("over 10 hours of virtual time".into());
        }
    }
    r.elapsed_us = now;
    r.lost = c.stats().timeouts;
    Ok(r)
}

/// A response on its way to the client: arrival, order, datagram, request sent at, payload.
type Arrival = Reverse<(u64, u64, Vec<u8>, u64, usize)>;
/// A TCP model event: time, order, kind, sent at, expected arrival, dropped.
type TcpEntry = Reverse<(u64, u64, TcpEvent, u64, u64, bool)>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TcpEvent {
    /// Its ACK arrives.
    Arrive,
    /// The retransmission timer fires for it; `bool` in the entry: it was dropped.
    Timeout,
    /// It arrives after its timer fired.
    Late,
    /// It arrives but is part of a window that will be resent (go-back-N).
    Ignore,
}

/// The simulator's TCP model through the same black box until `messages` have been
/// acknowledged.
pub fn run_tcp(m: Model, messages: u64, seed: u64) -> Report {
    let mut bb = BlackBox::new(m, true, seed);
    let mut r = Report::default();
    // time, order, event, sent at, expected arrival, dropped
    let mut ev: BinaryHeap<TcpEntry> = BinaryHeap::new();
    let (mut order, mut now) = (0u64, 0u64);
    let (mut window, mut ssthresh) = (INIT_WINDOW, 2usize);
    let (mut rto, mut flowtimeout, mut resending) = (TCP_RTO_MIN_US, 0i64, false);
    // messages whose timer will fire because they were dropped
    let mut pending_drops = 0usize;
    let mut send = |now: u64,
                    bb: &mut BlackBox,
                    ev: &mut BinaryHeap<TcpEntry>,
                    resending: &mut bool,
                    pending_drops: &mut usize,
                    rto: u64,
                    r: &mut Report| {
        r.requested += 1;
        order += 1;
        let (expect, dropped) = bb.insert(now, MESSAGE);
        if *resending {
            // sent behind a loss: wasted; a dropped one is never noticed
            if !dropped {
                ev.push(Reverse((expect, order, TcpEvent::Ignore, now, expect, false)));
            }
        } else if dropped || expect > now + rto {
            *resending = true;
            if dropped {
                *pending_drops += 1;
            }
            ev.push(Reverse((now + rto, order, TcpEvent::Timeout, now, expect, dropped)));
        } else {
            ev.push(Reverse((expect, order, TcpEvent::Arrive, now, expect, false)));
        }
    };
    for _ in 0..INIT_WINDOW {
        send(now, &mut bb, &mut ev, &mut resending, &mut pending_drops, rto, &mut r);
    }
    while r.received < messages as f64 {
        let Some(Reverse((at, _, kind, sent, expect, dropped))) = ev.pop() else { break };
        now = at;
        match kind {
            TcpEvent::Arrive => {
                bb.arrived(MESSAGE);
                r.received += 1.0;
                r.delay(now - sent);
                flowtimeout -= 1;
                rto = TCP_RTO_MIN_US;
                let threshold = if window > ssthresh { -(window as i64) } else { -1 };
                if flowtimeout <= threshold && window < MAX_WINDOW {
                    window += 1;
                    flowtimeout = 0;
                    send(now, &mut bb, &mut ev, &mut resending, &mut pending_drops, rto, &mut r);
                }
                if bb.transit.round() as usize + pending_drops <= window {
                    send(now, &mut bb, &mut ev, &mut resending, &mut pending_drops, rto, &mut r);
                }
            }
            TcpEvent::Timeout => {
                r.lost += 1;
                if dropped {
                    pending_drops -= 1;
                } else {
                    ev.push(Reverse((expect, u64::MAX, TcpEvent::Late, sent, expect, false)));
                }
                ssthresh = (window / 2).max(2);
                window = 1;
                rto = (rto * 2).min(TCP_RTO_MAX_US);
                flowtimeout = 0;
                resending = false;
                for _ in 0..window {
                    send(now, &mut bb, &mut ev, &mut resending, &mut pending_drops, rto, &mut r);
                }
            }
            TcpEvent::Late => {
                bb.arrived(MESSAGE);
                r.late += 1;
            }
            TcpEvent::Ignore => bb.arrived(MESSAGE),
        }
        r.max_window = r.max_window.max(window as f64);
    }
    r.elapsed_us = now;
    r
}

/// One CSV row's header, and the row.
pub const CSV_HEADER: &str = "run,proto,loss,bw_kBps,rtt_ms,cong,messages,repeat_floor_ms,seed,elapsed_s,requested,received,lost,late,efficiency_pct,throughput_kBps,utilization_pct,delay_min_ms,delay_avg_ms,delay_max_ms,max_window";

#[allow(clippy::too_many_arguments)]
pub fn csv_row(run: &str, proto: &str, m: &Model, messages: u64, floor_us: Option<u64>, seed: u64, r: &Report) -> String {
    format!(
        "{run},{proto},{},{},{},{},{messages},{},{seed},{:.3},{},{:.0},{},{},{:.1},{:.1},{:.1},{:.2},{:.2},{:.2},{:.1}",
        m.loss,
        m.bw,
        m.rtt_us as f64 / 1000.0,
        m.cong,
        floor_us.map_or(String::new(), |f| format!("{}", f / 1000)),
        r.elapsed_us as f64 / 1e6,
        r.requested,
        r.received,
        r.lost,
        r.late,
        r.efficiency(),
        r.throughput(),
        r.utilization(m),
        r.delay_min_us as f64 / 1000.0,
        r.delay_avg_us() / 1000.0,
        r.delay_max_us as f64 / 1000.0,
        r.max_window,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mtp::noble::SIM_REPEAT_FLOOR_US;

    fn lan() -> Model {
        Model::printed_runs()[0].1
    }

    #[test]
    fn sec7_4_black_box_spaces_arrivals_by_the_period_and_drops_at_capacity() {
        let m = Model { loss: 0.0, bw: 1000.0, rtt_us: 10_000, cong: 1.0, buffer: BUFFER_PADDING_LISTING };
        let mut bb = BlackBox::new(m, false, 1);
        assert_eq!(bb.maxload, 10.0); // 1000 KB/s × 10 ms
        let arrivals: Vec<u64> = (0..3).map(|_| bb.insert(0, MESSAGE).0).collect();
        assert_eq!(arrivals, vec![10_000, 11_000, 12_000]);
        for _ in 0..17 {
            assert!(!bb.insert(0, MESSAGE).1);
        }
        // 20 in transit: load 10 = capacity
        assert!(bb.insert(0, MESSAGE).1);
        // TCP's capacity is divided by the congestion factor once more (at least 1)
        let c = Model { cong: 4.0, ..m };
        assert_eq!(BlackBox::new(c, false, 1).maxload, 8.0);
        assert_eq!(BlackBox::new(c, true, 1).maxload, 2.0);
    }

    #[test]
    fn sec7_4_lan_without_loss_both_fill_the_link() {
        let t = run_tcp(lan(), 5120, 1);
        let m = run_mtp(lan(), 5120, SIM_REPEAT_FLOOR_US, "mtp", 1).unwrap();
        for r in [&t, &m] {
            assert!((r.throughput() - 1250.0).abs() < 30.0, "{r:?}");
            assert_eq!(r.lost, 0, "{r:?}");
        }
        // MTP stops growing when the RTT passes ten times its minimum: a short queue
        assert!(m.max_window < t.max_window && m.delay_avg_us() < t.delay_avg_us(), "{m:?} {t:?}");
    }

    #[test]
    fn sec7_4_tcp_model_collapses_on_a_lossy_congested_path() {
        let two = Model::printed_runs()[1].1;
        let t = run_tcp(two, 1024, 2);
        let m = run_mtp(two, 1024, SIM_REPEAT_FLOOR_US, "mtp", 2).unwrap();
        assert!(t.lost > 0 && m.throughput() > 4.0 * t.throughput(), "{m:?} {t:?}");
    }
}
