//! Native unit tests of the multiplex spec's pieces, driven through a `TestHost`. The
//! engine's tests (mergespecs/engine/tests/multiplex.rs) run the whole spec, native and Wasm.

use std::vec::Vec;

use concast_sdk::wire::ipv4::Params;
use concast_sdk::wire::mplex::{self, HeaderRepr};
use concast_sdk::wire::options;
use concast_sdk::{Merge, MergeSpec, Tag};
use concast_speckit::test_host::make::{self, host, R};
use concast_speckit::test_host::TestHost;

use crate::input::{classify_datagram, Input};
use crate::{Config, Multiplex};

fn config() -> Config {
    Config::parse(b"").unwrap()
}

/// A 40-byte TCP ACK's payload (the TCP header).
const ACK: [u8; 20] = [0x50; 20];

fn ack(n: u8) -> Vec<u8> {
    make::concast(host(n), 6, 64, &ACK)
}

fn spec(host: &mut TestHost) -> Multiplex {
    Multiplex::init(host).expect("parameters parse")
}

/// Offers `msg` the way the engine does: tag, a fresh state for a tag that has none (in
/// `open`), merge. Returns the tag (None: passed or dropped by the tag) and merge's answer.
fn offer(
    m: &mut Multiplex,
    h: &mut TestHost,
    open: &mut Vec<u32>,
    msg: &[u8],
) -> (Option<u32>, Merge) {
    match m.get_tag(msg, h) {
        Tag::Merge(t) => {
            let mut tag = t as u32;
            if !open.contains(&tag) {
                tag = m.new_state(t, h);
                open.push(tag);
            }
            (Some(tag), m.merge(&mut tag, msg, h))
        }
        Tag::Pass => (None, Merge::Pass),
        Tag::Drop => (None, Merge::Drop),
    }
}

/// Builds and decodes what was emitted: (MplexHdr, records as (src, ttl, protocol, len)).
fn build(
    m: &mut Multiplex,
    h: &mut TestHost,
    open: &mut Vec<u32>,
    tag: u32,
) -> (HeaderRepr, Vec<(std::net::Ipv4Addr, u8, u8, usize)>) {
    m.build(&mut tag.clone(), h);
    open.retain(|&t| t != tag);
    let (body, out) = h.emitted.last().expect("emitted").clone();
    assert_eq!((out.protocol, out.dont_fragment), (254, true));
    let p = mplex::Packet::new_checked(&body[..]).expect("a valid MplexPkt body");
    assert_eq!(out.ttl, p.initial_ttl(), "outer TTL = initialTTL");
    let records = p
        .records()
        .map(|r| (r.src_addr(), r.ttl(), r.protocol(), r.payload().len()))
        .collect();
    (p.header_repr(), records)
}

#[test]
fn plain_small_datagrams_are_one_record_with_the_flow_delays() {
    let msg = ack(1);
    let Input::Records(p) = classify_datagram(&msg, &config()) else {
        panic!("a 48-byte datagram is bundled")
    };
    assert_eq!((p.live, p.record_bytes, p.expired), (1, 9 + 20, 0));
    assert_eq!(
        (
            p.delays.max_local,
            p.delays.max_total,
            p.delays.delayed_so_far
        ),
        (2_000, 10_000, 0)
    );
    let r = p.records().next().unwrap();
    assert_eq!(
        (r.src, r.ttl, r.protocol, r.payload),
        (host(1), 64, 6, &ACK[..])
    );
}

