//! What routerd's turn costs for one diverted datagram, in process (no veth, no OVS): the
//! wall time of `handle_batch` + `tick` for a single frame, passed through (no flow for its
//! group) or merged by `sum.wasm` with `fanin=1` (the zero-delay spec of
//! scripts/bench_latency.py), with the frames back to back (warm caches) or `GAP_US` apart
//! (sleeping between them, as routerd does between a ping-pong's frames). merge − pass is
//! the merge engine's share of the hop (docs/benchmarks.md, session 13).
//!
//! cargo run --release -p concast-routerd --example hop_cost [-- GAP_US [ROUNDS]]
//! (needs `make specs`). Under `perf record -g` it shows where a merged frame's time goes.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use concast_aggregate::payload::Contribution;
use concast_csp::{Config, FlowId, Selector};
use concast_engine::{Engine, EngineConfig};
use concast_routerd::{dataplane, Router};
use concast_wire::ipv4::Params;

const ROUTER_MAC: [u8; 6] = [2, 0xcc, 10, 0, 0, 1];

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn frame(group: u32, key: u32) -> Vec<u8> {
    let c = Contribution { sport: 4000, dport: 7007, key, count: 1, value: i64::from(key) };
    let mut buf = vec![0; 128];
    let n = concast_wire::build::concast(&mut buf, &Params::new(ip("10.0.1.2"), ip("10.0.9.2"), 17), group, &c.encode()).unwrap();
    let mut f = ROUTER_MAC.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x00]);
    f.extend_from_slice(&buf[..n]);
    f
}

fn pct(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[((xs.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let gap_us: u64 = args.get(1).map_or(300, |a| a.parse().expect("GAP_US"));
    let rounds: usize = args.get(2).map_or(20, |a| a.parse().expect("ROUNDS"));
    let spec = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../build/mergespecs/sum.wasm")).expect("build/mergespecs/sum.wasm (make specs)");
    // As routerd builds its engine (daemon.rs): the per-flow CPU budget (--flow-cpu-ms 500)
    // and the daemon's sandbox pool; CONCAST_HOP_BARE=1 leaves both at the engine's defaults.
    let bare = std::env::var_os("CONCAST_HOP_BARE").is_some();
    let mut limits = concast_engine::Limits::default();
    let mut allocator = EngineConfig::default().allocator;
    if !bare {
        limits.cpu_per_second = Some(Duration::from_millis(500));
        allocator = concast_engine::Allocator::for_daemon(concast_engine::DAEMON_POOL_SLOTS);
    }
    let engine = Engine::new(EngineConfig { node: ip("10.0.0.1"), limits, allocator, ..EngineConfig::default() }).unwrap();
    let mut router = Router::new(ip("10.0.0.1"), ROUTER_MAC, [2, 0, 0, 0, 0, 0xc], Config::default(), engine, Box::new(dataplane::Static));
    router.add_static_flow(0, FlowId { receiver: ip("10.0.9.2"), group: 7 }, Selector { proto: 17, dport: 7007 }, spec, b"fanin=1").unwrap();
    let clock = Instant::now();
    let mut key = 0u32;
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut times: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for round in 0..rounds {
        let mut order = [("pass", 8u32), ("merge", 7u32)];
        if round % 2 == 1 {
            order.reverse();
        }
        for (name, group) in order {
            for gap in [0, gap_us] {
                let label: &'static str = match (name, gap) {
                    ("pass", 0) => "pass, back to back",
                    ("merge", 0) => "merge, back to back",
                    ("pass", _) => "pass, after a sleep",
                    _ => "merge, after a sleep",
                };
                for i in 0..110 {
                    key += 1;
                    let f = frame(group, key);
                    if gap > 0 {
                        std::thread::sleep(Duration::from_micros(gap));
                    }
                    out.clear();
                    let t = Instant::now();
                    let now = clock.elapsed().as_micros() as u64;
                    router.handle_batch(now, std::iter::once(&f[..]), &mut out);
                    router.tick(clock.elapsed().as_micros() as u64, &mut out);
                    let us = t.elapsed().as_nanos() as f64 / 1000.0;
                    assert_eq!(out.len(), 1, "{label}: one frame out per frame in");
                    if i >= 10 {
                        times.entry(label).or_default().push(us);
                    }
                }
            }
        }
    }
    let c = router.counters.to_json();
    println!("engine as routerd's: {}", !bare);
    println!("one frame per turn, {rounds} rounds of 100 per case, sleep {gap_us} us; counters: merged_in {} passed_through {}", c["merged_in"], c["passed_through"]);
    println!("{:<22} {:>8} {:>8} {:>8}", "case", "p50 us", "p90 us", "p99 us");
    for (label, xs) in times.iter_mut() {
        println!("{label:<22} {:>8.2} {:>8.2} {:>8.2}", pct(xs, 0.5), pct(xs, 0.9), pct(xs, 0.99));
    }
}
