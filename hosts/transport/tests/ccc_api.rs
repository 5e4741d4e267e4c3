//! UDT/CCC's interface beyond the callbacks, in virtual time: the receiver setting its
//! sender's rate with a custom message (the paper's streaming merge, §4), a central manager
//! dividing a receiver's capacity among a group of flows (§4.1.5, GTP-like), the application
//! calling its own algorithm (§4.1.1's setRate), and the performance monitor's views (§2.2.4).
use concast_transport::cc::group::{rate_msg, Group};
use concast_transport::sim::Pair;
use concast_transport::{Composite, Config};

const RATE: &str = "sequenced-segments+virtual-circuit+rtt-estimation+positive-ack+duplicate-ack+retransmit+reliable-fifo+rate-congestion";

fn blaster_pair(rate_bps: f64, seed: u64) -> Pair {
    let mut c = Config::new(Composite::parse(RATE).unwrap());
    c.cc = "blaster".into();
    c.cc_rate_bps = rate_bps;
    c.seed = seed;
    let mut s = c.clone();
    s.seed = seed ^ 0x5555;
    let mut p = Pair::new(c, s, seed);
    // 8 MB queued up front, in 1400-byte messages: the sender never runs dry in these tests
    let m = vec![7u8; 1400];
    for _ in 0..6000 {
        p.a.send(&m, 0).unwrap();
    }
    p
}

fn delivered(p: &Pair) -> usize {
    p.delivered_b.iter().map(Vec::len).sum()
}

/// Mbit/s delivered to b between `from` and `to` (virtual µs).
fn rate_between(p: &mut Pair, from: u64, to: u64) -> f64 {
    p.run_until(from, |_| false);
    let d0 = delivered(p);
    p.run_until(to, |_| false);
    (delivered(p) - d0) as f64 * 8.0 / (to - from) as f64
}

fn near(got: f64, want: f64, tol: f64) -> bool {
    (got / want - 1.0).abs() < tol
}

#[test]
fn the_receiver_sets_the_senders_rate() {
    let mut p = blaster_pair(10e6, 41);
    let before = rate_between(&mut p, 200_000, 1_000_000);
    assert!(near(before, 10.0, 0.05), "{before:.2} Mbit/s before the request");
    p.b.as_mut().unwrap().send_cc_msg(&rate_msg(2_000_000), p.now);
    let after = rate_between(&mut p, 1_200_000, 2_000_000);
    assert!(near(after, 2.0, 0.05), "{after:.2} Mbit/s after asking for 2");
}

#[test]
fn the_application_sets_its_own_rate_and_the_monitor_sees_it() {
    let mut p = blaster_pair(10e6, 42);
    p.run_until(1_000_000, |_| false);
    let t = p.a.perf_trace(p.now);
    assert!(near(t.local.send_mbps, 10.0, 0.05), "{t:?}");
    assert!((t.pkt_snd_period_us - 1120.0).abs() < 1.0, "{t:?}");
    assert!(t.aggregate.counters.acks > 0 && t.rtt_us > 0.0, "{t:?}");
    assert!(p.a.cc_control(&rate_msg(5_000_000), p.now));
    p.run_until(2_000_000, |_| false);
    let t2 = p.a.perf_trace(p.now);
    // local: the last second alone; aggregate: both
    assert!(near(t2.local.send_mbps, 5.0, 0.05), "{t2:?}");
    assert!(near(t2.aggregate.send_mbps, 7.5, 0.08), "{t2:?}");
    assert_eq!(t2.local.counters.pkts_sent + t.aggregate.counters.pkts_sent, t2.aggregate.counters.pkts_sent);
    let rx = p.b.as_mut().unwrap().perf_trace(p.now);
    assert!(rx.aggregate.counters.pkts_received > 0 && rx.aggregate.recv_mbps > 5.0, "{rx:?}");
    // a composite without a congestion-control host has no algorithm to call
    let mut m = Pair::new(Config::new(Composite::parse("Minimal").unwrap()), Config::new(Composite::parse("Minimal").unwrap()), 1);
    assert!(!m.a.cc_control(&rate_msg(1), 0));
}

