//! The bundled `multiplex` spec in the engine, as Wasm and natively: bundling, the MplexHdr
//! delay fields, TTL ageing, MTU flushes, parallel bundles (same-key records in later
//! bundles, opening order kept), pass-through, and zero-delay bundling from the pending
//! queue. Every output is decoded with concast-wire.

mod bundled;

use std::net::Ipv4Addr;

use bundled::*;
use concast_engine::sdk::wire::ipv4::{self, Params};
use concast_engine::sdk::wire::mplex::HeaderRepr;
use concast_engine::sdk::wire::{classify, options, Datagram};
use concast_engine::{Limits, OutputKind, Unmerged};
use concast_spec_multiplex::Multiplex;
use concast_speckit::test_host::make::{self, host};

/// A record as decoded: (source, TTL, protocol, payload).
type Rec = (Ipv4Addr, u8, u8, Vec<u8>);

/// A forwarded MplexPkt, decoded.
#[derive(Debug)]
struct Bundle {
    at: u64,
    header: HeaderRepr,
    records: Vec<Rec>,
}

impl Bundle {
    fn sources(&self) -> Vec<Ipv4Addr> {
        self.records.iter().map(|r| r.0).collect()
    }
}

/// Every merged output of `run`, decoded and checked: a valid MplexPkt from this node to R,
/// DF set, outer TTL = initialTTL = the largest record TTL.
fn bundles(run: &Run, mtu: u32) -> Vec<Bundle> {
    run.of_kind(OutputKind::Merged)
        .into_iter()
        .map(|(at, d)| {
            check_merged_header(&d, mtu);
            let Ok(Datagram::Mplex { ip, group, mplex }) = classify(&d) else {
                panic!("not an MplexPkt: {d:02x?}")
            };
            assert_eq!((group, ip.protocol()), (G, 254));
            assert!(ip.dont_frag());
            let records: Vec<Rec> = mplex
                .records()
                .map(|r| (r.src_addr(), r.ttl(), r.protocol(), r.payload().to_vec()))
                .collect();
            let max_ttl = records.iter().map(|r| r.1).max().unwrap();
            assert_eq!((ip.ttl(), mplex.initial_ttl()), (max_ttl, max_ttl));
            Bundle {
                at,
                header: mplex.header_repr(),
                records,
            }
        })
        .collect()
}

/// A TCP ACK's IPv4 payload (the 20-byte TCP header), marked with `n`.
fn ack_payload(n: u8) -> Vec<u8> {
    let mut p = vec![0x50; 20];
    p[0] = n;
    p
}

/// A plain concast ACK datagram (48 bytes) from sender `n`.
fn plain_ack(n: u8) -> Vec<u8> {
    make::concast(host(n), 6, 64, &ack_payload(n))
}

/// A sender's one-record MplexPkt with delays (MaxTotalDelay, DelayedSoFar, MaxLocalDelay).
fn sent(n: u8, delays: (u32, u32, u32)) -> Vec<u8> {
    make::one_record(host(n), 64, delays, &ack_payload(n))
}

fn header(initial_ttl: u8, delays: (u32, u32, u32)) -> HeaderRepr {
    HeaderRepr {
        initial_ttl,
        max_total_delay: delays.0,
        delayed_so_far: delays.1,
        max_local_delay: delays.2,
    }
}

fn multiplex(setup: &Setup, scenario: impl Fn(&mut Run)) -> Run {
    both::<Multiplex>("multiplex", setup, scenario)
}

