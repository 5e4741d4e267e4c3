//! The dissertation's MTP (Noble 1999, ch. V; glossary; mtp.h) through the whole sans-IO client
//! and server in virtual time (`mtp::sim::Net`). Each test is named after the rule and the
//! section it comes from; the rules' arithmetic is pinned in `mtp::noble`'s unit tests.
use concast_transport::mtp::noble::{self, LinkType};
use concast_transport::mtp::server::{pattern, Objects};
use concast_transport::mtp::sim::Net;
use concast_transport::mtp::{Client, ClientConfig, Output, RequestOpts, Server};
use sha2::{Digest, Sha256};

fn net(seed: u64, cfg: ClientConfig) -> Net<Objects> {
    let c = Client::new(ClientConfig { seed, ..cfg }).unwrap();
    Net::new(c, Server::new(Objects::default()), seed)
}

fn done(n: &Net<Objects>) -> Vec<(u32, Vec<u8>)> {
    n.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Done { tx, object, .. } => Some((*tx, object.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn ch5_mechanisms_each_transaction_starts_at_half_the_receive_buffer_or_half_a_second_of_link() {
    let mut n = net(1, ClientConfig { rcvbuf: 64 * 1024, ..Default::default() });
    let a = n.client.request(0, b"size:1000000", RequestOpts::default()).unwrap();
    assert_eq!(n.client.flow(a).unwrap().window, 32 * 1024);
    let mut m = net(1, ClientConfig::default().link(LinkType::Isdn));
    let b = m.client.request(0, b"size:1000000", RequestOpts::default()).unwrap();
    assert_eq!(m.client.flow(b).unwrap().window, 4_000);
}

#[test]
fn ch5_window_adjustment_one_window_per_transaction_grows_on_a_clean_path_and_stops_at_the_cap() {
    // 10 ms RTT, no loss: multiplier 1; min RTT < 40 ms so the window stops at the buffer
    let mut n = net(2, ClientConfig { rcvbuf: 64 * 1024, ..Default::default() });
    for l in [&mut n.up, &mut n.down] {
        l.delay_us = 5_000;
    }
    let a = n.client.request(0, b"size:3000000", RequestOpts::default()).unwrap();
    let b = n.client.request(0, b"size:3000000", RequestOpts::default()).unwrap();
    n.run_until(60_000_000, |n| n.client.stats().replies >= 300);
    for id in [a, b] {
        let f = n.client.flow(id).unwrap();
        assert!(f.grows > 0 && f.window <= 64 * 1024 && f.window > 32 * 1024, "{f:?}");
        assert_eq!(f.multiplier(), noble::MULT_NO_LOSS);
    }
    assert!(n.run_until(120_000_000, |n| n.client.active() == 0));
    assert_eq!(done(&n).len(), 2);
}

#[test]
fn ch5_loss_response_random_loss_costs_a_datagram_of_window_per_moratorium() {
    let mut n = net(3, ClientConfig::default());
    for l in [&mut n.up, &mut n.down] {
        l.delay_us = 1_000;
    }
    n.down.loss = 0.03;
    let a = n.client.request(0, b"size:50000000", RequestOpts::default()).unwrap();
    n.run_until(120_000_000, |n| n.client.stats().timeouts >= 40);
    let st = n.client.stats();
    let f = n.client.flow(a).unwrap().clone();
    // at most one cut per loss, fewer while the moratorium holds; never below one datagram
    assert!(st.window_cuts >= 1 && st.window_cuts <= st.timeouts, "{st:?}");
    assert!(f.window >= f.size && f.multiplier() >= noble::MULT_AFTER_LOSS, "{f:?}");
}

#[test]
fn ch5_datagram_size_halves_on_a_path_that_drops_big_datagrams_down_to_512() {
    // payloads above 576 bytes are dropped: every 1024-byte reply is lost, the window falls a
    // datagram per moratorium until fewer than 4 fit, and the size halves to 512, which passes
    let mut n = net(4, ClientConfig { rcvbuf: 16 * 1024, ..Default::default() });
    n.mtu = Some(600);
    let a = n.client.request(0, b"size:100000", RequestOpts::default()).unwrap();
    n.run_until(600_000_000, |n| n.client.flow(a).is_none_or(|f| f.size == 512));
    assert!(n.run_until(600_000_000, |n| n.client.active() == 0), "{:?}", n.client.stats());
    assert_eq!(Sha256::digest(&done(&n)[0].1), Sha256::digest(pattern(0, 100_000)));
}

#[test]
fn ch5_receive_buffer_watch_cuts_the_fastest_and_resets_every_flowtimeout() {
    let mut n = net(5, ClientConfig { rcvbuf: 64 * 1024, ..Default::default() });
    let a = n.client.request(0, b"size:3000000", RequestOpts::default()).unwrap();
    n.run_until(60_000_000, |n| n.client.stats().replies >= 100);
    let b = n.client.request(n.now, b"size:3000000", RequestOpts::default()).unwrap();
    n.run_until(60_000_000, |n| n.client.stats().replies >= 110);
    let (wa, wb) = (n.client.flow(a).unwrap().window, n.client.flow(b).unwrap().window);
    assert!(wa > wb, "{wa} {wb}");
    assert!(!n.client.rcvbuf_queued(n.now, 32 * 1024), "half full is not past half");
    assert!(n.client.rcvbuf_queued(n.now, 40 * 1024));
    let (fa, fb) = (n.client.flow(a).unwrap(), n.client.flow(b).unwrap());
    assert_eq!((fa.window, fb.window), (wa - fa.size, wb));
    assert_eq!((fa.flowtimeout, fb.flowtimeout), (0, 0));
    assert_eq!(n.client.stats().overflow_cuts, 1);
}

#[test]
fn ch5_mechanisms_the_servers_response_limit_bounds_later_subrequests() {
    let mut n = net(6, ClientConfig::default());
    n.server.limit = Some(600);
    n.client.request(0, b"size:50000", RequestOpts::default()).unwrap();
    assert!(n.run_until(60_000_000, |n| n.client.active() == 0));
    assert_eq!(Sha256::digest(&done(&n)[0].1), Sha256::digest(pattern(0, 50_000)));
    let st = n.client.stats();
    // only the first request (a window's worth) asked for more than the limit: the reply
    // announced it (ch. V "Mechanisms"), the rest went back to the subrequest list, and every
    // later subrequest kept to it
    assert!(st.server_limited == 1 && st.repeats == 0, "{st:?}");
    assert!(st.requests >= 50_000 / 600, "{st:?}");
}

#[test]
fn ch5_mechanisms_update_callbacks_report_the_growing_prefix() {
    let mut n = net(7, ClientConfig::default());
    let a = n.client.request(0, b"size:100000", RequestOpts { update: Some(20_000), ..Default::default() }).unwrap();
    assert!(n.run_until(60_000_000, |n| n.client.active() == 0));
    let seen: Vec<u32> = n
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Progress { tx, received } if *tx == a => Some(*received),
            _ => None,
        })
        .collect();
    assert!(seen.len() >= 4 && seen.len() <= 5, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[1] >= w[0] + 20_000), "{seen:?}");
}

