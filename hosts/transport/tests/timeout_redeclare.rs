//! Issue #23: a (spurious) retransmission timeout during a SACK recovery must not make the
//! duplicate ACKs that follow declare lost again the retransmissions still on their way
//! (RFC 6675 §5.1: after an RTO the scoreboard still says what was retransmitted; a
//! retransmission is lost again only by the rules, here RACK's, RFC 8985 §6.2). One CTCP
//! flow on UDT/CCC's 110 ms path at 100 Mbit/s, in virtual time: a run of datagrams is
//! dropped, and while its retransmissions are on their way the ACK path's delay grows by
//! 400 ms (longer than the RTO, SRTT + 200 ms), so the timer fires with nothing lost.
use concast_transport::sim::{self, Pair};

const DELAY_US: u64 = 55_000;
const RATE_BPS: f64 = 100e6;
const FRAME: usize = 1442;

#[test]
fn a_timeout_in_recovery_does_not_resend_the_retransmissions_in_flight() {
    let bdp = sim::bdp_datagrams(RATE_BPS, DELAY_US, FRAME);
    let (c, s) = sim::bulk_configs("ctcp", (51, 52), (0.8 * bdp) as u32, bdp as usize);
    let mut p = Pair::bottleneck(c, s, 11, DELAY_US, RATE_BPS, bdp as usize);
    let d = vec![9u8; 64 << 10];
    p.saturate(&d, 3_000_000, |_| {});
    assert_eq!((p.a.stats().retransmits, p.ab.dropped), (0, 0), "the set-up loses nothing");
    // every other datagram of 200: 100 holes, each with SACKed data above it
    let first = p.ab.offered;
    p.ab.drop_nth = (0..200).step_by(2).map(|k| first + k).collect();
    // once the recovery has resent the holes (about one RTT after the drops), the ACKs
    // take 400 ms longer
    p.saturate(&d, 3_000_000 + 140_000, |_| {});
    let before = p.a.stats();
    assert!(before.retransmits >= 50, "recovery under way: {} retransmits", before.retransmits);
    assert_eq!(before.timeouts, 0);
    p.ba.delay_us = DELAY_US + 400_000;
    p.saturate(&d, 6_000_000, |_| {});
    let st = p.a.stats();
    let dup = p.b.as_ref().unwrap().stats().duplicates;
    eprintln!("{} retransmits by cause {:?}, early {:?}; {} drops, {} duplicates, {} timeouts ({} spurious)",
        st.retransmits, st.rtx_by_cause, st.rtx_early, p.ab.dropped, dup, st.timeouts, st.spurious_timeouts);
    assert!(st.timeouts >= 1, "the ACK delay fired the timer");
    assert_eq!(p.ab.dropped, 100);
    // the timer's own resends can be copies (the timeout was spurious); nothing else is
    assert!(dup <= st.timeouts, "{dup} copies of segments the receiver held, {} timeouts", st.timeouts);
}
