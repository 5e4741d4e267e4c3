//! Native unit tests of the gather payload and round logic (the engine's tests run the spec
//! end to end, native and Wasm).

use std::vec::Vec;

use concast_sdk::{Merge, MergeSpec, Tag};
use concast_speckit::test_host::make::{self, host};
use concast_speckit::test_host::TestHost;

use crate::{payload, Config, Gather, TAG};

fn message(from: u8, body: &[u8]) -> Vec<u8> {
    make::concast(
        host(from),
        17,
        40 + from,
        &make::udp(5000 + u16::from(from), 6000, body),
    )
}

fn offer(g: &mut Gather, h: &mut TestHost, msg: &[u8]) -> Merge {
    assert_eq!(g.get_tag(msg, h), Tag::Merge(TAG));
    g.merge(&mut (), msg, h)
}

/// (sender, message) as decoded.
type Entry = (std::net::Ipv4Addr, Vec<u8>);

/// The emitted datagram's UDP ports and entries.
fn decode(payload: &[u8]) -> ((u16, u16), Vec<Entry>) {
    let len = usize::from(u16::from_be_bytes([payload[4], payload[5]]));
    assert_eq!(len, payload.len(), "UDP length");
    let ports = (
        u16::from_be_bytes([payload[0], payload[1]]),
        u16::from_be_bytes([payload[2], payload[3]]),
    );
    let entries = payload::entries(&payload[8..]).expect("a gathered body");
    (
        ports,
        entries.map(|(src, m)| (src.into(), m.to_vec())).collect(),
    )
}

#[test]
fn n_senders_make_one_datagram_listing_each_message() {
    let mut h = TestHost::new("n=3");
    let mut g = Gather::init(&mut h).unwrap();
    g.new_state(TAG, &mut h);
    assert_eq!(offer(&mut g, &mut h, &message(1, b"one")), Merge::Merged);
    assert!(!g.done(&mut (), &mut h));
    assert_eq!(h.timer, Some(10_000), "timeout_us after the round opened");
    assert_eq!(offer(&mut g, &mut h, &message(2, b"")), Merge::Merged);
    assert!(!g.done(&mut (), &mut h));
    assert_eq!(offer(&mut g, &mut h, &message(3, b"three")), Merge::Merged);
    assert!(g.done(&mut (), &mut h));
    g.build(&mut (), &mut h);
    let (payload, out) = &h.emitted[0];
    assert_eq!(&payload[8..14], b"GA\x01\x00\x00\x03");
    let (ports, entries) = decode(payload);
    assert_eq!(ports, (5001, 6000), "the first message's ports");
    assert_eq!(
        entries,
        [
            (host(1), b"one".to_vec()),
            (host(2), Vec::new()),
            (host(3), b"three".to_vec())
        ]
    );
    assert_eq!(
        (out.protocol, out.ttl),
        (17, 43),
        "the largest TTL gathered"
    );
}

#[test]
fn a_second_message_of_a_sender_or_a_full_mtu_ends_the_round_early() {
    let mut h = TestHost::new("n=10");
    h.mtu = 28 + 14 + 2 * (6 + 100);
    let mut g = Gather::init(&mut h).unwrap();
    g.new_state(TAG, &mut h);
    assert_eq!(offer(&mut g, &mut h, &message(1, &[1; 100])), Merge::Merged);
    assert_eq!(
        offer(&mut g, &mut h, &message(1, &[1; 10])),
        Merge::FlushFirst,
        "sender 1 again"
    );
    assert_eq!(offer(&mut g, &mut h, &message(2, &[2; 100])), Merge::Merged);
    assert_eq!(
        offer(&mut g, &mut h, &message(3, &[3; 1])),
        Merge::FlushFirst,
        "past the MTU"
    );
    g.build(&mut (), &mut h);
    assert_eq!(h.emitted[0].0.len(), h.mtu as usize - 28);
    g.new_state(TAG, &mut h);
    assert_eq!(
        offer(&mut g, &mut h, &message(3, &[3; 300])),
        Merge::Pass,
        "never fits"
    );
}

#[test]
fn gathered_datagrams_from_upstream_are_unpacked_into_entries() {
    let mut h = TestHost::new("n=2 ttl=9");
    let mut g = Gather::init(&mut h).unwrap();
    g.new_state(TAG, &mut h);
    offer(&mut g, &mut h, &message(1, b"a"));
    offer(&mut g, &mut h, &message(2, b"bb"));
    g.build(&mut (), &mut h);
    let upstream = make::concast([10, 0, 7, 1].into(), 17, 30, &h.emitted[0].0);
    g.new_state(TAG, &mut h);
    offer(&mut g, &mut h, &upstream);
    offer(&mut g, &mut h, &message(3, b"ccc"));
    assert!(
        g.done(&mut (), &mut h),
        "two arrivals: the upstream router and sender 3"
    );
    g.build(&mut (), &mut h);
    let (payload, out) = &h.emitted[1];
    let (_, entries) = decode(payload);
    let sources: Vec<_> = entries.iter().map(|e| e.0).collect();
    assert_eq!(sources, [host(1), host(2), host(3)]);
    assert_eq!(out.ttl, 9, "ttl parameter");
}

#[test]
fn layout_checks_and_parameters() {
    assert!(payload::entries(b"GA\x01\x00\x00\x01\x0a\x00\x01\x01\x00\x02hi").is_some());
    assert!(
        payload::entries(b"GA\x01\x00\x00\x01\x0a\x00\x01\x01\x00\x03hi").is_none(),
        "entry past the end"
    );
    assert!(
        payload::entries(b"GA\x01\x00\x00\x02\x0a\x00\x01\x01\x00\x02hi").is_none(),
        "count too high"
    );
    assert!(
        payload::entries(b"GA\x01\x00\x00\x00x").is_none(),
        "trailing bytes"
    );
    let mut h = TestHost::new("");
    let cfg = Gather::init(&mut h).unwrap().config();
    assert_eq!(cfg, Config { n: 0, timeout_us: 10_000, ttl: 0 });
    // Without `n`, a round is as many senders as the node has children now, else 2.
    assert_eq!((cfg.senders(0), cfg.senders(5)), (2, 5));
    assert_eq!(Gather::init(&mut TestHost::new("n=3")).unwrap().config().senders(5), 3);
    assert!(Gather::init(&mut TestHost::new("n=1000")).is_err());
    let mut h = TestHost::new("");
    let mut g = Gather::init(&mut h).unwrap();
    assert_eq!(
        g.get_tag(&make::concast(host(1), 6, 64, &[0; 20]), &mut h),
        Tag::Pass,
        "not UDP"
    );
}
