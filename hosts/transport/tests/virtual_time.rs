//! Whole sessions in virtual time over the seeded emulated link (`sim`): each microprotocol's
//! observable behaviour, presets end to end, refusals, and garbage on the wire.
use concast_transport::attr;
use concast_transport::cc;
use concast_transport::segment::{Kind, Segment};
use concast_transport::sim::Pair;
use concast_transport::{Composite, Config, Output, Preset, Session};
use sha2::{Digest, Sha256};

fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn pair(p: Preset, seed: u64) -> Pair {
    let mut c = Config::preset(p);
    c.seed = seed;
    let mut s = Config::preset(p);
    s.seed = seed ^ 0x5555;
    Pair::new(c, s, seed)
}

fn joined(p: &Pair) -> Vec<u8> {
    p.delivered_b.concat()
}

#[test]
fn bulk_lossless_delivers_everything_closes_and_frees_every_segment() {
    let mut p = pair(Preset::Bulk, 1);
    let d = data(1 << 20, 1);
    p.transfer(&d, 16 * 1024, 60_000_000);
    assert_eq!(Sha256::digest(joined(&p)), Sha256::digest(&d));
    assert_eq!(p.delivered_b.len(), 64, "messages keep their boundaries");
    assert!(p.events_a.contains(&Output::Closed("closed".into())), "{:?}", p.events_a);
    p.run_until(p.now + 1_000_000, |p| p.b.as_ref().unwrap().is_closed());
    assert!(p.events_b.contains(&Output::Closed("peer closed".into())), "{:?}", p.events_b);
    assert_eq!(p.a.live_segments(), 0);
    assert_eq!(p.b.as_ref().unwrap().live_segments(), 0);
    assert_eq!(p.a.stats().retransmits, 0);
}

#[test]
fn reliable_fifo_at_ten_percent_loss_delivers_every_byte_in_order() {
    for seed in [3, 4, 5] {
        let mut p = pair(Preset::Bulk, seed);
        p.ab.loss = 0.10;
        p.ba.loss = 0.10;
        let d = data(2 << 20, seed);
        p.transfer(&d, 8 * 1024, 600_000_000);
        assert_eq!(Sha256::digest(joined(&p)), Sha256::digest(&d), "seed {seed}");
        let st = p.a.stats();
        assert!(st.retransmits > 100 && p.ab.dropped > 100, "{st:?}");
        assert!(p.a.is_closed(), "seed {seed}: {:?}", p.events_a);
    }
}

#[test]
fn one_lost_segment_is_resent_by_duplicate_acks_without_a_timeout() {
    let mut p = pair(Preset::Bulk, 7);
    p.ab.drop_nth = vec![20]; // a data segment in the middle of the transfer
    let d = data(200 * 1400, 7);
    p.transfer(&d, 1400, 60_000_000);
    assert_eq!(joined(&p), d);
    let st = p.a.stats();
    assert_eq!((st.retransmits, st.timeouts), (1, 0), "{st:?}");
}

#[test]
fn a_lost_tail_is_resent_after_the_retransmission_timeout() {
    let mut p = pair(Preset::Bulk, 8);
    p.ab.drop_nth = vec![2]; // the last of two data segments (after the Open)
    let d = data(2 * 1400, 8);
    p.transfer(&d, 1400, 60_000_000);
    assert_eq!(joined(&p), d);
    assert!(p.a.stats().timeouts >= 1, "{:?}", p.a.stats());
    assert_eq!(p.a.stats().spurious_timeouts, 0, "a real loss is not undone");
}

/// ACKs held up longer than the RTO (a stalled receiver, a delay spike) fire a timeout though
/// nothing was lost; the first ACK after it echoes the original's timestamp, so the timeout
/// is found spurious and the window it took is given back (Eifel, RFC 3522).
#[test]
fn a_spurious_timeout_is_detected_and_its_window_cut_undone() {
    let mut p = pair(Preset::Bulk, 12);
    p.ab.delay_us = 5_000;
    p.ba.delay_us = 5_000;
    let d = data(4 << 20, 12);
    p.a.send(&d, 0).unwrap();
    assert!(p.run_until(10_000_000, |p| p.a.shared().cwnd > 20.0), "the window opens");
    p.ba.delay_us = 200_000; // every ACK from now on is 195 ms later than the RTO expects
    let t = p.now + 250_000;
    p.run_until(t, |_| false);
    p.ba.delay_us = 5_000;
    p.run_until(60_000_000, |p| p.delivered_b.len() == 1);
    assert_eq!(joined(&p), d);
    let st = p.a.stats();
    assert!(st.timeouts >= 1 && st.spurious_timeouts >= 1, "{st:?}");
    assert_eq!(p.ab.dropped, 0);
}