#[test]
fn bundles_n_sources_into_one_mplexpkt_when_the_local_delay_is_up() {
    let run = multiplex(&Setup::params(""), |run| {
        for n in 1..=10u8 {
            run.at(u64::from(n) * 100, &[sent(n, (20_000, 300, 5_000))]);
        }
        assert_eq!(run.engine.next_deadline(), Some(100 + 5_000));
        run.until(5_099);
        assert!(
            run.forwarded().is_empty(),
            "held until MaxLocalDelay after the first"
        );
        run.until(10_000);
    });
    let out = bundles(&run, 1500);
    assert_eq!(out.len(), 1);
    let b = &out[0];
    assert_eq!(b.at, 5_100);
    assert_eq!(
        b.sources(),
        (1..=10).map(host).collect::<Vec<_>>(),
        "arrival order"
    );
    assert!(b
        .records
        .iter()
        .enumerate()
        .all(|(i, r)| r.1 == 64 && r.2 == 6 && r.3 == ack_payload(i as u8 + 1)));
    // All have 19,700 µs left on arrival; the first (earliest deadline) sets the fields.
    assert_eq!(b.header, header(64, (20_000, 300 + 5_000, 5_000)));
    let c = run.stats().counters;
    assert_eq!((c.received, c.merged, c.out, c.timer_fires), (10, 10, 1, 1));
    assert_eq!(run.engine.timers_armed(), 0);
}

#[test]
fn merging_bundles_with_different_delays_follows_section_3_2() {
    let up = |n: u8| Ipv4Addr::new(10, 0, 7, n);
    let run = multiplex(&Setup::params(""), |run| {
        // (MaxTotalDelay, DelayedSoFar, MaxLocalDelay): 28,000 µs left, runs out at 29,000.
        let u1 = make::mplex(
            up(1),
            64,
            header(64, (30_000, 2_000, 8_000)),
            &[(host(1), 64, 6, &ack_payload(1)), (host(2), 60, 17, b"udp")],
        );
        // 6,000 µs left: runs out at 8,000, the least remaining time.
        let u2 = make::mplex(
            up(2),
            64,
            header(64, (10_000, 4_000, 6_000)),
            &[(host(3), 64, 6, &ack_payload(3))],
        );
        // 11,000 µs left, runs out at 14,000; the smallest MaxLocalDelay.
        let u3 = make::mplex(
            up(3),
            64,
            header(64, (12_000, 1_000, 5_000)),
            &[
                (host(4), 64, 6, &ack_payload(4)),
                (host(5), 64, 6, &ack_payload(5)),
            ],
        );
        run.at(1_000, &[u1]);
        assert_eq!(run.engine.next_deadline(), Some(1_000 + 8_000));
        run.at(2_000, &[u2]);
        assert_eq!(run.engine.next_deadline(), Some(1_000 + 6_000));
        run.at(3_000, &[u3]);
        assert_eq!(
            run.engine.next_deadline(),
            Some(1_000 + 5_000),
            "held MaxLocalDelay = min"
        );
        run.until(50_000);
    });
    let out = bundles(&run, 1500);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].at, 6_000);
    assert_eq!(
        out[0].sources(),
        [host(1), host(2), host(3), host(4), host(5)]
    );
    // MaxTotalDelay and DelayedSoFar from u2, which was held here 4,000 µs.
    assert_eq!(out[0].header, header(64, (10_000, 4_000 + 4_000, 5_000)));
}

