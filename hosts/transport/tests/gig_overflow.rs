//! Issue #23: one CTCP flow over the ccc2 path (1 Gbit/s, 110 ms, a 9,082-packet drop-tail
//! queue, window 26,214), in virtual time, resends nothing the receiver holds: each drop is
//! resent once (`Stats::rtx_by_cause` says by whom, `Stats::rtx_early` which were needless).
//!
//! Sessions 14-15 kept this as a known failure: at 2029eff 20,617 retransmissions for 14,905
//! drops; at 586d878 18,507 retransmissions, 3,602 of segments that had arrived, all declared
//! by duplicate ACKs in recovery. The cause (session 16) was the sender's own order: when one
//! cumulative ACK opened the peer's window by 10,858 segments, Windowed Congestion released
//! segments twice, the second time from inside the first's queued sends, and 14,170 segments
//! left as 67996, 78854-82110, 67997-78853; the SACKs of the 3,257 sent ahead declared the
//! 10,857 behind them lost while they were still in the bottleneck's queue. Fixed in
//! `micro/ccwin.rs` (`release`): 14,905 retransmissions for 14,905 drops, none needless.
//! At 100 Mbit/s (`tests/recovery_burst.rs`) there were none before either.
use concast_transport::sim::{self, Pair};

#[test]
fn one_ctcp_flow_at_a_gigabit_resends_nothing_that_arrived() {
    let (c, s) = sim::bulk_configs("ctcp", (31, 32), 26_214, 26_214);
    let mut p = Pair::bottleneck(c, s, 5, 55_000, 1e9, 9_082);
    p.ab.queue_in_packets = true;
    let d = vec![5u8; 64 << 10];
    p.saturate(&d, 8_000_000, |_| {});
    let st = p.a.stats();
    let dup = p.b.as_ref().unwrap().stats().duplicates;
    eprintln!("{} retransmits by cause {:?}, early {:?}; {} drops, {} duplicates, {} timeouts",
        st.retransmits, st.rtx_by_cause, st.rtx_early, p.ab.dropped, dup, st.timeouts);
    assert_eq!(dup, 0, "resent {dup} segments the receiver held");
    assert_eq!(st.rtx_early, [0; 4], "no retransmission acknowledged within the minimum RTT");
    assert_eq!(st.retransmits, p.ab.dropped, "each loss resent once");
    assert_eq!(st.timeouts, 0);
    assert!(p.ab.dropped > 10_000, "the slow start overflowed the queue: {} drops", p.ab.dropped);
}