#[test]
fn rtt_estimate_converges_to_the_path_delay() {
    let mut p = pair(Preset::Bulk, 9);
    p.ab.delay_us = 5_000;
    p.ba.delay_us = 5_000;
    p.transfer(&data(100 * 1400, 9), 1400, 60_000_000);
    let s = p.a.shared();
    assert!((s.srtt_us - 10_000.0).abs() < 2_000.0, "srtt {}", s.srtt_us);
    assert!(s.rto_us >= 10_000, "rto {}", s.rto_us);
}

#[test]
fn windowed_flow_never_exceeds_the_advertised_window() {
    let mut c = Config::preset(Preset::Bulk);
    c.cc = "blaster".into(); // no congestion window: only flow control limits the sender
    let mut s = Config::preset(Preset::Bulk);
    s.recv_wnd_segs = 4;
    let mut p = Pair::new(c, s, 10);
    let d = data(100 * 1400, 10);
    let mut most = 0;
    p.a.send(&d, 0).unwrap();
    p.run_until(10_000_000, |p| {
        most = most.max(p.a.shared().snd_max - p.a.shared().snd_una);
        p.delivered_b.len() == 1
    });
    assert_eq!(joined(&p), d);
    assert!((3..=4).contains(&most), "outstanding {most}");
}

#[test]
fn congestion_window_limits_segments_in_flight() {
    let mut p = pair(Preset::Bulk, 11);
    let d = data(30 * 1400, 11);
    p.a.send(&d, 0).unwrap();
    // before the first ACK, NewReno's initial window of 2 is all that leaves
    let mut before_ack = 0;
    p.run_until(1_000_000, |p| {
        if p.a.shared().snd_una == 0 {
            before_ack = before_ack.max(p.a.shared().snd_max);
        }
        p.delivered_b.len() == 1
    });
    assert_eq!(before_ack, 2);
    assert_eq!(joined(&p), d);
}

#[test]
fn fixed_size_fragments_and_reassembles() {
    let mut c = Config::preset(Preset::Minimal);
    c.mss = 1000;
    let mut p = Pair::new(c.clone(), c, 12);
    let d = data(10_500, 12);
    p.a.send(&d, 0).unwrap();
    p.run_until(1_000_000, |p| !p.delivered_b.is_empty());
    assert_eq!(p.delivered_b, vec![d]);
    assert_eq!(p.a.stats().segs_sent, 11);
}

#[test]
fn every_preset_transfers_losslessly() {
    for preset in Preset::ALL {
        let mut p = pair(preset, 13);
        let d = data(64 * 1000, 13);
        p.transfer(&d, 1000, 10_000_000);
        p.run_until(p.now + 1_000_000, |p| joined(p).len() == d.len());
        assert_eq!(joined(&p), d, "{}", preset.name());
    }
}

#[test]
fn lossy_fifo_delivers_in_order_and_drops_the_lost() {
    let mut p = pair(Preset::LossyFifo, 14);
    p.ab.loss = 0.1;
    let msgs: Vec<Vec<u8>> = (0..500u32).map(|i| i.to_be_bytes().to_vec()).collect();
    for m in &msgs {
        p.a.send(m, 0).unwrap();
    }
    p.run_until(5_000_000, |_| false);
    let got: Vec<u32> =
        p.delivered_b.iter().map(|m| u32::from_be_bytes(m[..4].try_into().unwrap())).collect();
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order");
    assert!(got.len() > 400 && got.len() < 490, "{} delivered", got.len());
}

#[test]
fn fec_rebuilds_a_lost_segment_without_retransmission() {
    let mut p = pair(Preset::Audio, 15);
    p.ab.drop_nth = vec![3]; // Open, then data 0, 1, [2 lost], 3, parity
    let msgs: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 160]).collect();
    for m in &msgs {
        p.a.send(m, 0).unwrap();
    }
    p.run_until(5_000_000, |p| p.delivered_b.len() == 8);
    assert_eq!(p.delivered_b, msgs);
    let b = p.b.as_ref().unwrap().stats();
    assert_eq!(b.fec_recovered, 1);
    assert_eq!(p.a.stats().retransmits, 0);
}

