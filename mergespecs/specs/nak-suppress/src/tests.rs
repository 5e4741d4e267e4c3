//! Native unit tests of the NAK format and the window logic (the engine's tests run the
//! spec end to end, native and Wasm).

use concast_sdk::{AfterBuild, Merge, MergeSpec, Tag};
use concast_speckit::test_host::make::{self, host};
use concast_speckit::test_host::TestHost;
use std::vec::Vec;

use crate::{nak, Config, NakSuppress};

fn nak_datagram(from: u8, seq: u32, extra: &[u8]) -> Vec<u8> {
    let mut body = [0u8; nak::MAX_BODY];
    let n = nak::encode(seq, extra, &mut body);
    make::concast(
        host(from),
        17,
        50 + from,
        &make::udp(7000, 7001, &body[..n]),
    )
}

#[test]
fn the_payload_format() {
    let mut body = [0u8; 16];
    let n = nak::encode(0x0102_0304, b"ab", &mut body);
    assert_eq!(&body[..n], b"NK\x01\x00\x01\x02\x03\x04ab");
    assert_eq!(nak::seq(&body[..n]), Some(0x0102_0304));
    assert_eq!(nak::seq(&body[..7]), None, "short");
    assert_eq!(nak::seq(b"NK\x02\x00\x00\x00\x00\x01"), None, "version 2");
    assert_eq!(nak::seq(b"NX\x01\x00\x00\x00\x00\x01"), None, "magic");
    assert_eq!(
        nak::seq(&[
            b'N', b'K', 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0
        ]),
        None,
        "longer than 56"
    );
}

#[test]
fn first_nak_goes_at_once_duplicates_are_dropped_until_the_window_ends() {
    let mut h = TestHost::new("window_us=5000");
    let mut s = NakSuppress::init(&mut h).unwrap();
    let first = nak_datagram(1, 42, b"sess");
    assert_eq!(s.get_tag(&first, &mut h), Tag::Merge(42));
    let mut w = s.new_state(42, &mut h);
    h.now = 1_000;
    assert_eq!(s.merge(&mut w, &first, &mut h), Merge::Merged);
    assert!(s.done(&mut w, &mut h));
    assert_eq!(s.build(&mut w, &mut h), AfterBuild::Keep);
    assert_eq!(h.timer, Some(6_000));
    let (payload, out) = &h.emitted[0];
    assert_eq!(
        payload[..],
        make::udp(7000, 7001, b"NK\x01\x00\x00\x00\x00\x2asess")[..]
    );
    assert_eq!((out.protocol, out.ttl), (17, 51));
    for from in 2..5 {
        assert_eq!(
            s.merge(&mut w, &nak_datagram(from, 42, b""), &mut h),
            Merge::Drop
        );
        assert!(!s.done(&mut w, &mut h));
    }
    h.now = 6_000;
    assert!(s.timeout(&mut w, &mut h));
    assert_eq!(s.build(&mut w, &mut h), AfterBuild::Free);
    assert_eq!(h.emitted.len(), 1, "the window's end forwards nothing");
    assert!(
        h.logs[0].1.contains("seq 42: 3 duplicate(s) suppressed"),
        "{:?}",
        h.logs
    );
}

#[test]
fn other_datagrams_pass_and_parameters_are_checked() {
    let mut h = TestHost::new("");
    let mut s = NakSuppress::init(&mut h).unwrap();
    assert_eq!(s.config(), Config { window_us: 100_000 });
    let not_nak = make::concast(host(1), 17, 64, &make::udp(1, 2, b"hello, world"));
    let tcp = make::concast(host(1), 6, 64, &[0; 20]);
    assert_eq!(s.get_tag(&not_nak, &mut h), Tag::Pass);
    assert_eq!(s.get_tag(&tcp, &mut h), Tag::Pass);
    assert!(NakSuppress::init(&mut TestHost::new("window_us=soon")).is_err());
}
