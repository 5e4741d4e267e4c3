//! What counts as a duplicate ACK (issue #23): with selective acknowledgements, only an ACK
//! that reports data not reported before (RFC 6675 §2). The ACK a receiver sends for a segment
//! it already holds (a duplicated packet, or a spurious retransmission) reports nothing new;
//! three of them must not start a recovery. One CTCP flow over UDT/CCC's 110 ms path (§4.2),
//! in virtual time, its window below the path's capacity so nothing is lost.
use concast_transport::sim::{self, Pair};

const DELAY_US: u64 = 55_000;
const RATE_BPS: f64 = 100e6;
const FRAME: usize = 1442;

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8).collect()
}

struct Run {
    retransmits: u64,
    /// Copies the receiver found it already held.
    duplicates: u64,
    /// Times the window fell by more than a quarter between two samples 1 ms apart.
    reductions: u32,
}

/// One `cc` flow (seeds `seeds`) steady for 3 s on the path, its window below the path's
/// capacity; the pair and the data it sends.
fn steady(cc: &str, seeds: (u64, u64)) -> (Pair, Vec<u8>) {
    let bdp = sim::bdp_datagrams(RATE_BPS, DELAY_US, FRAME);
    // below the path's capacity: no queue overflow, nothing lost
    let (c, s) = sim::bulk_configs(cc, seeds, (0.8 * bdp) as u32, bdp as usize);
    let mut p = Pair::bottleneck(c, s, 9, DELAY_US, RATE_BPS, bdp as usize);
    let d = data(64 << 10);
    p.saturate(&d, 3_000_000, |_| {});
    assert_eq!(p.ab.dropped, 0, "the set-up loses nothing");
    (p, d)
}

/// Steady for 3 s, then the network delivers one data datagram `copies` extra times.
fn run(cc: &str, copies: usize) -> Run {
    let (mut p, d) = steady(cc, (41, 42));
    let n = p.ab.offered + 100;
    p.ab.duplicate_nth = vec![n; copies];
    let (mut reductions, mut last) = (0, p.a.shared().cwnd);
    p.saturate(&d, 6_000_000, |p| {
        let w = p.a.shared().cwnd;
        if w < 0.75 * last {
            reductions += 1;
        }
        last = w;
    });
    assert_eq!(p.ab.dropped, 0);
    let st = p.a.stats();
    Run { retransmits: st.retransmits, duplicates: p.b.as_ref().unwrap().stats().duplicates, reductions }
}

/// Fails on a43f069 (before the fix): four copies gave three duplicate ACKs, a recovery
/// resent what was not lost, each resent segment's ACK was another duplicate, and ctcp ended
/// with 382 retransmissions, 386 copies at the receiver and its window halved.
#[test]
fn acks_of_segments_the_receiver_already_holds_start_no_recovery() {
    for cc in ["ctcp", "newreno"] {
        let r = run(cc, 4);
        eprintln!("{cc}: {} retransmits, {} duplicates, {} reductions", r.retransmits, r.duplicates, r.reductions);
        assert_eq!(r.duplicates, 4, "{cc}: the copies arrived");
        assert_eq!(r.retransmits, 0, "{cc}: nothing was lost, nothing is resent");
        assert_eq!(r.reductions, 0, "{cc}: the window is not reduced");
    }
}

/// Steady for 3 s, then one data datagram is lost (a recovery starts) and, 20 datagrams
/// later, one is delivered `late_us` late: the ones behind it overtake it.
fn reordered_in_recovery(cc: &str, late_us: u64) -> Run {
    let (mut p, d) = steady(cc, (43, 44));
    let n = p.ab.offered + 100;
    p.ab.drop_nth = vec![n];
    p.ab.delay_nth = vec![(n + 20, late_us)];
    p.saturate(&d, 6_000_000, |_| {});
    assert_eq!(p.ab.dropped, 1);
    let st = p.a.stats();
    Run { retransmits: st.retransmits, duplicates: p.b.as_ref().unwrap().stats().duplicates, reductions: 0 }
}

/// RFC 6675 §4 (IsLost): a hole is lost once DupThresh (3) segments above it are selectively
/// acknowledged, not at the first. Overtaken by two datagrams (a datagram takes 115 µs at
/// 100 Mbit/s), the late one is not resent; overtaken by five it is (the control: the set-up
/// does reorder it in the recovery). Before session 16 a duplicate ACK in recovery declared
/// every hole below the highest selective ack, and the two-datagram case resent it too.
#[test]
fn a_segment_overtaken_by_fewer_than_three_is_not_resent() {
    for cc in ["ctcp", "newreno"] {
        let r = reordered_in_recovery(cc, 250);
        eprintln!("{cc}, 250 us late: {} retransmits, {} duplicates", r.retransmits, r.duplicates);
        assert_eq!((r.retransmits, r.duplicates), (1, 0), "{cc}: only the lost one is resent");
    }
    let r = reordered_in_recovery("newreno", 600);
    eprintln!("newreno, 600 us late: {} retransmits, {} duplicates", r.retransmits, r.duplicates);
    assert_eq!((r.retransmits, r.duplicates), (2, 1), "five overtook it: IsLost, resent");
}
