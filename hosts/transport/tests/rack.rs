//! A lost retransmission, found by RACK (RFC 8985, `micro::rack`) instead of the retransmission
//! timer (issue #23). In virtual time (`sim`): one segment of a transfer is dropped twice, its
//! first transmission and its retransmission, and nothing else is lost. Duplicate ACKs find
//! the first loss; only time-based detection finds the second before the RTO, which for CTCP
//! is kernel TCP's SRTT + 200 ms.
use std::collections::HashMap;

use concast_transport::attr::SEQ;
use concast_transport::cc::{self, RtoPolicy};
use concast_transport::segment::{Kind, Segment};
use concast_transport::sim::Pair;
use concast_transport::{Config, Output, Preset};
use sha2::{Digest, Sha256};

const DELAY_US: u64 = 20_000;

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(9) as u8).collect()
}

/// Drops the first two transmissions of the `nth` distinct data segment the client sends.
fn lose_twice(nth: usize) -> Box<dyn FnMut(&[u8]) -> bool + Send> {
    let (mut seen, mut target, mut hits) = (0usize, None, HashMap::new());
    Box::new(move |d: &[u8]| {
        let Ok(seg) = Segment::decode(d, Some(Preset::Bulk.composite())) else { return false };
        let Some(q) = seg.attrs.get(SEQ).filter(|_| seg.kind == Kind::Data) else { return false };
        let n = hits.entry(q).or_insert(0u32);
        *n += 1;
        if *n == 1 {
            seen += 1;
            if seen == nth {
                target = Some(q);
            }
        }
        target == Some(q) && *n <= 2
    })
}

/// Bulk over 20 ms each way with `cc` (and the session's RTO policy `rto`); returns the
/// client's stats and the virtual time at which it closed.
fn run(cc: &str, rto: Option<RtoPolicy>) -> (concast_transport::session::Stats, u64) {
    let (mut c, mut s) = (Config::preset(Preset::Bulk), Config::preset(Preset::Bulk));
    c.cc = cc.into();
    if let Some(r) = rto {
        (c.rto_g_us, c.min_rto_us) = (r.g_us, r.min_us);
    }
    c.seed = 31;
    s.seed = 32;
    let mut p = Pair::new(c, s, 9);
    p.ab.delay_us = DELAY_US;
    p.ba.delay_us = DELAY_US;
    p.ab.drop_if = Some(lose_twice(1000));
    let d = data(3 << 20);
    p.transfer(&d, 64 * 1024, 60_000_000);
    assert!(p.events_a.contains(&Output::Closed("closed".into())), "{cc}: {:?}", p.events_a);
    assert_eq!(Sha256::digest(p.delivered_b.concat()), Sha256::digest(&d), "{cc}");
    assert_eq!(p.ab.dropped, 2, "{cc}: only the segment and its retransmission were lost");
    (p.a.stats(), p.now)
}

#[test]
fn ctcp_finds_a_lost_retransmission_without_the_timer() {
    let (st, t_rack) = run("ctcp", None);
    assert_eq!(st.timeouts, 0, "found by RACK, not the RTO: {st:?}");
    assert_eq!(st.rack_losses, 1, "{st:?}");
    assert_eq!(st.retransmits, 2, "{st:?}");
    // the same algorithm and RTO without RACK (CTCP as it was): the timer finds it
    let (old, t_old) = run("newreno", Some(cc::TCP_RTO));
    assert_eq!(old.timeouts, 1, "{old:?}");
    assert_eq!(old.rack_losses, 0, "{old:?}");
    // RACK saves the RTO's wait (SRTT + 200 ms) less about one RTT and the reordering window
    assert!(t_rack + 100_000 < t_old, "with RACK {t_rack} us, without {t_old} us");
}