#[test]
fn never_multiplexed_fragments_options_multicast_and_large() {
    let cfg = config();
    let unbundleable = |msg: &[u8]| matches!(classify_datagram(msg, &cfg), Input::Unbundleable(_));
    let concast_opt = options::concast_area(1);
    let params = Params::new(host(1), R, 17);

    let fragment = make::ipv4(
        &Params {
            more_frags: true,
            ..params
        },
        &concast_opt,
        &ACK,
    );
    let router_alert = make::ipv4(&params, &[0x9E, 6, 0, 0, 0, 1, 0x94, 4, 0, 0], &ACK);
    let timestamp = make::ipv4(&params, &[0x9E, 6, 0, 0, 0, 1, 0x44, 4, 5, 0], &ACK);
    let multicast = make::ipv4(
        &Params {
            dst: [224, 0, 0, 9].into(),
            ..params
        },
        &concast_opt,
        &ACK,
    );
    let broadcast = make::ipv4(
        &Params {
            dst: [255; 4].into(),
            ..params
        },
        &concast_opt,
        &ACK,
    );
    let large = make::concast(host(1), 17, 64, &[0; 101]); // 129 bytes
    let at_threshold = make::concast(host(1), 17, 64, &[0; 100]); // 128 bytes
    let nop_padded = make::ipv4(&params, &[1, 0x9E, 6, 0, 0, 0, 1, 1], &ACK);
    let big_record = make::mplex(
        host(2),
        60,
        HeaderRepr {
            initial_ttl: 60,
            ..Default::default()
        },
        &[
            (host(1), 60, 6, &ACK),
            (host(3), 60, 17, &[0; 109]), // stands for a 129-byte datagram
        ],
    );
    for (what, msg) in [
        ("fragment", &fragment),
        ("router alert", &router_alert),
        ("timestamp option", &timestamp),
        ("multicast", &multicast),
        ("broadcast", &broadcast),
        ("129 bytes", &large),
        ("an MplexPkt with a 129-byte record", &big_record),
    ] {
        assert!(unbundleable(msg), "{what} must pass through");
    }
    assert!(
        !unbundleable(&at_threshold),
        "128 bytes is the default threshold, inclusive"
    );
    assert!(
        !unbundleable(&nop_padded),
        "NOP and EOL are not options that count"
    );
    assert!(unbundleable(&[0x45, 0, 0]), "not IPv4 at all");
    let big = Config::parse(b"size_threshold=129").unwrap();
    assert!(matches!(
        classify_datagram(&big_record, &big),
        Input::Records(_)
    ));
}

#[test]
fn records_age_by_the_hops_travelled_and_expired_ones_are_dropped() {
    // Bundled with initialTTL 64, now at outer TTL 60: 4 hops.
    let header = HeaderRepr {
        initial_ttl: 64,
        max_total_delay: 9_000,
        delayed_so_far: 700,
        max_local_delay: 1_000,
    };
    let msg = make::mplex(
        host(9),
        60,
        header,
        &[
            (host(1), 10, 6, &ACK),
            (host(2), 4, 6, &ACK),
            (host(3), 5, 17, b"x"),
        ],
    );
    let Input::Records(p) = classify_datagram(&msg, &config()) else {
        panic!()
    };
    assert_eq!((p.live, p.expired, p.record_bytes), (2, 1, 29 + 10));
    let ttls: Vec<_> = p.records().map(|r| (r.src, r.ttl)).collect();
    assert_eq!(ttls, [(host(1), 6), (host(3), 1)]);
    assert_eq!(
        (
            p.delays.max_total,
            p.delays.delayed_so_far,
            p.delays.max_local
        ),
        (9_000, 700, 1_000)
    );

    let all_gone = make::mplex(
        host(9),
        60,
        header,
        &[(host(1), 4, 6, &ACK), (host(2), 3, 6, &ACK)],
    );
    assert!(matches!(
        classify_datagram(&all_gone, &config()),
        Input::Expired(2)
    ));
    // A node that raised the outer TTL above initialTTL: no ageing.
    let raised = make::mplex(host(9), 70, header, &[(host(1), 1, 6, &ACK)]);
    assert!(
        matches!(classify_datagram(&raised, &config()), Input::Records(p) if p.records().next().unwrap().ttl == 1)
    );
}

