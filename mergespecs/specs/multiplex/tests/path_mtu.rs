//! The path MTU decides how large a bundle grows (docs/multiplex.md "Bundle size"): beyond the
//! 4096 bytes a spec value could once hold on a jumbo path, and never past a small one.

use concast_sdk::wire::mplex;
use concast_sdk::{Merge, MergeSpec, Tag};
use concast_spec_multiplex::Multiplex;
use concast_speckit::test_host::make::{self, host};
use concast_speckit::test_host::TestHost;

/// A pure ACK's TCP header: the record payload.
const ACK: [u8; 20] = [0x50; 20];

/// The concast header the engine writes in front of an emitted payload (IHL 7).
const OUTER: usize = 28;

/// Offers one ACK from each of `senders` hosts on a path of `mtu` bytes (the MTU is changed
/// to `mtu_later` after init) and builds whatever is left open; returns the IPv4 total
/// length of every MplexPkt emitted and the records they carry.
fn bundle(mtu: u32, mtu_later: u32, senders: u8) -> (Vec<usize>, usize) {
    let mut h = TestHost::new("max_local_delay_us=1000000,max_total_delay_us=2000000");
    h.mtu = mtu;
    let mut m = Multiplex::init(&mut h).expect("init");
    h.mtu = mtu_later;
    let mut open: Vec<u32> = Vec::new();
    for n in 1..=senders {
        let msg = make::concast(host(n), 6, 64, &ACK);
        loop {
            let Tag::Merge(t) = m.get_tag(&msg, &mut h) else {
                panic!("an ACK is bundled")
            };
            let mut tag = t as u32;
            if !open.contains(&tag) {
                tag = m.new_state(t, &mut h);
                open.push(tag);
            }
            match m.merge(&mut tag, &msg, &mut h) {
                Merge::Merged => break,
                Merge::FlushFirst => {
                    // The engine builds the state (and the older ones) and offers again.
                    for t in std::mem::take(&mut open) {
                        m.build(&mut t.clone(), &mut h);
                    }
                }
                other => panic!("ACK {n}: {other:?}"),
            }
        }
    }
    for t in open {
        m.build(&mut t.clone(), &mut h);
    }
    let mut records = 0;
    let sizes = h
        .emitted
        .iter()
        .map(|(body, _)| {
            records += mplex::Packet::new_checked(&body[..])
                .expect("an MplexPkt")
                .records()
                .count();
            OUTER + body.len()
        })
        .collect();
    (sizes, records)
}

#[test]
fn a_jumbo_path_gets_bundles_past_4096_bytes() {
    let (sizes, records) = bundle(9000, 9000, 250);
    assert_eq!(records, 250, "every ACK carried");
    assert_eq!(
        sizes.len(),
        1,
        "250 ACKs fit one 9000-byte bundle: {sizes:?}"
    );
    assert!(sizes[0] > 4096 && sizes[0] <= 9000, "{sizes:?}");
}

#[test]
fn a_576_byte_path_keeps_every_bundle_within_576() {
    let (sizes, records) = bundle(576, 576, 100);
    assert_eq!(records, 100);
    assert!(
        sizes.len() >= 100 * 28 / 576,
        "split over several bundles: {sizes:?}"
    );
    assert!(sizes.iter().all(|&s| s <= 576), "{sizes:?}");
    assert!(
        sizes[..sizes.len() - 1].iter().all(|&s| s > 576 - 40),
        "full ones are nearly 576: {sizes:?}"
    );
}

#[test]
fn a_64k_path_gets_bundles_near_the_ipv4_limit() {
    // 255 senders of 28-byte records fill about 7 KiB; bigger records would fill 64 KiB
    // the same way: what matters is that nothing below 65535 caps the bundle.
    let (sizes, _) = bundle(65_535, 65_535, 255);
    assert_eq!(sizes.len(), 1);
    assert!(sizes[0] > 4096);
}

#[test]
fn a_path_mtu_that_shrinks_after_init_is_followed() {
    let (sizes, records) = bundle(9000, 1000, 200);
    assert_eq!(records, 200);
    assert!(sizes.iter().all(|&s| s <= 1000), "{sizes:?}");
}

#[test]
fn a_path_mtu_that_grows_after_init_is_capped_by_the_buffers_sized_then() {
    let (sizes, _) = bundle(1500, 9000, 200);
    assert!(
        sizes.len() > 1 && sizes.iter().all(|&s| s <= 1500),
        "{sizes:?}"
    );
}