/// Two routers in a row, virtual time: the first bundle's DelayedSoFar is what it was held;
/// at the second router the total budget, not the local delay, decides when it leaves.
#[test]
fn delayed_so_far_accumulates_hop_by_hop_in_virtual_time() {
    let first = multiplex(&Setup::params(""), |run| {
        for (n, t) in [(1u8, 0u64), (2, 500), (3, 1_000)] {
            run.at(t, &[sent(n, (5_000, 0, 3_000))]);
        }
        run.until(100_000);
    });
    let out = bundles(&first, 1500);
    assert_eq!((out.len(), out[0].at), (1, 3_000));
    assert_eq!(out[0].header, header(64, (5_000, 3_000, 3_000)));

    // One hop later (TTL - 1) it reaches the second router at 3,100, and sender 4's fresh
    // one-record packet at 3,200.
    let mut hopped = first.of_kind(OutputKind::Merged)[0].1.clone();
    ipv4::Packet::new_unchecked(&mut hopped[..]).decrement_ttl();
    let second = multiplex(&Setup::params(""), |run| {
        run.at(3_100, &[hopped.clone()]);
        run.at(3_200, &[sent(4, (5_000, 0, 3_000))]);
        // Local: 3,100 + 3,000. Total: 3,100 + (5,000 - 3,000) = 5,100, earlier.
        assert_eq!(run.engine.next_deadline(), Some(5_100));
        run.until(100_000);
    });
    let out = bundles(&second, 1500);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].at, 5_100);
    // initialTTL 64: sender 4's fresh record; the first router's records aged one hop.
    assert_eq!(
        out[0].header,
        header(64, (5_000, 5_000, 3_000)),
        "DelayedSoFar reaches MaxTotalDelay, not past it"
    );
    let ttls: Vec<(Ipv4Addr, u8)> = out[0].records.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(
        ttls,
        [(host(1), 63), (host(2), 63), (host(3), 63), (host(4), 64)]
    );
}

#[test]
fn a_bundle_is_flushed_before_it_would_exceed_the_path_mtu() {
    // 200 - 28 (header) - 16 (MplexHdr) = 156 bytes: five 28-byte ACK records.
    let setup = Setup::params("").mtu(200);
    let run = multiplex(&setup, |run| {
        let batch: Vec<Vec<u8>> = (1..=12).map(plain_ack).collect();
        run.at(0, &batch);
        run.until(100_000);
    });
    let out = bundles(&run, 200);
    let shape: Vec<(u64, usize)> = out.iter().map(|b| (b.at, b.records.len())).collect();
    assert_eq!(
        shape,
        [(0, 5), (0, 5), (2_000, 2)],
        "two full bundles at once, the rest after MaxLocalDelay"
    );
    let all: Vec<Ipv4Addr> = out.iter().flat_map(Bundle::sources).collect();
    assert_eq!(all, (1..=12).map(host).collect::<Vec<_>>());
    // Plain datagrams get the flow's delays and DelayedSoFar = time held here.
    assert_eq!(out[2].header, header(64, (10_000, 2_000, 2_000)));
    assert_eq!(out[0].header, header(64, (10_000, 0, 2_000)));
}

#[test]
fn two_records_of_one_source_never_share_a_bundle() {
    // key=host: the second datagram of host 1 (another flow's payload) still counts as the
    // same source; it opens the next bundle, while host 3 still joins the first one.
    let run = multiplex(&Setup::params("max_local_delay_us=1000 key=host"), |run| {
        run.at(0, &[plain_ack(1), plain_ack(2)]);
        run.at(
            10,
            &[make::concast(host(1), 6, 64, b"second ack of 1 ....")],
        );
        run.at(20, &[plain_ack(3)]);
        run.until(100_000);
    });
    let out = bundles(&run, 1500);
    let shape: Vec<(u64, Vec<Ipv4Addr>)> = out.iter().map(|b| (b.at, b.sources())).collect();
    assert_eq!(
        shape,
        [
            (1_000, vec![host(1), host(2), host(3)]),
            (1_010, vec![host(1)])
        ]
    );
    assert_eq!(out[1].records[0].3, b"second ack of 1 ....");
}

