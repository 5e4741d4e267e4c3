//! Issue #23: CTCP's parallel flows over the ccc2 path (UDT/CCC §4, Table 2: 1 Gbit/s, 110 ms,
//! one BDP of drop-tail queue), in virtual time, with some senders not run for a while during
//! their slow start, as a loaded machine's scheduler does to user-space senders.
use concast_transport::sim::{self, Flows};

const DELAY_US: u64 = 55_000;
const RATE_BPS: f64 = 1e9;
const QUEUE: usize = 9_082;
const WND: u32 = 26_214;

struct Run {
    /// Jain's index of the flows' rates over [from, end].
    fairness: f64,
    mbps: Vec<f64>,
    /// Each flow's window at `from`.
    cwnd: Vec<f64>,
    total_mbps: f64,
}

fn run(cc: &str, n: usize, stalls: &[(usize, u64, u64)], from_us: u64, end_us: u64) -> Run {
    let cfgs = (0..n as u64).map(|i| sim::bulk_configs(cc, (100 + 2 * i, 101 + 2 * i), WND, WND as usize)).collect();
    let mut f = Flows::bottleneck(cfgs, 7, DELAY_US, RATE_BPS, QUEUE);
    for &(i, at, len) in stalls {
        f.stalls[i].push_back((at, at + len));
    }
    let d = vec![3u8; 64 << 10];
    let trace = std::env::var("PSS_TRACE").is_ok();
    f.saturate(&d, from_us, |f| {
        if trace && f.now % 50_000 < 1_000 {
            eprintln!("{:>5} ms cwnd {:?} retx {:?}", f.now / 1000, f.a.iter().map(|a| a.shared().cwnd.round()).collect::<Vec<_>>(),
                f.a.iter().map(|a| a.stats().retransmits).collect::<Vec<_>>());
        }
    });
    let (mark, cwnd): (Vec<u64>, Vec<f64>) = (0..n).map(|i| (f.delivered[i], f.a[i].shared().cwnd)).unzip();
    f.saturate(&d, end_us, |_| {});
    let secs = (f.now - from_us) as f64 / 1e6;
    let mbps: Vec<f64> = (0..n).map(|i| (f.delivered[i] - mark[i]) as f64 * 8.0 / secs / 1e6).collect();
    Run { fairness: sim::jain(&mbps), total_mbps: mbps.iter().sum(), mbps, cwnd }
}

#[test]
fn eight_ctcp_flows_one_stalled_in_slow_start() {
    let t = std::time::Instant::now();
    let r = run("ctcp", 8, &[(0, 400_000, 110_000)], 3_000_000, 10_000_000);
    eprintln!("{:.1}s fairness {:.3} total {:.0} Mbit/s; Mbit/s {:?}; cwnd at 3 s {:?}",
        t.elapsed().as_secs_f64(), r.fairness, r.total_mbps,
        r.mbps.iter().map(|m| m.round()).collect::<Vec<_>>(), r.cwnd.iter().map(|c| c.round()).collect::<Vec<_>>());
}

/// Exploration: `PSS_CC`, `PSS_N`, `PSS_STALLS` ("flow:at_ms:len_ms,..."), `PSS_SEEDS` (count).
#[test]
#[ignore]
fn explore() {
    let cc = std::env::var("PSS_CC").unwrap_or("ctcp".into());
    let n: usize = std::env::var("PSS_N").map(|s| s.parse().unwrap()).unwrap_or(8);
    let end: u64 = std::env::var("PSS_END").map(|s| s.parse().unwrap()).unwrap_or(10_000_000);
    let stalls: Vec<(usize, u64, u64)> = std::env::var("PSS_STALLS").unwrap_or_default().split(',').filter(|s| !s.is_empty())
        .map(|s| { let v: Vec<u64> = s.split(':').map(|x| x.parse().unwrap()).collect(); (v[0] as usize, v[1] * 1000, v[2] * 1000) }).collect();
    let r = run(&cc, n, &stalls, 3_000_000, end);
    eprintln!("{cc} n={n} stalls={stalls:?}: fairness {:.3} total {:.0}; Mbit/s {:?}; cwnd at 3 s {:?}", r.fairness, r.total_mbps,
        r.mbps.iter().map(|m| m.round()).collect::<Vec<_>>(), r.cwnd.iter().map(|c| c.round()).collect::<Vec<_>>());
}
