//! Issue #23: CTCP's parallel flows over the ccc2 path (UDT/CCC §4, Table 2: 1 Gbit/s, 110 ms,
//! one BDP of drop-tail queue), in virtual time: do their slow starts end with equal windows?
//! AIMD halves a difference between windows once per loss epoch, and an epoch here is minutes
//! (8 flows: ~1,135 RTTs to refill the queue), so whatever spread slow start leaves is the
//! fairness of a 15 s run.
//!
//! CTCP (`ctcp`) leaves slow start at its first loss, unpaced: each flow's window went
//! out as a burst per round, the bursts queued behind each other at the bottleneck, the flows'
//! rounds drifted apart (256 against 512 segments at the same instant), and the overflow
//! ended them at different windows and loss events: 8 flows 0.951 over 3-10 s (windows
//! 1,029-2,055), 16 flows 0.709 (516-2,051). `ctcp_hs` paces its initial slow start and ends
//! it on the round trip's rise (HyStart++, RFC 9406; `cc/newreno.rs`, `cc/hystart.rs`): 1.000
//! at 8 and 16. A sender not run for a round trip during slow start still falls a doubling
//! behind (two stalled, 110 and 55 ms: 77 and 81 Mbit/s against 136 for the others).
use concast_transport::sim::{self, Flows};

const DELAY_US: u64 = 55_000;
const RATE_BPS: f64 = 1e9;
const QUEUE: usize = 9_082;
const WND: u32 = 26_214;
const FROM_US: u64 = 3_000_000;
const END_US: u64 = 10_000_000;

struct Run {
    /// Jain's index of the flows' rates over [FROM_US, END_US].
    fairness: f64,
    mbps: Vec<f64>,
    /// Each flow's window at FROM_US.
    cwnd: Vec<f64>,
    total_mbps: f64,
    retransmits: u64,
    drops: u64,
}

/// `n` flows of `cc`; `stalls`: (flow, at µs, for µs), the sender's process not run.
fn run(cc: &str, n: usize, stalls: &[(usize, u64, u64)]) -> Run {
    let cfgs = (0..n as u64).map(|i| sim::bulk_configs(cc, (100 + 2 * i, 101 + 2 * i), WND, WND as usize)).collect();
    let mut f = Flows::bottleneck(cfgs, 7, DELAY_US, RATE_BPS, QUEUE);
    for &(i, at, len) in stalls {
        f.stalls[i].push_back((at, at + len));
    }
    let d = vec![3u8; 64 << 10];
    let trace = std::env::var("PSS_TRACE").is_ok();
    f.saturate(&d, FROM_US, |f| {
        if trace && f.now % 50_000 < 1_000 {
            eprintln!("{:>5} ms cwnd {:?}", f.now / 1000, f.a.iter().map(|a| a.shared().cwnd.round()).collect::<Vec<_>>());
        }
    });
    let (mark, cwnd): (Vec<u64>, Vec<f64>) = (0..n).map(|i| (f.delivered[i], f.a[i].shared().cwnd)).unzip();
    f.saturate(&d, END_US, |_| {});
    let secs = (f.now - FROM_US) as f64 / 1e6;
    let mbps: Vec<f64> = (0..n).map(|i| (f.delivered[i] - mark[i]) as f64 * 8.0 / secs / 1e6).collect();
    let r = Run {
        fairness: sim::jain(&mbps),
        total_mbps: mbps.iter().sum(),
        retransmits: f.a.iter().map(|a| a.stats().retransmits).sum(),
        drops: f.ab.dropped,
        mbps,
        cwnd,
    };
    eprintln!("{cc}: {n} flows, stalls {stalls:?}: fairness {:.3}, {:.0} Mbit/s, {} retransmits, {} drops; Mbit/s {:?}; cwnd at {} s {:?}",
        r.fairness, r.total_mbps, r.retransmits, r.drops, r.mbps.iter().map(|m| m.round()).collect::<Vec<_>>(),
        FROM_US / 1_000_000, r.cwnd.iter().map(|c| c.round()).collect::<Vec<_>>());
    r
}

#[test]
fn eight_flows_leave_slow_start_with_equal_windows() {
    let r = run("ctcp_hs", 8, &[]);
    assert!(r.fairness >= 0.99, "fairness {:.3}", r.fairness);
    let (lo, hi) = r.cwnd.iter().fold((f64::MAX, 0f64), |(l, h), &c| (l.min(c), h.max(c)));
    assert!(hi / lo < 1.1, "windows {lo:.0}-{hi:.0}");
    assert!(r.total_mbps > 950.0, "{:.0} Mbit/s", r.total_mbps);
}

#[test]
fn sixteen_flows_leave_slow_start_with_equal_windows() {
    let r = run("ctcp_hs", 16, &[]);
    assert!(r.fairness >= 0.99, "fairness {:.3}", r.fairness);
    assert!(r.total_mbps > 950.0, "{:.0} Mbit/s", r.total_mbps);
}

/// One sender not run for a round trip, another for half of one, during slow start: they fall
/// behind (what the test above cannot show), the others stay in step.
#[test]
fn eight_flows_two_senders_stalled_in_slow_start() {
    let r = run("ctcp_hs", 8, &[(0, 400_000, 110_000), (1, 300_000, 55_000)]);
    assert!(r.fairness >= 0.95, "fairness {:.3}", r.fairness);
    let rest = &r.cwnd[2..];
    let (lo, hi) = rest.iter().fold((f64::MAX, 0f64), |(l, h), &c| (l.min(c), h.max(c)));
    assert!(hi / lo < 1.1, "the flows not stalled: windows {lo:.0}-{hi:.0}");
}

/// CTCP itself, for comparison (the tests above fail with it): its slow starts end out of step
/// with no sender stalled. Kept so a change to CTCP's slow start shows here.
#[test]
fn ctcp_flows_leave_slow_start_out_of_step() {
    for n in [8, 16] {
        let r = run("ctcp", n, &[]);
        let (lo, hi) = r.cwnd.iter().fold((f64::MAX, 0f64), |(l, h), &c| (l.min(c), h.max(c)));
        assert!(r.fairness < 0.97 && hi / lo > 1.5, "{n} flows: fairness {:.3}, windows {lo:.0}-{hi:.0}", r.fairness);
    }
}