#[test]
fn record_ttls_are_brought_up_to_date_and_expired_records_dropped() {
    let run = multiplex(&Setup::params(""), |run| {
        // Bundled with initialTTL 64, arrives with TTL 61: three hops.
        let aged = make::mplex(
            Ipv4Addr::new(10, 0, 7, 1),
            61,
            header(64, (50_000, 0, 1_000)),
            &[
                (host(1), 10, 6, &ack_payload(1)),
                (host(2), 3, 6, &ack_payload(2)),
                (host(3), 2, 17, b"late"),
            ],
        );
        let all_expired = make::mplex(
            Ipv4Addr::new(10, 0, 7, 2),
            61,
            header(64, (50_000, 0, 1_000)),
            &[(host(6), 3, 6, &ack_payload(6))],
        );
        run.at(
            0,
            &[
                aged,
                make::concast(host(4), 6, 5, &ack_payload(4)),
                all_expired.clone(),
            ],
        );
        run.until(100_000);
        // Alone, with no bundle open: dropped, and the state opened for it closed again.
        run.at(200_000, std::slice::from_ref(&all_expired));
        assert_eq!(run.stats().open_states, 0);
    });
    let out = bundles(&run, 1500);
    assert_eq!(out.len(), 1);
    let ttls: Vec<(Ipv4Addr, u8)> = out[0].records.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(ttls, [(host(1), 7), (host(4), 5)]);
    assert_eq!(out[0].header.initial_ttl, 7);
    let c = run.stats().counters;
    assert_eq!((c.received, c.merged, c.dropped, c.out), (4, 2, 2, 1));
    let logs: Vec<String> = run.logs().into_iter().map(|l| l.text).collect();
    assert_eq!(
        logs,
        [
            "multiplex: dropped 2 record(s) whose TTL ran out (2 so far)",
            "multiplex: dropped 1 record(s) whose TTL ran out (3 so far)",
            "multiplex: dropped 1 record(s) whose TTL ran out (4 so far)",
        ]
    );
}

#[test]
fn fragments_options_multicast_and_large_datagrams_pass_unmerged() {
    let params = Params::new(host(1), R, 17);
    let concast_opt = options::concast_area(G);
    let payload = ack_payload(9);
    let passing = vec![
        make::ipv4(
            &Params {
                more_frags: true,
                ..params
            },
            &concast_opt,
            &payload,
        ),
        make::ipv4(
            &Params {
                frag_offset: 3,
                ..params
            },
            &concast_opt,
            &payload,
        ),
        make::ipv4(&params, &[0x9E, 6, 0, 0, 0, 1, 0x94, 4, 0, 0], &payload),
        make::ipv4(&params, &[0x9E, 6, 0, 0, 0, 1, 0x07, 3, 4, 0], &payload), // record route
        make::ipv4(
            &Params {
                dst: Ipv4Addr::new(239, 1, 2, 3),
                ..params
            },
            &concast_opt,
            &payload,
        ),
        make::concast(host(1), 17, 64, &[0; 101]), // 129 bytes
        make::mplex(
            host(2),
            64,
            header(64, (9_000, 0, 1_000)),
            &[(host(2), 64, 17, &[0; 120])],
        ),
    ];
    let setup = Setup::params("");
    let run = multiplex(&setup, |run| {
        run.at(0, &passing);
        run.until(100_000);
    });
    let forwarded = run.forwarded();
    assert_eq!(forwarded.len(), passing.len());
    for ((_, kind, d), original) in forwarded.iter().zip(&passing) {
        assert_eq!(*kind, OutputKind::Unmerged(Unmerged::Passed));
        assert_eq!(d, original, "forwarded byte for byte");
    }
    assert_eq!(run.stats().counters.passed, passing.len() as u64);
    assert_eq!(
        run.stats().open_states,
        0,
        "states opened to decide were closed again"
    );

    // A raised threshold lets the 129-byte datagram in.
    let run = multiplex(&Setup::params("size_threshold=129"), |run| {
        run.at(0, &[passing[5].clone()]);
        run.until(100_000);
    });
    assert_eq!(bundles(&run, 1500)[0].records[0].3.len(), 101);
}