#[test]
fn a_one_record_body_is_aged_like_any_other() {
    // A body of one live record is handed on as that record (no second walk of the body):
    // its TTL is still the one after the hops, its fields and payload as they arrived.
    let header = HeaderRepr {
        initial_ttl: 64,
        max_total_delay: 9_000,
        delayed_so_far: 700,
        max_local_delay: 1_000,
    };
    let one = make::mplex(host(9), 60, header, &[(host(1), 10, 17, b"payload")]);
    let Input::Records(p) = classify_datagram(&one, &config()) else {
        panic!()
    };
    assert_eq!((p.live, p.expired, p.record_bytes), (1, 0, 9 + 7));
    let got: Vec<_> = p.records().map(|r| (r.src, r.ttl, r.protocol, r.payload)).collect();
    assert_eq!(got, [(host(1), 6, 17, &b"payload"[..])]);
    // One live record after an expired one: the live one, aged, and the expired count.
    let second = make::mplex(
        host(9),
        60,
        header,
        &[(host(2), 4, 6, &ACK), (host(3), 5, 17, b"x")],
    );
    let Input::Records(p) = classify_datagram(&second, &config()) else {
        panic!()
    };
    assert_eq!((p.live, p.expired), (1, 1));
    let got: Vec<_> = p.records().map(|r| (r.src, r.ttl, r.payload)).collect();
    assert_eq!(got, [(host(3), 1, &b"x"[..])]);
}

#[test]
fn bundles_sources_in_arrival_order_until_the_local_delay() {
    let mut h = TestHost::new("max_local_delay_us=3000 max_total_delay_us=50000");
    let mut m = spec(&mut h);
    let mut open = Vec::new();
    h.now = 1_000;
    for n in 1..=3 {
        let msg = make::concast(host(n), 6, 60 + n, &ACK);
        assert_eq!(
            offer(&mut m, &mut h, &mut open, &msg),
            (Some(0), Merge::Merged)
        );
        assert!(!m.done(&mut 0, &mut h));
        h.now += 100;
    }
    assert_eq!(
        h.timer,
        Some(1_000 + 3_000),
        "MaxLocalDelay after the first arrival"
    );
    h.now = 4_000; // the timer fired
    assert!(m.timeout(&mut 0, &mut h));
    let (hdr, records) = build(&mut m, &mut h, &mut open, 0);
    assert_eq!(
        records,
        [
            (host(1), 61, 6, 20),
            (host(2), 62, 6, 20),
            (host(3), 63, 6, 20)
        ]
    );
    assert_eq!(hdr.initial_ttl, 63, "initialTTL = the largest record TTL");
    assert_eq!(
        (hdr.max_local_delay, hdr.max_total_delay, hdr.delayed_so_far),
        (3_000, 50_000, 3_000)
    );
}

#[test]
fn a_repeat_opens_the_next_bundle_and_a_bundle_at_the_mtu_leaves() {
    let mut h = TestHost::new("");
    h.mtu = 28 + 16 + 2 * 29; // room for two ACK records
    let mut m = spec(&mut h);
    let mut open = Vec::new();
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(1)),
        (Some(0), Merge::Merged)
    );
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(1)),
        (Some(1), Merge::Merged),
        "same flow: the next bundle, the first one keeps waiting"
    );
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(2)),
        (Some(0), Merge::Merged),
        "another flow joins the oldest bundle"
    );
    assert!(
        m.done(&mut 0, &mut h),
        "not even an empty record fits: send now"
    );
    let (_, records) = build(&mut m, &mut h, &mut open, 0);
    assert_eq!(
        records.iter().map(|r| r.0).collect::<Vec<_>>(),
        [host(1), host(2)]
    );
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(3)),
        (Some(1), Merge::Merged),
        "bundle 1 is the oldest now"
    );
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(4)),
        (Some(1), Merge::FlushFirst),
        "it would go to bundle 1 but the MTU is reached: 1 leaves first"
    );
    assert_eq!(m.open_bundles().collect::<Vec<_>>(), [1]);
    h.mtu = 28 + 16 + 28;
    let mut fresh = spec(&mut h);
    assert_eq!(
        offer(&mut fresh, &mut h, &mut Vec::new(), &ack(3)),
        (None, Merge::Pass),
        "cannot fit even alone, and nothing of its flow waits: passed by the tag"
    );
}