#[test]
fn glossary_single_datagram_transaction_takes_the_first_response_whole() {
    let mut n = net(8, ClientConfig::default());
    n.down.drop_nth = vec![0];
    let a = n.client.request(0, b"size:100", RequestOpts { single: true, ..Default::default() }).unwrap();
    assert!(n.run_until(10_000_000, |n| n.client.active() == 0));
    assert_eq!(done(&n), vec![(a, pattern(0, 100))]);
    let st = n.client.stats();
    assert_eq!((st.requests, st.repeats, st.replies), (2, 1, 1), "{st:?}");
}

#[test]
fn ch5_data_loss_expiry_counts_from_the_last_response() {
    // a slow transfer that lasts 4 s with a 2 s expire timer completes: replies keep it alive
    let mut n = net(9, ClientConfig { expire_us: 2_000_000, ..Default::default() });
    n.down.rate_bps = Some(1e6);
    n.down.queue_pkts = 1_000;
    n.client.request(0, b"size:500000", RequestOpts::default()).unwrap();
    assert!(n.run_until(60_000_000, |n| n.client.active() == 0));
    assert!(n.now > 3_000_000, "{}", n.now);
    assert_eq!(done(&n).len(), 1, "{:?} {:?}", n.client.stats(), n.outputs.iter().filter(|o| !matches!(o, Output::Done { .. })).collect::<Vec<_>>());
}

#[test]
fn ch5_mean_window_reported_is_the_transactions_own_not_the_unused_shared_one() {
    // the dissertation's rules keep a window per transaction (ch. V): mtping's mean window is
    // that one, in datagrams; the shared window (4 at start, never moved here) must not show
    let mut n = net(5, ClientConfig { rcvbuf: 64 * 1024, ..Default::default() });
    for l in [&mut n.up, &mut n.down] {
        l.delay_us = 5_000;
    }
    let a = n.client.request(0, b"size:200000", RequestOpts::default()).unwrap();
    let start = n.client.flow(a).unwrap().window / n.client.flow(a).unwrap().size;
    assert!(n.run_until(60_000_000, |n| n.client.active() == 0));
    let (mean_window, mean_in_flight) = n.client.occupancy();
    // it starts at 32 datagrams and halves in datagrams when the payload doubles (ch. V)
    assert!(mean_window >= start as f64 / 2.0 && mean_window <= start as f64, "mean window {mean_window}, started at {start}");
    assert!(mean_in_flight <= mean_window + 1.0, "{mean_in_flight} in flight, window {mean_window}");
}