#[test]
fn fec_at_random_loss_delivers_more_than_lossy_fifo_alone() {
    let run = |preset| {
        let mut p = pair(preset, 16);
        p.ab.loss = 0.05;
        for i in 0..2000u32 {
            p.a.send(&i.to_be_bytes(), 0).unwrap();
        }
        p.run_until(10_000_000, |_| false);
        (p.delivered_b.len(), p.b.as_ref().map_or(0, |b| b.stats().fec_recovered))
    };
    let (plain, _) = run(Preset::Video);
    let (fec, rebuilt) = run(Preset::Audio);
    assert!(rebuilt > 20, "rebuilt {rebuilt}");
    assert!(fec > plain + 50, "with FEC {fec}, without {plain}");
}

#[test]
fn virtual_circuit_retries_a_lost_open_and_picks_random_isns() {
    let mut p = pair(Preset::Bulk, 17);
    p.ab.drop_nth = vec![0];
    let d = data(5000, 17);
    p.transfer(&d, 5000, 10_000_000);
    assert_eq!(joined(&p), d);
    let (a, b) = (p.a.shared(), p.b.as_ref().unwrap().shared());
    assert_eq!((a.isn_peer, b.isn_peer), (b.isn_local, a.isn_local));
    assert_ne!(a.isn_local, pair(Preset::Bulk, 18).a.shared().isn_local);
}

#[test]
fn keep_alive_declares_a_silent_peer_dead() {
    let mut p = pair(Preset::Bulk, 19);
    p.a.send(b"hi", 0).unwrap();
    p.run_until(1_000_000, |p| p.delivered_b.len() == 1);
    let sent = p.a.stats().segs_sent;
    p.run_until(5_000_000, |_| false); // idle but alive: keep-alives flow
    assert!(p.a.stats().segs_sent >= sent + 3);
    assert!(!p.a.is_closed());
    p.ab.loss = 1.0;
    p.ba.loss = 1.0;
    p.run_until(30_000_000, |p| p.a.is_closed());
    assert!(
        matches!(p.events_a.last(), Some(Output::Closed(w)) if w.starts_with("peer silent")),
        "{:?}",
        p.events_a
    );
}

#[test]
fn every_algorithm_fills_a_bottleneck_and_delivers_everything() {
    for name in cc::NAMES {
        let mut c = Config::preset(Preset::Bulk);
        c.cc = name.into();
        c.cc_rate_bps = 15e6;
        let mut p = Pair::new(c, Config::preset(Preset::Bulk), 20);
        for l in [&mut p.ab, &mut p.ba] {
            l.rate_bps = Some(20e6);
            l.delay_us = 5_000;
            l.queue_pkts = 50;
        }
        let d = data(4 << 20, 20);
        p.transfer(&d, 64 * 1024, 120_000_000);
        assert_eq!(Sha256::digest(joined(&p)), Sha256::digest(&d), "{name}");
        let goodput = d.len() as f64 * 8.0 / (p.now as f64 / 1e6);
        assert!(goodput > 0.3 * 20e6, "{name}: {:.1} Mbit/s", goodput / 1e6);
    }
}

#[test]
fn a_composite_this_end_does_not_serve_is_refused_with_the_reason() {
    let mut p = pair(Preset::LossyFifo, 21);
    p.serve = Some(Preset::Bulk.composite());
    p.a.send(b"x", 0).unwrap();
    p.run_until(2_000_000, |p| p.a.is_closed());
    let want = "composite mismatch: peer asked for LossyFIFO, this end serves Bulk";
    assert_eq!(p.events_a.last(), Some(&Output::Refused(want.into())));
    assert!(p.b.is_none());
}