#[test]
fn the_monitor_counts_losses_and_loss_reports() {
    let mut p = blaster_pair(10e6, 43);
    p.ab.loss = 0.05;
    p.run_until(2_000_000, |_| false);
    let t = p.a.perf_trace(p.now);
    let c = t.aggregate.counters;
    assert!(c.pkts_lost > 0 && c.naks > 0 && c.naks <= c.pkts_lost, "{t:?}");
    assert!(t.aggregate.loss_rate > 0.02 && t.aggregate.loss_rate < 0.1, "{t:?}");
}

#[test]
fn a_group_manager_divides_the_receivers_capacity() {
    // two flows into one receiver of 20 Mbit/s: one wants 5, the other all it can get
    let mut g = Group::new(20e6);
    g.demand(1, f64::INFINITY);
    g.demand(2, 5e6);
    let mut flows = [blaster_pair(30e6, 44), blaster_pair(30e6, 45)];
    for p in flows.iter_mut() {
        p.run_until(100_000, |_| false);
    }
    for ((_, share), p) in g.shares().into_iter().zip(flows.iter_mut()) {
        let now = p.now;
        p.b.as_mut().unwrap().send_cc_msg(&rate_msg(share as u64), now);
    }
    let got: Vec<f64> = flows.iter_mut().map(|p| rate_between(p, 300_000, 1_300_000)).collect();
    assert!(near(got[0], 15.0, 0.05) && near(got[1], 5.0, 0.05), "{got:?}");
    assert!(got.iter().sum::<f64>() <= 20.0 * 1.03, "{got:?}");
}

/// A rate-based policy must not pace an application-limited ping-pong: CTP-Video's stand-in
/// (TFRC under Rate-based control) answers each ping within the path's round trip once an
/// RTT sample exists, not one sending period later.
#[test]
fn tfrc_does_not_hold_back_a_ping_pong() {
    let comp = "LossyFIFO+positive-ack+rtt-estimation+rate-congestion";
    let mut c = Config::new(Composite::parse(comp).unwrap());
    c.cc = "tfrc".into();
    let mut p = Pair::new(c.clone(), c, 46);
    let mut rtts = Vec::new();
    for i in 0..30 {
        let t0 = p.now;
        p.a.send(&[i as u8], t0).unwrap();
        let n = p.delivered_b.len();
        assert!(p.run_until(t0 + 2_000_000, |p| p.delivered_b.len() > n), "ping {i} lost");
        let now = p.now;
        p.b.as_mut().unwrap().send(&[i as u8], now).unwrap();
        let m = p.delivered_a.len();
        assert!(p.run_until(t0 + 4_000_000, |p| p.delivered_a.len() > m), "pong {i} lost");
        rtts.push(p.now - t0);
    }
    // the link's round trip is 2 ms (1 ms each way); the second ping follows the first RTT
    // sample, which shrinks the period: it must not wait for the slot the first period set
    let late: Vec<_> = rtts.iter().filter(|&&r| r > 2_500).collect();
    assert!(late.is_empty(), "round trips (us): {rtts:?}");
}

/// CTP §III-B's acknowledgement without a reliability microprotocol: a lost segment will never
/// be resent, so the receiver acknowledges past it, the sender's window and close are not held
/// by it, and the session closes.
#[test]
fn an_unreliable_composite_acknowledges_past_a_hole_and_closes() {
    let comp = "LossyFIFO+positive-ack+rtt-estimation+rate-congestion";
    let mut c = Config::new(Composite::parse(comp).unwrap());
    c.cc = "tfrc".into();
    let mut p = Pair::new(c.clone(), c, 47);
    p.ab.drop_nth = vec![10, 50, 51];
    for i in 0..200u32 {
        p.a.send(&i.to_be_bytes(), 0).unwrap();
    }
    p.a.close(0);
    p.run_until(5_000_000, |p| p.a.is_closed());
    assert!(p.a.is_closed(), "the sender's close is held by the lost segments");
    assert_eq!(p.delivered_b.len(), 197);
    assert!(p.a.shared().unacked.is_empty());
}
