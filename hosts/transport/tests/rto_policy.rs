//! CTCP's RTO policy against the session's fine-grained one (issue #23). One flow over UDT/CCC's
//! 110 ms path (§4.2) at 100 Mbit/s with one bandwidth-delay product of drop-tail queue, in
//! virtual time: slow start overflows the queue, the RTT doubles within a round trip while the
//! recovery runs, and an RTO only 20 ms above the SRTT fires although nothing more was lost.
use concast_transport::sim::Pair;
use concast_transport::cc::{self, RtoPolicy};
use concast_transport::{Config, Preset};

const DELAY_US: u64 = 55_000;
const RATE_BPS: f64 = 100e6;
const FRAME: usize = 1442;

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8).collect()
}

/// (timeouts, spurious timeouts, Mbit/s delivered) of one flow sending for `secs`.
fn run(cc: &str, rule: Option<RtoPolicy>, secs: u64) -> (u64, u64, f64) {
    let (mut c, mut s) = (Config::preset(Preset::Bulk), Config::preset(Preset::Bulk));
    c.cc = cc.into();
    if let Some(r) = rule {
        (c.rto_g_us, c.min_rto_us) = (r.g_us, r.min_us);
    }
    c.seed = 21;
    s.seed = 22;
    let mut p = Pair::new(c, s, 5);
    for l in [&mut p.ab, &mut p.ba] {
        l.delay_us = DELAY_US;
    }
    p.ab.rate_bps = Some(RATE_BPS);
    p.ab.queue_pkts = (RATE_BPS / 8.0 * 2.0 * DELAY_US as f64 / 1e6 / FRAME as f64) as usize;
    let d = data(64 << 10);
    let end = secs * 1_000_000;
    p.saturate(&d, end, |_| {});
    let st = p.a.stats();
    let bytes: usize = p.delivered_b.iter().map(|m| m.len()).sum();
    (st.timeouts, st.spurious_timeouts, bytes as f64 * 8.0 / secs as f64 / 1e6)
}

/// Measured (git history of this test): the session's fine-grained rule (SRTT + 20 ms, floor 20
/// ms) takes 2 timeouts, both spurious, and delivers 52 Mbit/s of 100 in 20 s; a 200 ms floor
/// with the 20 ms margin changes nothing (the SRTT is above the floor while the queue is full);
/// a 200 ms margin (kernel TCP's) takes 1 and delivers 89. CTCP must stay with the latter.
#[test]
fn ctcp_rides_out_its_own_slow_start_overflow_without_a_second_spurious_timeout() {
    let (timeouts, spurious, mbps) = run("ctcp", None, 20);
    assert!(spurious <= 1 && timeouts <= 1, "ctcp: {timeouts} timeouts, {spurious} spurious");
    assert!(mbps >= 80.0, "ctcp delivered {mbps:.1} Mbit/s of 100");
    // the rule itself, not the name: the session's own policy set to the same numbers rides it
    // out too (ctcp's PRR and RACK now take its one spurious timeout away as well: 0 against 1)
    let (t, sp, _) = run("newreno", Some(cc::TCP_RTO), 20);
    assert!(sp <= 1 && t <= 1, "newreno under TCP_RTO: {t} timeouts, {sp} spurious");
}

/// CTP-Bulk keeps CTP's fine-grained timers (CTP §V-C-2, Table II): its RTO stays 20 ms over
/// the SRTT, the policy split the CTP paper argues (mechanism in rtt-estimation, policy here).
#[test]
fn bulk_with_newreno_keeps_the_fine_grained_rto() {
    let cfg = Config::preset(Preset::Bulk);
    assert_eq!((cfg.rto_g_us, cfg.min_rto_us), (20_000, 20_000));
    assert_eq!(cfg.cc, "newreno");
    assert_eq!(cc::TCP_RTO, RtoPolicy { g_us: 200_000, min_us: 200_000 });
    let (_, spurious, _) = run("newreno", None, 20);
    assert!(spurious >= 1, "the 20 ms margin is expected to misfire on this path (the trade-off)");
}