#[test]
fn an_unknown_or_invalid_announced_composite_is_refused() {
    let cfg = Config::preset(Preset::Bulk);
    let open = |bits: u64| {
        let mut s = Segment::new(Kind::Open, 9);
        s.attrs.set(attr::COMPOSITE, bits);
        s.attrs.set(attr::ISN, 1);
        s.encode()
    };
    let (why, reply) = Session::accept(&cfg, None, &open(0b11 | 1 << 29), 0).err().unwrap();
    assert_eq!(why, "unknown microprotocol bit 29");
    let r = Segment::decode(&reply, None).unwrap();
    assert_eq!((r.kind, &r.payload[..]), (Kind::Refuse, why.as_bytes()));
    let lossy_retx = Composite::parse("sequenced-segments+lossy-fifo").unwrap().bits() as u64
        | 1 << 8 | 1 << 6 | 1 << 5;
    let (why, _) = Session::accept(&cfg, None, &open(lossy_retx), 0).err().unwrap();
    assert_eq!(why, "lossy-fifo conflicts with retransmit");
    let (why, reply) = Session::accept(&cfg, None, &Segment::new(Kind::Data, 9).encode(), 0).err().unwrap();
    assert!(why.contains("no composite announced"), "{why}");
    assert!(reply.is_empty(), "a stale datagram gets no reply");
}

mod garbage {
    use super::*;
    use proptest::prelude::*;

    fn open_pair() -> Pair {
        let mut p = pair(Preset::Bulk, 22);
        p.a.send(b"warm", 0).unwrap();
        p.run_until(1_000_000, |p| p.delivered_b.len() == 1);
        p
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn random_datagrams_are_counted_and_dropped(junk in proptest::collection::vec(any::<u8>(), 0..100)) {
            let mut p = open_pair();
            let b = p.b.as_mut().unwrap();
            let before = b.stats();
            b.on_datagram(&junk, p.now);
            let after = b.stats();
            prop_assert!(after.malformed + after.foreign > before.malformed + before.foreign
                || Segment::decode(&junk, Some(Preset::Bulk.composite())).is_ok());
        }

        #[test]
        fn truncated_segments_are_counted_and_dropped(cut in 0usize..40, flip in 0usize..40, bit in 0u8..8) {
            let mut p = open_pair();
            let mut s = Segment::new(Kind::Data, p.b.as_ref().unwrap().shared().conn);
            s.attrs.set(attr::SEQ, 1);
            s.attrs.set(attr::FRAG, 5 << 32 | 1);
            s.attrs.set(attr::TS, 77);
            let mut w = s.encode();
            w.truncate(cut.min(w.len() - 1));
            if flip < w.len() { w[flip] ^= 1 << bit; }
            let b = p.b.as_mut().unwrap();
            b.on_datagram(&w, p.now);
            let st = b.stats();
            prop_assert!(st.malformed + st.foreign >= 1 || Segment::decode(&w, None).is_ok());
            // and the session still works afterwards
            p.a.send(b"after", p.now).unwrap();
            p.run_until(p.now + 2_000_000, |p| p.delivered_b.iter().any(|m| m == b"after"));
            prop_assert!(p.delivered_b.iter().any(|m| m == b"after"));
        }
    }
}

/// A steady 128 kbit/s stream (160-byte messages every 10 ms) over a lossless 413 ms RTT path
/// with no jitter, as the CTP paper's wide-area audio test (§V-C-1) and `concast exp ctp
/// --tables fig5` run it: RTTVAR decays to almost nothing, and the RTO must still stay above
/// the RTT by the receiver's ACK delay, or delayed ACKs fire spurious timeouts that collapse
/// the window (RFC 6298 §2.3's max(G, 4 RTTVAR) term).
#[test]
fn a_steady_stream_on_a_long_jitter_free_path_has_no_spurious_timeouts() {
    let mut p = pair(Preset::Bulk, 11);
    p.ab.delay_us = 206_500;
    p.ba.delay_us = 206_500;
    let msg = vec![0x42u8; 160];
    assert!(p.run_until(2_000_000, |p| p.a.shared().established));
    for i in 0..1000u64 {
        let due = 2_000_000 + i * 10_000;
        p.run_until(due, |p| p.now >= due);
        p.now = p.now.max(due); // nothing was due before: the clock still moves on
        let now = p.now;
        p.a.send(&msg, now).expect("the window takes a 128 kbit/s stream");
    }
    p.run_until(p.now + 3_000_000, |p| p.delivered_b.len() == 1000);
    let st = p.a.stats();
    assert_eq!(p.delivered_b.len(), 1000, "{st:?} {:?}", p.a.shared());
    assert_eq!((st.timeouts, st.retransmits), (0, 0), "{st:?}, rto {}", p.a.shared().rto_us);
    assert!(p.a.shared().rto_us as f64 >= p.a.shared().srtt_us + 10_000.0, "rto {}", p.a.shared().rto_us);
}