#[test]
fn a_passing_datagram_of_a_bundled_source_waits_for_the_bundle() {
    let mut h = TestHost::new("key=host");
    let mut m = spec(&mut h);
    let mut open = Vec::new();
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(1)),
        (Some(0), Merge::Merged)
    );
    let large_from_1 = make::concast(host(1), 6, 64, &[0; 500]);
    let large_from_2 = make::concast(host(2), 6, 64, &[0; 500]);
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &large_from_2),
        (None, Merge::Pass)
    );
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &large_from_1),
        (Some(0), Merge::FlushFirst)
    );
    build(&mut m, &mut h, &mut open, 0);
    let mut tag = m.new_state(0, &mut h);
    assert_eq!(
        m.merge(&mut tag, &large_from_1, &mut h),
        Merge::Pass,
        "then it goes as it is"
    );
}

#[test]
fn zero_delay_leaves_the_batch_alone_while_the_link_is_idle() {
    let mut h = TestHost::new("max_local_delay_us=0 key=host");
    let mut m = spec(&mut h);
    let mut open = Vec::new();
    h.now = 1_000;
    h.egress_free_at = 1_000; // frees now: nothing would wait in its queue
    h.pending = [ack(2), ack(3)].to_vec();
    offer(&mut m, &mut h, &mut open, &ack(1));
    assert!(m.done(&mut 0, &mut h), "zero local delay: now");
    assert!(h.taken.is_empty(), "an idle link combines nothing");
    let (_, records) = build(&mut m, &mut h, &mut open, 0);
    assert_eq!(records.len(), 1);

    // The same batch with fold_pending=always (the old rule) is folded in.
    let mut h = TestHost::new("max_local_delay_us=0 key=host fold_pending=always");
    let mut m = spec(&mut h);
    let mut open = Vec::new();
    h.pending = [ack(2), ack(3)].to_vec();
    offer(&mut m, &mut h, &mut open, &ack(1));
    assert!(m.done(&mut 0, &mut h));
    assert_eq!(h.taken, [ack(2), ack(3)]);
}

#[test]
fn zero_delay_takes_what_is_pending_and_keeps_each_source_in_order() {
    let mut h = TestHost::new("max_local_delay_us=0 key=host");
    h.egress_free_at = 500; // the output link is busy: the bundle would wait in its queue
    let mut m = spec(&mut h);
    let mut open = Vec::new();
    let large_from_4 = make::concast(host(4), 6, 64, &[0; 300]);
    h.pending = [ack(2), ack(3), large_from_4.clone(), ack(4), ack(1), ack(5)].to_vec();
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(1)),
        (Some(0), Merge::Merged)
    );
    assert!(m.done(&mut 0, &mut h), "zero local delay: now");
    // 4 is blocked behind its large datagram, the second 1 by the bundle's first.
    assert_eq!(h.taken, [ack(2), ack(3), ack(5)]);
    assert_eq!(h.pending, [large_from_4, ack(4), ack(1)]);
    let (_, records) = build(&mut m, &mut h, &mut open, 0);
    let sources: Vec<_> = records.iter().map(|r| r.0).collect();
    assert_eq!(sources, [host(1), host(2), host(3), host(5)]);
}

#[test]
fn bad_parameters_refuse_the_flow() {
    for p in [
        "size_threshold=70000",
        "max_local_delay_us=-1",
        "max_total_delay_us=x",
        "key=port",
        "max_bundles=0",
        "max_bundles=65",
        "fold_pending=never",
    ] {
        assert!(Multiplex::init(&mut TestHost::new(p)).is_err(), "{p}");
    }
    let c = Config::parse(b"size_threshold=200 max_local_delay_us=0 max_held_bytes=4096").unwrap();
    assert_eq!(
        (
            c.size_threshold,
            c.max_local_delay_us,
            c.max_total_delay_us,
            c.max_held_bytes
        ),
        (200, 0, 10_000, 4_096)
    );
    assert_eq!((c.key, c.max_bundles), (crate::keys::KeyKind::Flow, 16));
    let c = Config::parse(b"key=host max_bundles=64").unwrap();
    assert_eq!((c.key, c.max_bundles), (crate::keys::KeyKind::Host, 64));
}

