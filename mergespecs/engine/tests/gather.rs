//! The bundled `gather` spec in the engine, as Wasm and natively: one datagram per round
//! listing one message per sender.

mod bundled;

use std::net::Ipv4Addr;

use bundled::*;
use concast_engine::sdk::wire::ipv4::{self, Packet};
use concast_engine::OutputKind;
use concast_spec_gather::{payload, Gather};
use concast_speckit::test_host::make::{self, host};

fn message(sender: u8, body: &[u8]) -> Vec<u8> {
    make::concast(host(sender), 17, 50, &make::udp(4000, 4001, body))
}

/// (sender, message) as decoded.
type Entry = (Ipv4Addr, Vec<u8>);

/// Each gathered datagram: (time, entries), headers checked.
fn gathered(run: &Run, mtu: u32) -> Vec<(u64, Vec<Entry>)> {
    run.of_kind(OutputKind::Merged)
        .into_iter()
        .map(|(at, d)| {
            check_merged_header(&d, mtu);
            let ip = Packet::new_checked(&d[..]).unwrap();
            assert_eq!((ip.protocol(), ip.ttl()), (17, 50));
            let udp = ip.payload();
            assert_eq!(
                udp[..4],
                [0x0F, 0xA0, 0x0F, 0xA1],
                "the first message's ports"
            );
            assert_eq!(usize::from(u16::from_be_bytes([udp[4], udp[5]])), udp.len());
            let entries = payload::entries(&udp[8..]).expect("a gathered body");
            (
                at,
                entries
                    .map(|(src, m)| (Ipv4Addr::from(src), m.to_vec()))
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn a_round_of_n_children_becomes_one_datagram() {
    let run = both::<Gather>("gather", &Setup::params("").children(3), |run| {
        run.at(10, &[message(1, b"alpha")]);
        run.at(20, &[message(2, b"")]);
        run.at(30, &[message(3, b"gamma")]);
    });
    let expected = vec![
        (host(1), b"alpha".to_vec()),
        (host(2), vec![]),
        (host(3), b"gamma".to_vec()),
    ];
    assert_eq!(gathered(&run, 1500), [(30, expected)]);
}

#[test]
fn a_timeout_forwards_a_partial_round() {
    let run = both::<Gather>("gather", &Setup::params("n=3 timeout_us=500"), |run| {
        run.at(100, &[message(1, b"a"), message(2, b"b")]);
        assert_eq!(run.engine.next_deadline(), Some(600));
        run.until(10_000);
    });
    assert_eq!(
        gathered(&run, 1500),
        [(
            600,
            vec![(host(1), b"a".to_vec()), (host(2), b"b".to_vec())]
        )]
    );
}

#[test]
fn rounds_end_early_on_a_repeated_sender_or_a_full_mtu() {
    let setup = Setup::params("n=50").mtu(28 + 14 + 3 * (6 + 40));
    let run = both::<Gather>("gather", &setup, |run| {
        run.at(
            0,
            &[
                message(1, &[1; 40]),
                message(2, &[2; 40]),
                message(1, &[1; 40]),
            ],
        );
        run.at(
            5,
            &[
                message(3, &[3; 40]),
                message(4, &[4; 40]),
                message(5, &[5; 40]),
            ],
        );
        run.until(100_000);
    });
    let rounds: Vec<(u64, Vec<Ipv4Addr>)> = gathered(&run, setup.mtu)
        .into_iter()
        .map(|(at, e)| (at, e.into_iter().map(|m| m.0).collect()))
        .collect();
    assert_eq!(
        rounds,
        [
            (0, vec![host(1), host(2)]),          // sender 1 again
            (5, vec![host(1), host(3), host(4)]), // the MTU is full
            (10_005, vec![host(5)]),              // the timeout
        ]
    );
}

#[test]
fn gathering_composes_along_the_tree() {
    let first = both::<Gather>("gather", &Setup::params("n=2"), |run| {
        run.at(0, &[message(1, b"one"), message(2, b"two")]);
    });
    let mut upstream = first.of_kind(OutputKind::Merged)[0].1.clone();
    ipv4::Packet::new_unchecked(&mut upstream[..]).decrement_ttl();
    let second = both::<Gather>("gather", &Setup::params("n=2 ttl=50"), |run| {
        run.at(100, &[upstream.clone(), message(3, b"three")]);
    });
    let entries = vec![
        (host(1), b"one".to_vec()),
        (host(2), b"two".to_vec()),
        (host(3), b"three".to_vec()),
    ];
    assert_eq!(gathered(&second, 1500), [(100, entries)]);
}