#[test]
fn a_passing_datagram_leaves_after_the_bundle_holding_its_source() {
    let large = make::concast(host(1), 6, 64, &[7; 400]);
    let run = multiplex(&Setup::params("key=host"), |run| {
        run.at(0, &[plain_ack(1), plain_ack(2)]);
        run.at(50, std::slice::from_ref(&large));
        run.until(100_000);
    });
    let f = run.forwarded();
    let kinds: Vec<(u64, OutputKind)> = f.iter().map(|o| (o.0, o.1)).collect();
    assert_eq!(
        kinds,
        [
            (50, OutputKind::Merged),
            (50, OutputKind::Unmerged(Unmerged::Passed))
        ]
    );
    assert_eq!(f[1].2, large);
    assert_eq!(bundles(&run, 1500)[0].sources(), [host(1), host(2)]);
}

#[test]
fn zero_delay_bundles_the_pending_batch_into_one_mplexpkt() {
    let batch: Vec<Vec<u8>> = (1..=8).map(|n| sent(n, (0, 0, 0))).collect();
    // fold_pending=always: folded without asking a gate (there is none here).
    let run = multiplex(&Setup::params("fold_pending=always"), |run| run.at(1_000, &batch));
    let out = bundles(&run, 1500);
    assert_eq!(
        out.len(),
        1,
        "8 datagrams in, ONE MplexPkt out, no added delay"
    );
    assert_eq!(out[0].at, 1_000);
    assert_eq!(out[0].sources(), (1..=8).map(host).collect::<Vec<_>>());
    assert_eq!(out[0].header, header(64, (0, 0, 0)));
    for (n, r) in (1..=8).zip(&out[0].records) {
        assert_eq!((r.1, r.2, &r.3), (64, 6, &ack_payload(n)));
    }
    let c = run.stats().counters;
    assert_eq!(
        (c.received, c.merged, c.taken, c.out, c.built_from),
        (8, 8, 7, 1, 8)
    );
    assert_eq!(run.engine.timers_armed(), 0);
}

#[test]
fn zero_delay_plain_datagrams_with_repeated_sources_keep_their_order() {
    // Sender 1 sends twice in the batch: its second ACK opens the next bundle.
    let batch = vec![
        plain_ack(1),
        plain_ack(2),
        make::concast(host(1), 6, 64, b"1 again, later ......"),
        plain_ack(3),
    ];
    let run = multiplex(&Setup::params("max_local_delay_us=0 key=host fold_pending=always"), |run| {
        run.at(0, &batch)
    });
    let out = bundles(&run, 1500);
    let sources: Vec<Vec<Ipv4Addr>> = out.iter().map(Bundle::sources).collect();
    assert_eq!(sources, [vec![host(1), host(2), host(3)], vec![host(1)]]);
    assert_eq!(out[1].records[0].3, b"1 again, later ......");
}

#[test]
fn a_lowered_held_bytes_budget_sends_bundles_early_instead_of_quarantine() {
    let mut setup = Setup::params("max_held_bytes=200");
    setup.limits = Limits {
        held_bytes: 200,
        ..Limits::default()
    };
    let run = multiplex(&setup, |run| {
        let batch: Vec<Vec<u8>> = (1..=9).map(plain_ack).collect();
        run.at(0, &batch);
        run.until(100_000);
    });
    let sizes: Vec<usize> = bundles(&run, 1500)
        .iter()
        .map(|b| b.records.len())
        .collect();
    assert_eq!(sizes, [4, 4, 1], "4 x 48 bytes held at most");
}