#[test]
fn ch5_transaction_identifiers_start_at_random_and_count_up_per_request() {
    let ids = |seed: u64| {
        let mut n = net(seed, ClientConfig::default());
        (0..4).map(|_| n.client.request(0, b"size:1000", RequestOpts::default()).unwrap()).collect::<Vec<u32>>()
    };
    let (a, b) = (ids(11), ids(12));
    for w in a.windows(2).chain(b.windows(2)) {
        assert_eq!(w[1], w[0].wrapping_add(1), "one more per request: {a:?} {b:?}");
    }
    assert_ne!(a[0], b[0], "the start is the client's own random value");
}

#[test]
fn ch5_mechanisms_one_request_fetches_up_to_a_window_of_datagrams() {
    // the initial window (half of 212992 bytes) holds the whole 50000-byte object: one
    // request with that response limit, 49 datagrams of 1024 bytes back, nothing asked twice
    let mut n = net(21, ClientConfig::default());
    let tx = n.client.request(0, b"size:50000", RequestOpts::default()).unwrap();
    assert_eq!(n.client.transit(tx), Some(106_496));
    assert!(n.run_until(60_000_000, |n| n.client.active() == 0));
    assert_eq!(Sha256::digest(&done(&n)[0].1), Sha256::digest(pattern(0, 50_000)));
    let st = n.client.stats();
    assert_eq!((st.requests, st.replies, st.repeats), (1, 50_000u64.div_ceil(1024), 0), "{st:?}");
    // a larger object: once the size is known, each reply (one datagram) frees room for one
    // subrequest, so the steady state is one request per reply, as before
    let mut m = net(22, ClientConfig::default());
    m.client.request(0, b"size:1000000", RequestOpts::default()).unwrap();
    assert!(m.run_until(60_000_000, |m| m.client.active() == 0));
    let st = m.client.stats();
    assert!(st.requests + 103 <= st.replies && st.repeats == 0, "{st:?}");
}

#[test]
fn ch5_data_loss_and_recovery_a_lost_datagram_of_a_large_request_is_asked_for_alone() {
    // the sixth of the 49 datagrams is lost: when the request's repeat interval passes with
    // nothing more of it arriving, its 1024 bytes (only those) leave transit, count as lost
    // for the window (one datagram less, ch. V "Window Adjustment") and are asked for again
    let mut n = net(23, ClientConfig::default());
    n.down.drop_nth = vec![5];
    let tx = n.client.request(0, b"size:50000", RequestOpts::default()).unwrap();
    let w0 = n.client.flow(tx).unwrap().window;
    assert!(n.run_until(60_000_000, |n| n.client.stats().timeouts == 1));
    // (one datagram of the flow's size now: above 16 per window it doubled, capped at 1400)
    let f = n.client.flow(tx).unwrap();
    assert_eq!((f.window, f.size), (w0 - 1400, 1400));
    assert_eq!(n.client.transit(tx), Some(1024), "the repeat, in flight");
    assert!(n.run_until(60_000_000, |n| n.client.active() == 0));
    assert_eq!(Sha256::digest(&done(&n)[0].1), Sha256::digest(pattern(0, 50_000)));
    let st = n.client.stats();
    assert_eq!((st.requests, st.repeats, st.timeouts, st.window_cuts), (2, 1, 1, 1), "{st:?}");
    assert!(n.now >= noble::REPEAT_FLOOR_US);
}

#[test]
fn ch5_payload_suppression_subrequests_go_without_the_name_once_the_server_offers_a_channel() {
    // the server names "size:300000" by channel 9 (ch. V "Payload Suppression"): after the
    // first reply every subrequest is the bare header, on the server's channel ("Channel
    // Identifiers"); the object arrives whole
    let mut objects = Objects::default();
    objects.channels.insert(9, b"size:300000".to_vec());
    let c = Client::new(ClientConfig { seed: 31, ..Default::default() }).unwrap();
    let mut n = Net::new(c, Server::new(objects), 31);
    n.client.request(0, b"size:300000", RequestOpts::default()).unwrap();
    assert!(n.run_until(60_000_000, |n| n.client.active() == 0));
    assert_eq!(Sha256::digest(&done(&n)[0].1), Sha256::digest(pattern(0, 300_000)));
    let (st, sv) = (n.client.stats(), n.server.stats.clone());
    assert!(st.requests > 1 && sv.by_channel == st.requests - 1 && sv.channel_errors == 0, "{st:?} {sv:?}");
    // every reply carried the object's channel
    assert!(n.replies_sent.iter().all(|r| r[3] == 9));
}