#[test]
fn the_held_bytes_budget_sends_every_bundle_first() {
    let mut h = TestHost::new("max_held_bytes=150");
    let mut m = spec(&mut h);
    let mut open = Vec::new();
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(1)),
        (Some(0), Merge::Merged)
    ); // 48 held
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(1)),
        (Some(1), Merge::Merged)
    ); // 96
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(2)),
        (Some(0), Merge::Merged)
    ); // 144
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(3)),
        (Some(1), Merge::FlushFirst),
        "the newest bundle is named: building it takes every older one along"
    );
}

#[test]
fn with_every_bundle_open_the_oldest_is_named_to_leave() {
    let mut h = TestHost::new("max_bundles=2");
    let mut m = spec(&mut h);
    let mut open = Vec::new();
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(1)),
        (Some(0), Merge::Merged)
    );
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(1)),
        (Some(1), Merge::Merged)
    );
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(1)),
        (Some(0), Merge::FlushFirst)
    );
    build(&mut m, &mut h, &mut open, 0);
    // Offered again (the engine does so): a fresh bundle under tag 0, now the newest.
    let mut tag = m.new_state(0, &mut h);
    assert_eq!(m.merge(&mut tag, &ack(1), &mut h), Merge::Merged);
    assert_eq!(m.open_bundles().collect::<Vec<_>>(), [1, 0]);
    // Flow 2 joins the oldest (1); a second ACK of flow 1 must follow bundle 0: no room.
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(2)),
        (Some(1), Merge::Merged)
    );
    assert_eq!(
        offer(&mut m, &mut h, &mut open, &ack(1)),
        (Some(1), Merge::FlushFirst)
    );
}

#[test]
fn the_tos_byte_of_every_record_survives_bundling() {
    let mut h = TestHost::new("");
    let mut m = spec(&mut h);
    let mut open = Vec::new();
    // A plain ACK marked DSCP EF + ECN CE, and one already in an MplexPkt with ECT(0).
    let plain = make::ipv4(
        &Params {
            tos: 0xB8 | 0b11,
            ..Params::new(host(1), R, 6)
        },
        &[0x9E, 6, 0, 0, 0, 1, 0, 0],
        &ACK,
    );
    let mut bundled = make::mplex(host(2), 64, HeaderRepr::default(), &[(host(2), 64, 6, &ACK)]);
    bundled[28 + 16 + mplex::record_field::TOS] = 0b10; // IPv4 header with option: 28 bytes
    assert_eq!(offer(&mut m, &mut h, &mut open, &plain), (Some(0), Merge::Merged));
    assert_eq!(offer(&mut m, &mut h, &mut open, &bundled), (Some(0), Merge::Merged));
    m.build(&mut 0, &mut h);
    let (body, _) = h.emitted.last().expect("emitted").clone();
    let p = mplex::Packet::new_checked(&body[..]).expect("valid");
    assert_eq!(p.version(), mplex::VERSION);
    let tos: Vec<_> = p.records().map(|r| (r.src_addr(), r.tos())).collect();
    assert_eq!(tos, [(host(1), 0xBB), (host(2), 0b10)]);
}