/// A long mixed workload: native and Wasm agree byte for byte, and nothing is lost.
#[test]
fn wasm_and_native_agree_on_a_mixed_workload() {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut batches = Vec::new();
    for i in 0..300u64 {
        let batch: Vec<Vec<u8>> = (0..next() % 6)
            .map(|_| {
                let n = (next() % 24) as u8 + 1;
                match next() % 5 {
                    0 => sent(
                        n,
                        (
                            4_000,
                            (next() % 3_000) as u32,
                            500 + (next() % 1_500) as u32,
                        ),
                    ),
                    1 => make::concast(host(n), 17, 64, &vec![n; (next() % 140) as usize]),
                    _ => plain_ack(n),
                }
            })
            .collect();
        batches.push((i * 173, batch));
    }
    let run = multiplex(&Setup::params("max_local_delay_us=700").mtu(576), |run| {
        for (t, b) in &batches {
            run.at(*t, b);
        }
        run.until(10_000_000);
    });
    let c = run.stats().counters;
    let received: u64 = batches.iter().map(|(_, b)| b.len() as u64).sum();
    assert_eq!(c.received, received);
    assert_eq!(c.merged + c.passed + c.dropped, received);
    let records: usize = bundles(&run, 576).iter().map(|b| b.records.len()).sum();
    assert_eq!(
        records as u64, c.merged,
        "one-record inputs: one record per merged datagram"
    );
    assert!(c.out * 3 < c.merged, "bundling saves datagrams: {c:?}");
}

/// An ACK of sender `n`'s connection `conn` (ports in the TCP header), marked with `seq`.
fn flow_ack(n: u8, conn: u16, seq: u8) -> Vec<u8> {
    let mut p = vec![0x50; 20];
    p[..2].copy_from_slice(&(40_000 + conn).to_be_bytes());
    p[2..4].copy_from_slice(&80u16.to_be_bytes());
    p[4] = seq;
    make::one_record(host(n), 64, (50_000, 0, 2_000), &p)
}

/// (source, ports, seq mark) of a record built by `flow_ack`.
fn ack_id(r: &Rec) -> (Ipv4Addr, u16, u8) {
    (r.0, u16::from_be_bytes([r.3[0], r.3[1]]), r.3[4])
}

/// Checks the rule on every bundle and the order on the whole output: no key twice in a
/// bundle, each (source, connection)'s ACKs leave in the order they were sent.
fn check_order_and_uniqueness(out: &[Bundle]) {
    let mut last: std::collections::HashMap<(Ipv4Addr, u16), u8> = Default::default();
    for b in out {
        let mut seen = std::collections::HashSet::new();
        for r in &b.records {
            let (src, port, seq) = ack_id(r);
            assert!(seen.insert((src, port)), "one flow twice in a bundle: {:?}", b.records);
            if let Some(prev) = last.insert((src, port), seq) {
                assert!(seq > prev, "{src}:{port} reordered: {seq} after {prev}");
            }
        }
    }
}

#[test]
fn bursts_of_one_flow_fill_parallel_bundles_that_leave_in_opening_order() {
    // 8 senders each send a burst of 4 ACKs of one connection within 80 µs: today's rule
    // (close on a repeat) made 4 bundles per burst round of 2 records on average; parallel
    // bundles make 4 bundles of 8, one per position in the burst, leaving in that order.
    let run = multiplex(&Setup::params(""), |run| {
        let mut t = 0;
        for seq in 0..4u8 {
            for n in 1..=8u8 {
                run.at(t, &[flow_ack(n, 1, seq)]);
                t += 2;
            }
        }
        run.until(100_000);
    });
    let out = bundles(&run, 1500);
    check_order_and_uniqueness(&out);
    let shape: Vec<(u64, Vec<u8>)> = out
        .iter()
        .map(|b| (b.at, b.records.iter().map(|r| ack_id(r).2).collect()))
        .collect();
    // Bundle k holds every sender's k-th ACK and leaves MaxLocalDelay after it opened.
    let want: Vec<(u64, Vec<u8>)> = (0..4u8)
        .map(|k| (u64::from(k) * 16 + 2_000, vec![k; 8]))
        .collect();
    assert_eq!(shape, want);
    let c = run.stats().counters;
    assert_eq!((c.merged, c.out, c.built_from), (32, 4, 32));
}