#[test]
fn ch5_payload_suppression_a_channel_error_makes_the_client_send_the_name_again() {
    // the server forgets its channels mid-transfer (a busy server's cache, ch. V): name-less
    // subrequests get the channel error, and the client asks again with the name
    let mut objects = Objects::default();
    objects.channels.insert(9, b"size:300000".to_vec());
    let c = Client::new(ClientConfig { seed: 32, ..Default::default() }).unwrap();
    let mut n = Net::new(c, Server::new(objects), 32);
    n.client.request(0, b"size:300000", RequestOpts::default()).unwrap();
    assert!(n.run_until(60_000_000, |n| n.server.stats.by_channel >= 20));
    n.server.responder.channels.clear();
    assert!(n.run_until(60_000_000, |n| n.client.active() == 0));
    assert_eq!(Sha256::digest(&done(&n)[0].1), Sha256::digest(pattern(0, 300_000)));
    let st = n.client.stats();
    assert!(st.channel_errors >= 1 && st.channel_errors == n.server.stats.channel_errors, "{st:?}");
    assert_eq!((st.repeats, st.timeouts), (0, 0), "a channel error is no loss: {st:?}");
}

#[test]
fn ch5_channel_identifiers_the_servers_channel_is_handed_back_to_the_application() {
    // ch. V "Channel Identifiers": a channel the server assigns is passed back to the client
    // application for reuse; a server that assigns none leaves the request's own channel
    let channel_of_done = |n: &Net<Objects>| {
        n.outputs.iter().find_map(|o| match o {
            Output::Done { channel, object, .. } => Some((*channel, object.len())),
            _ => None,
        })
    };
    let mut objects = Objects::default();
    objects.channels.insert(9, b"size:300000".to_vec());
    let c = Client::new(ClientConfig { seed: 33, ..Default::default() }).unwrap();
    let mut n = Net::new(c, Server::new(objects), 33);
    n.client.request(0, b"size:300000", RequestOpts { channel: 4, ..Default::default() }).unwrap();
    assert!(n.run_until(60_000_000, |n| n.client.active() == 0));
    assert_eq!(channel_of_done(&n), Some((9, 300_000)));
    // an object the server names by no channel: the request's channel comes back
    n.client.request(n.now, b"size:5000", RequestOpts { channel: 4, ..Default::default() }).unwrap();
    n.outputs.clear();
    assert!(n.run_until(120_000_000, |n| n.client.active() == 0));
    assert_eq!(channel_of_done(&n), Some((4, 5000)));
    // a single-datagram transaction too
    n.client.request(n.now, b"size:300000", RequestOpts { single: true, ..Default::default() }).unwrap();
    n.outputs.clear();
    assert!(n.run_until(180_000_000, |n| n.client.active() == 0));
    assert_eq!(channel_of_done(&n).map(|c| c.0), Some(9));
}

#[test]
fn ch5_data_loss_and_recovery_the_repeat_interval_counts_from_the_send_as_the_replies_adjust_it() {
    // ch. V "Data Loss and Recovery": data is declared lost when it fails to arrive within the
    // repeat interval; the application's initial value (1 s here) holds until responses come,
    // then the interval is 2-4x the mean RTT with the 500 ms floor (ch. VI: the initial value
    // governs the initial request while no response has come). The first request asks for the
    // whole initial window at t = 0; ten of its 104 replies are dropped: their bytes are lost at
    // 500 ms after the send, neither at the initial 1 s nor 500 ms after the request's last reply
    let mut n = net(41, ClientConfig { trace: true, ..Default::default() });
    for l in [&mut n.up, &mut n.down] {
        l.delay_us = 55_000;
    }
    n.down.drop_nth = (50..60).collect();
    let tx = n.client.request(0, b"size:200000", RequestOpts::default()).unwrap();
    assert!(n.run_until(60_000_000, |n| n.client.stats().timeouts >= 1));
    let lost: Vec<_> = n.client.take_trace().into_iter().filter(|e| e.kind == "lost").collect();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!((lost[0].at_us, lost[0].offset, lost[0].bytes), (noble::REPEAT_FLOOR_US, 0, 10 * 1024), "{lost:?}");
    assert_eq!(n.client.flow(tx).unwrap().repeat_us, noble::REPEAT_FLOOR_US);
    assert!(n.run_until(60_000_000, |n| n.client.active() == 0));
    assert_eq!(Sha256::digest(&done(&n)[0].1), Sha256::digest(pattern(0, 200_000)));
}
