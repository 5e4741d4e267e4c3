//! A sender whose process is not run for a while (a loaded machine's scheduler; issue #23 saw
//! 8 CTCP senders on 2 busy cores go unscheduled for up to 346 ms) finds the ACKs of that
//! time waiting in its socket when it wakes, and timers overdue. Read first, the ACKs re-arm
//! the retransmission timer and feed RACK; fired first, the timers judge those ACKs missing:
//! the retransmission timer times out and resends what had arrived. One CTCP flow over
//! UDT/CCC's 110 ms path (§4.2), in virtual time, its window below the path's capacity so
//! the network loses nothing.
use concast_transport::sim::{self, Pair, WakeOrder};

const DELAY_US: u64 = 55_000;
const RATE_BPS: f64 = 100e6;
const FRAME: usize = 1442;
/// Longer than CTCP's RTO on this path (SRTT + 200 ms, `cc::TCP_RTO`).
const STALL_US: u64 = 400_000;

struct Run {
    retransmits: u64,
    timeouts: u64,
    /// Copies the receiver found it already held: retransmissions of what had arrived.
    duplicates: u64,
}

/// Steady for 3 s, then the sender stalls three times, 1 s apart.
fn run(order: WakeOrder) -> Run {
    let bdp = sim::bdp_datagrams(RATE_BPS, DELAY_US, FRAME);
    let (c, s) = sim::bulk_configs("ctcp", (41, 42), (0.8 * bdp) as u32, bdp as usize);
    let mut p = Pair::bottleneck(c, s, 9, DELAY_US, RATE_BPS, bdp as usize);
    p.wake_order = order;
    let d = vec![7u8; 64 << 10];
    p.saturate(&d, 3_000_000, |_| {});
    assert_eq!((p.a.stats().retransmits, p.ab.dropped), (0, 0), "the set-up loses nothing");
    for k in 0..3 {
        let at = 3_500_000 + k * 1_000_000;
        p.a_stalls.push_back((at, at + STALL_US));
    }
    p.saturate(&d, 7_000_000, |_| {});
    assert!(p.a_stalls.is_empty(), "every stall ran");
    assert_eq!(p.ab.dropped, 0);
    let st = p.a.stats();
    Run { retransmits: st.retransmits, timeouts: st.timeouts, duplicates: p.b.as_ref().unwrap().stats().duplicates }
}

#[test]
fn acks_that_waited_through_a_stall_are_read_before_the_timers_fire() {
    let r = run(WakeOrder::DatagramsFirst);
    eprintln!("datagrams first: {} retransmits, {} timeouts, {} duplicates", r.retransmits, r.timeouts, r.duplicates);
    assert_eq!((r.retransmits, r.timeouts, r.duplicates), (0, 0, 0), "nothing was lost, nothing is resent");
}

/// The order the UDP driver had before (each datagram fired the due timers first): the
/// stalls cost timeouts and resent segments the receiver held. Shows the set-up stalls the
/// sender past its RTO, so the test above can fail.
#[test]
fn timers_fired_before_the_waiting_acks_resend_what_arrived() {
    let r = run(WakeOrder::TimersFirst);
    eprintln!("timers first: {} retransmits, {} timeouts, {} duplicates", r.retransmits, r.timeouts, r.duplicates);
    assert!(r.timeouts >= 3 && r.duplicates >= 3, "{} timeouts, {} duplicates", r.timeouts, r.duplicates);
}