#[test]
fn a_later_bundle_due_first_takes_the_earlier_ones_along() {
    // Bundle 1 opens with a loose budget; sender 1's second ACK opens bundle 2 with a tight
    // one (little MaxTotalDelay left). Bundle 2 is due first; bundle 1 must leave before it.
    let run = multiplex(&Setup::params("key=host"), |run| {
        run.at(0, &[sent(1, (50_000, 0, 5_000)), sent(2, (50_000, 0, 5_000))]);
        run.at(100, &[sent(1, (10_000, 9_700, 5_000))]); // 300 µs left: due at 400
        run.until(100_000);
    });
    let out = bundles(&run, 1500);
    let shape: Vec<(u64, Vec<Ipv4Addr>)> = out.iter().map(|b| (b.at, b.sources())).collect();
    assert_eq!(shape, [(400, vec![host(1), host(2)]), (400, vec![host(1)])]);
    assert_eq!(out[1].header.delayed_so_far, 10_000, "left exactly at its budget");
}

#[test]
fn flow_keys_let_two_connections_of_a_host_share_a_bundle_and_host_keys_do_not() {
    let scenario = |run: &mut Run| {
        run.at(0, &[flow_ack(1, 1, 0), flow_ack(1, 2, 0), flow_ack(1, 1, 1)]);
        run.until(100_000);
    };
    let flows = bundles(&multiplex(&Setup::params("key=flow"), scenario), 1500);
    let ids = |out: &[Bundle]| -> Vec<Vec<(u16, u8)>> {
        out.iter()
            .map(|b| b.records.iter().map(|r| (ack_id(r).1, ack_id(r).2)).collect())
            .collect()
    };
    assert_eq!(ids(&flows), [vec![(40_001, 0), (40_002, 0)], vec![(40_001, 1)]]);
    let hosts = bundles(&multiplex(&Setup::params("key=host"), scenario), 1500);
    assert_eq!(
        ids(&hosts),
        [vec![(40_001, 0)], vec![(40_002, 0)], vec![(40_001, 1)]]
    );
}

#[test]
fn at_most_max_bundles_are_open_and_the_oldest_leaves_for_a_new_one() {
    // One sender, one connection: every ACK needs a bundle of its own. With max_bundles=3 the
    // fourth ACK sends the first bundle at once.
    let run = multiplex(&Setup::params("max_bundles=3"), |run| {
        for seq in 0..5u8 {
            run.at(u64::from(seq) * 10, &[flow_ack(1, 1, seq)]);
        }
        run.until(100_000);
    });
    let out = bundles(&run, 1500);
    check_order_and_uniqueness(&out);
    let shape: Vec<(u64, u8)> = out.iter().map(|b| (b.at, ack_id(&b.records[0]).2)).collect();
    assert_eq!(shape, [(30, 0), (40, 1), (2_020, 2), (2_030, 3), (2_040, 4)]);
}

#[test]
fn random_bursts_never_break_a_flows_order_nor_put_it_twice_in_a_bundle() {
    // A deterministic pseudo-random trace: 12 senders x 2 connections, bursts of 1-6 ACKs,
    // mixed delays, small MTU so bundles fill, a few bundles only.
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut rnd = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut arrivals: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut seqs = std::collections::HashMap::new();
    let mut t = 0;
    for _ in 0..300 {
        let (n, conn) = (1 + rnd(12) as u8, 1 + rnd(2) as u16);
        for _ in 0..1 + rnd(6) {
            let seq: &mut u8 = seqs.entry((n, conn)).or_insert(0);
            arrivals.push((t, flow_ack(n, conn, *seq)));
            *seq += 1;
            t += rnd(40);
        }
    }
    let run = multiplex(&Setup::params("max_bundles=4").mtu(400), |run| {
        for (at, d) in &arrivals {
            run.at(*at, std::slice::from_ref(d));
        }
        run.until(t + 100_000);
    });
    let out = bundles(&run, 400);
    check_order_and_uniqueness(&out);
    let records: usize = out.iter().map(|b| b.records.len()).sum();
    assert_eq!(records, arrivals.len(), "every ACK left exactly once");
    assert!(out.windows(2).all(|w| w[0].at <= w[1].at));
}