/// Drives `msgs` through a fresh spec as the engine does, and returns each datagram's tag
/// and merge answer, what was emitted and logged. `fused`: as ABI v2's run loop, each
/// datagram is offered with `tag_and_merge` into the run's state (the state the previous
/// datagram went to), and only a datagram of another tag is merged with `merge` after its
/// state is found; else `get_tag`, then `merge`, as ABI v1. A `FLUSH_FIRST` builds the
/// state and offers the datagram once more; every seventh datagram the oldest bundle leaves.
fn drive(fused: bool, mtu: u32, msgs: &[Vec<u8>]) -> (Vec<(Tag, Option<Merge>, Option<Merge>)>, TestHost) {
    let mut h = TestHost::new("max_bundles=4");
    h.mtu = mtu;
    let mut m = spec(&mut h);
    let mut open: Vec<u32> = Vec::new();
    let mut run: Option<u32> = None;
    let mut seen = Vec::new();
    for (k, msg) in msgs.iter().enumerate() {
        h.now = k as u64 * 100;
        let (tag, merged) = match run.filter(|t| fused && open.contains(t)) {
            Some(rt) => m.tag_and_merge(msg, Some((&mut rt.clone(), u64::from(rt))), &mut h),
            None => (m.get_tag(msg, &mut h), None),
        };
        let Tag::Merge(t) = tag else {
            assert_eq!(merged, None, "merged without a state of its tag");
            seen.push((tag, None, None));
            continue;
        };
        let mut state = t as u32;
        if !open.contains(&state) {
            state = m.new_state(t, &mut h);
            open.push(state);
        }
        run = Some(state);
        let r = merged.unwrap_or_else(|| m.merge(&mut state.clone(), msg, &mut h));
        let mut again = None;
        if r == Merge::FlushFirst {
            m.build(&mut state.clone(), &mut h);
            open.retain(|&s| s != state);
            state = m.new_state(t, &mut h);
            open.push(state);
            again = Some(m.merge(&mut state.clone(), msg, &mut h));
        }
        seen.push((tag, Some(r), again));
        if k % 7 == 6 {
            if let Some(&oldest) = open.first() {
                m.build(&mut oldest.clone(), &mut h);
                open.retain(|&s| s != oldest);
            }
        }
    }
    for s in open.clone() {
        m.build(&mut s.clone(), &mut h);
    }
    (seen, h)
}

/// The fused `tag_and_merge` (one parse) gives what `get_tag` then `merge` give, datagram
/// for datagram, and the bundles built from them are byte for byte the same: on repeated
/// sources (parallel bundles), datagrams too large to bundle that must follow a bundle,
/// MplexPkts with expired records, and bundles that reach the path MTU.
#[test]
fn tag_and_merge_gives_what_get_tag_then_merge_give() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let header = |initial_ttl| HeaderRepr {
        initial_ttl,
        max_total_delay: 4_000,
        delayed_so_far: 100,
        max_local_delay: 1_000,
    };
    let msgs: Vec<Vec<u8>> = (0..2_000)
        .map(|_| {
            let n = (next() % 9) as u8 + 1;
            match next() % 9 {
                // Over the size threshold: of another flow, and of the ACKs' flow (it must
                // leave after the bundle holding that flow).
                0 => make::concast(host(n), 17, 64, &[7; 300]),
                7 => make::concast(host(n), 6, 64, &[0x50; 300]),
                1 => make::mplex(host(n), 2, header(64), &[(host(n), 3, 6, &ACK)]), // expired
                2 => make::mplex(
                    host(30),
                    60,
                    header(64),
                    &[(host(n), 3, 6, &ACK), (host(n + 10), 64, 6, &ACK)],
                ),
                3 => make::one_record(host(n), 64, (4_000, 0, 1_000), &ACK),
                _ => ack(n),
            }
        })
        .collect();
    for mtu in [1500, 28 + 16 + 3 * 29] {
        let (two_step, a) = drive(false, mtu, &msgs);
        let (fused, b) = drive(true, mtu, &msgs);
        assert_eq!(two_step, fused, "tags and merge answers, MTU {mtu}");
        assert_eq!(a.emitted, b.emitted, "bundles emitted, MTU {mtu}");
        assert_eq!(a.logs, b.logs);
        let merges = |what| two_step.iter().filter(|(_, r, _)| *r == Some(what)).count();
        // The inputs reach every branch the fused step has: merged, a full bundle or a
        // datagram that must follow one (FLUSH_FIRST), passed or dropped by the tag.
        assert!(merges(Merge::Merged) > 500, "MTU {mtu}");
        assert!(merges(Merge::FlushFirst) > 20, "MTU {mtu}: {}", merges(Merge::FlushFirst));
        assert!(two_step.iter().filter(|(t, _, _)| matches!(t, Tag::Pass | Tag::Drop)).count() > 100);
        assert!(a.emitted.len() > 50);
        assert!(a.logs.iter().any(|(_, l)| l.contains("TTL ran out")));
    }
}
