//! A burst of losses far longer than the ACK attribute's 32-segment bitmap is repaired in
//! about one round trip (SACK blocks in the Ack payload name the runs beyond it), not one
//! hole per partial ACK. Virtual time (`sim`), so the durations compared are exact.
use concast_transport::sim::Pair;
use concast_transport::{Config, Output, Preset};
use sha2::{Digest, Sha256};

const DELAY_US: u64 = 1_000;
const RTT_US: u64 = 2 * DELAY_US;

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8).collect()
}

/// Bulk over 1 ms each way and no rate limit (so no queue delays a retransmission and
/// nothing but `burst` is lost); `burst` drops that range of the client's datagrams.
/// Returns (pair, virtual time to close).
fn run(burst: std::ops::Range<u64>) -> (Pair, u64) {
    run_dropping(burst.collect())
}

/// `run` with any set of the client's datagrams dropped.
fn run_dropping(drop: Vec<u64>) -> (Pair, u64) {
    let (mut c, mut s) = (Config::preset(Preset::Bulk), Config::preset(Preset::Bulk));
    c.seed = 11;
    s.seed = 12;
    let mut p = Pair::new(c, s, 7);
    p.ab.delay_us = DELAY_US;
    p.ba.delay_us = DELAY_US;
    p.ab.drop_nth = drop;
    let d = data(3 << 20);
    p.transfer(&d, 64 * 1024, 60_000_000);
    assert!(p.events_a.contains(&Output::Closed("closed".into())), "{:?}", p.events_a);
    assert_eq!(Sha256::digest(p.delivered_b.concat()), Sha256::digest(&d));
    let t = p.now;
    (p, t)
}

#[test]
fn a_burst_of_200_lost_segments_costs_about_one_round_trip() {
    let (clean, t_clean) = run(0..0);
    assert_eq!(clean.a.stats().retransmits, 0);
    // datagram 0 is the Open; by 1000 the window is well past 200 segments
    let (lossy, t_lossy) = run(1000..1200);
    let st = lossy.a.stats();
    assert_eq!(lossy.ab.dropped, 200);
    assert_eq!(st.timeouts, 0, "repaired without waiting for the RTO: {st:?}");
    // every lost segment once; the 32-bit bitmap alone would resend one hole per round trip
    // (200 round trips, 400 ms here)
    assert!(st.retransmits >= 200 && st.retransmits <= 210, "{st:?}");
    // measured: 5 round trips (one to learn and resend, the rest the halved window); with
    // the bitmap alone it was 174
    let extra = t_lossy.saturating_sub(t_clean);
    assert!(extra <= 10 * RTT_US, "the burst cost {extra} us over the lossless run ({t_clean} us)");
}

/// Scattered losses, as two flows' slow starts overflowing one drop-tail queue leave them
/// (every other segment, issue #23's 110 ms runs): more holes than one Ack's SACK blocks can
/// name. The receiver names the run of the segment that triggered each Ack first (RFC 2018
/// §4), so the sender learns of every hole within a round trip, not 16 per round trip.
#[test]
fn four_hundred_scattered_holes_cost_a_few_round_trips() {
    let (_, t_clean) = run(0..0);
    let (lossy, t_lossy) = run_dropping((1000..1800).step_by(2).collect());
    let st = lossy.a.stats();
    assert_eq!(lossy.ab.dropped, 400);
    assert_eq!(st.timeouts, 0, "repaired without waiting for the RTO: {st:?}");
    assert!(st.retransmits >= 400 && st.retransmits <= 420, "{st:?}");
    let extra = t_lossy.saturating_sub(t_clean);
    assert!(extra <= 12 * RTT_US, "the holes cost {extra} us over the lossless run ({t_clean} us)");
}
