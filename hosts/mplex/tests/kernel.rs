//! The module against the real kernel: two network namespaces joined by a veth pair, a
//! sender `Mplex` capturing in one, a receiver `Mplex` unbundling in the other, and a real
//! TCP transfer between them (no router: the MplexPkts cross the veth one record each).
//! Needs root; skips (passing, with a note) otherwise.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use common::{ack_sender, enter, receiver, run_loop, serve_once, wait_ready, Pair, B};

/// TCP segments sent so far by this thread's network namespace (`Tcp: OutSegs`).
fn tcp_out_segs() -> u64 {
    let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next().unwrap(), tcp.next().unwrap());
    let i = names
        .split_whitespace()
        .position(|n| n == "OutSegs")
        .unwrap();
    values.split_whitespace().nth(i).unwrap().parse().unwrap()
}

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn acks_cross_as_mplex_packets_and_reach_tcp() {
    if !common::can_run() {
        return;
    }
    let pair = Pair::new("k");
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();

    // Receiver B: unbundles into its TUN device, and serves the data.
    let (b, s, r) = (pair.b.clone(), stop.clone(), ready_tx.clone());
    let receiver = thread::spawn(move || {
        enter(&b);
        let m = receiver();
        r.send(()).unwrap();
        run_loop(m, s)
    });
    let server = serve_once(pair.b.clone(), 8000, data(2_000_000), ready_tx.clone());
    // Sender A: captures its ACKs toward B.
    let (a, s) = (pair.a.clone(), stop.clone());
    let sender = thread::spawn(move || {
        enter(&a);
        let m = ack_sender();
        ready_tx.send(()).unwrap();
        run_loop(m, s)
    });
    wait_ready(&ready_rx, 3);

    enter(&pair.a);
    let segs_before = tcp_out_segs();
    let mut c = TcpStream::connect((B, 8000)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    let result = c.read_to_end(&mut got);
    drop(c); // a failed read must not leave the server blocked on a full window
    let served = server.join();
    // Let the last ACKs (FIN's included) settle before reading counters.
    thread::sleep(Duration::from_millis(200));
    // A sends no data: its segments are pure ACKs but SYN and FIN (3 uncaptured seen).
    let acks_sent = tcp_out_segs() - segs_before;
    stop.store(true, Ordering::Relaxed);
    let mut snd = sender.join().unwrap();
    let mut rcv = receiver.join().unwrap();
    result.unwrap();
    assert!(served.is_ok(), "the server sent everything");
    assert!(got == data(2_000_000), "the download arrived intact");

    let s = snd
        .sender(B, concast_mplex::Selection::Acks)
        .unwrap()
        .counters
        .clone();
    let r = rcv.receiver(1).unwrap().clone();
    eprintln!(
        "A sent {acks_sent} segments\nsender {}\nreceiver {}",
        s.to_json(),
        r.to_json()
    );
    // How many ACKs a 2 MB download takes depends on GRO and delayed ACKs (170-400 seen).
    assert!(
        s.sent > 20 && s.captured + 5 >= acks_sent,
        "every ACK of A's {acks_sent} segments was multiplexed: {}",
        s.to_json()
    );
    assert_eq!(s.captured, s.sent + s.passed_untouched() + s.send_errors);
    assert_eq!(
        r.mplex_received, s.sent,
        "every MplexPkt arrived (one veth, nothing lost)"
    );
    assert_eq!(
        (r.records, r.delivered, r.expired_ttl, r.inject_errors),
        (s.sent, s.sent, 0, 0)
    );
    assert_eq!(
        r.bundle_sizes.keys().copied().collect::<Vec<_>>(),
        vec![1],
        "no router: one record each"
    );
    // Shutdown leaves no rule behind.
    assert!(snd.shutdown().is_empty());
    rcv.shutdown();
    let rules = Command::new("ip")
        .args(["netns", "exec", &pair.a, "iptables", "-S", "OUTPUT"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&rules.stdout).contains("concast-mplex"));
}
