//! The bundled `nak-suppress` spec in the engine, as Wasm and natively: one NAK per
//! sequence number and window reaches R.

mod bundled;

use bundled::*;
use concast_engine::sdk::wire::ipv4::Packet;
use concast_engine::OutputKind;
use concast_spec_nak_suppress::{nak, NakSuppress};
use concast_speckit::test_host::make::{self, host};

fn nak_from(receiver: u8, seq: u32) -> Vec<u8> {
    let mut body = [0u8; nak::MAX_BODY];
    let n = nak::encode(seq, &[receiver], &mut body);
    make::concast(
        host(receiver),
        17,
        60,
        &make::udp(9000 + u16::from(receiver), 9999, &body[..n]),
    )
}

/// (time, seq, first byte after the NAK header) of each forwarded NAK, headers checked.
fn forwarded_naks(run: &Run) -> Vec<(u64, u32, u8)> {
    run.of_kind(OutputKind::Merged)
        .into_iter()
        .map(|(at, d)| {
            check_merged_header(&d, 1500);
            let ip = Packet::new_checked(&d[..]).unwrap();
            assert_eq!((ip.protocol(), ip.ttl()), (17, 60));
            let udp = ip.payload();
            assert_eq!(
                &udp[6..8],
                [0, 0],
                "checksum 0: the source is now this node"
            );
            assert_eq!(usize::from(u16::from_be_bytes([udp[4], udp[5]])), udp.len());
            let body = &udp[8..];
            (at, nak::seq(body).expect("a NAK"), body[nak::HEADER_LEN])
        })
        .collect()
}

#[test]
fn one_nak_per_sequence_number_and_window() {
    let run = both::<NakSuppress>("nak-suppress", &Setup::params("window_us=1000"), |run| {
        for r in 1..=5u8 {
            run.at(u64::from(r) * 100, &[nak_from(r, 7)]);
        }
        run.at(150, &[nak_from(2, 8), nak_from(3, 8)]);
        assert_eq!(run.stats().open_states, 2, "a window per sequence number");
        run.until(1_099);
        run.at(1_099, &[nak_from(6, 7)]); // still inside the window of seq 7 (100 .. 1,100)
        run.until(1_500);
        assert_eq!(run.stats().open_states, 0, "windows expired");
        run.at(1_500, &[nak_from(4, 7)]); // the repair was lost too: forwarded again
        run.until(10_000);
    });
    assert_eq!(
        forwarded_naks(&run),
        [(100, 7, 1), (150, 8, 2), (1_500, 7, 4)]
    );
    let c = run.stats().counters;
    assert_eq!(
        (c.received, c.merged, c.dropped, c.out, c.timer_fires),
        (9, 3, 6, 3, 3)
    );
    let logs: Vec<String> = run.logs().into_iter().map(|l| l.text).collect();
    assert_eq!(
        logs,
        [
            "nak-suppress: seq 7: 5 duplicate(s) suppressed", // its window ends at 1,100
            "nak-suppress: seq 8: 1 duplicate(s) suppressed", // and this one at 1,150
        ]
    );
}

#[test]
fn other_datagrams_pass_and_the_default_window_is_100_ms() {
    let other = make::concast(host(1), 17, 64, &make::udp(1, 2, b"data, not a NAK"));
    let run = both::<NakSuppress>("nak-suppress", &Setup::params(""), |run| {
        run.at(0, &[nak_from(1, 1), other.clone()]);
        run.at(99_999, &[nak_from(2, 1)]);
        run.at(100_000, &[nak_from(3, 1)]);
    });
    assert_eq!(forwarded_naks(&run), [(0, 1, 1), (100_000, 1, 3)]);
    let passed = run.of_kind(OutputKind::Unmerged(concast_engine::Unmerged::Passed));
    assert_eq!(passed, [(0, other)]);
}
