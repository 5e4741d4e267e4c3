//! The link model in virtual time: delay, rate, drop-tail, loss and live changes, with no
//! sockets and no clock.

use concast_linkemu::model::{Direction, Drop};
use concast_linkemu::params::Params;

const MS: u64 = 1_000_000;

fn dir(delay_ns: u64, loss: f64, rate_bps: u64, queue: u32) -> Direction<u32> {
    Direction::new(Params { delay_ns, loss, rate_bps, queue }, 42)
}

/// Run until nothing is pending; (frame, delivery time) in order.
fn drain_all(d: &mut Direction<u32>) -> Vec<(u32, u64)> {
    let mut out = vec![];
    while let Some(t) = d.next_event() {
        d.retire(t);
        while let Some((f, up, due)) = d.pop_due(t) {
            assert_eq!(due, t, "each frame handed out at its due time");
            d.account(100, up);
            out.push((f, t));
        }
    }
    out
}

#[test]
fn delay_only_delivers_after_exactly_the_delay() {
    let mut d = dir(10 * MS, 0.0, 0, 1000);
    d.offer(5, 100, 1).unwrap();
    d.offer(7, 100, 2).unwrap();
    assert!(d.pop_due(5 + 10 * MS - 1).is_none());
    assert_eq!(drain_all(&mut d), vec![(1, 5 + 10 * MS), (2, 7 + 10 * MS)]);
    assert_eq!(d.counters.delivered, 2);
    assert_eq!(d.backlog(), (0, 0)); // no rate: nothing ever waits for a transmitter
}

#[test]
fn rate_serialises_back_to_back_frames() {
    // 1250-byte frames at 10 Mbit/s take 1 ms each.
    let mut d = dir(2 * MS, 0.0, 10_000_000, 1000);
    for i in 0..5 {
        d.offer(0, 1250, i).unwrap();
    }
    assert_eq!(d.backlog(), (5 * 1250, 5));
    assert_eq!(d.tx_free_at(), 5 * MS);
    let got = drain_all(&mut d);
    let times: Vec<u64> = got.iter().map(|&(_, t)| t).collect();
    assert_eq!(times, vec![3 * MS, 4 * MS, 5 * MS, 6 * MS, 7 * MS]);
    // Queueing delays were 0..4 ms: the median frame waited 2 ms.
    let p50 = d.qdelay.quantile_us(0.5).unwrap();
    assert!((2000..=2600).contains(&p50), "{p50}");
}

#[test]
fn backlog_shrinks_as_the_transmitter_sends() {
    let mut d = dir(0, 0.0, 8_000_000, 1000); // 1000 bytes = 1 ms
    for i in 0..4 {
        d.offer(0, 1000, i).unwrap();
    }
    d.retire(2 * MS);
    assert_eq!(d.backlog(), (2000, 2));
    d.retire(4 * MS);
    assert_eq!(d.backlog(), (0, 0));
    assert!(d.tx_free_at() <= 4 * MS);
}

#[test]
fn drop_tail_keeps_exactly_the_queue_limit() {
    let mut d = dir(MS, 0.0, 1_000_000, 20);
    let mut dropped = 0;
    for i in 0..50 {
        if let Err((why, _)) = d.offer(0, 1000, i) {
            assert_eq!(why, Drop::Queue);
            dropped += 1;
        }
    }
    assert_eq!(dropped, 30);
    assert_eq!(d.counters.dropped_queue, 30);
    assert_eq!(d.counters.max_backlog, 20);
    let got = drain_all(&mut d);
    assert_eq!(got.iter().map(|&(f, _)| f).collect::<Vec<_>>(), (0..20).collect::<Vec<_>>());
    // Once the queue has drained a frame, the next one is accepted again.
    let mut d = dir(0, 0.0, 8_000_000, 2);
    d.offer(0, 1000, 0).unwrap();
    d.offer(0, 1000, 1).unwrap();
    assert!(d.offer(0, 1000, 2).is_err());
    d.offer(MS, 1000, 3).unwrap();
}

#[test]
fn loss_rate_and_repeatability() {
    let run = || {
        let mut d = dir(0, 0.05, 0, 1000);
        (0..200_000u32).map(|i| d.offer(0, 64, i).is_err()).collect::<Vec<bool>>()
    };
    let a = run();
    assert_eq!(a, run(), "same seed, same losses");
    let frac = a.iter().filter(|&&x| x).count() as f64 / a.len() as f64;
    assert!((frac - 0.05).abs() < 0.002, "{frac}");
}

#[test]
fn down_drops_arrivals_and_frames_in_flight() {
    let mut d = dir(5 * MS, 0.0, 0, 1000);
    d.offer(0, 100, 1).unwrap();
    d.up = false;
    assert!(matches!(d.offer(1, 100, 2), Err((Drop::Down, 2))));
    let got = drain_all(&mut d);
    assert_eq!(got.len(), 1);
    assert_eq!(d.counters.delivered, 0);
    assert_eq!(d.counters.dropped_down, 2);
    d.up = true;
    d.offer(10 * MS, 100, 3).unwrap();
    assert_eq!(drain_all(&mut d), vec![(3, 15 * MS)]);
}

#[test]
fn shorter_delay_set_live_never_reorders() {
    let mut d = dir(10 * MS, 0.0, 0, 1000);
    d.offer(0, 100, 1).unwrap();
    d.params.delay_ns = MS;
    d.offer(1, 100, 2).unwrap();
    d.offer(20 * MS, 100, 3).unwrap();
    assert_eq!(drain_all(&mut d), vec![(1, 10 * MS), (2, 10 * MS), (3, 21 * MS)]);
}

#[test]
fn achieved_rate_matches_configured_over_a_long_run() {
    // Offered 2x the rate for a simulated second: what leaves is the configured rate.
    let mut d = dir(0, 0.0, 10_000_000, 100);
    let mut t = 0;
    let mut delivered_bytes = 0u64;
    let mut last = 0;
    while t < 1_000 * MS {
        let _ = d.offer(t, 1500, 0);
        t += 600_000; // 1500 B every 0.6 ms = 20 Mbit/s
        d.retire(t);
        while let Some((_, up, _)) = d.pop_due(t) {
            d.account(1500, up);
            delivered_bytes += 1500;
            last = t;
        }
    }
    let rate = delivered_bytes as f64 * 8.0 / (last as f64 / 1e9);
    assert!((rate / 10e6 - 1.0).abs() < 0.01, "{rate}");
    assert!(d.counters.dropped_queue > 0);
}
