//! Faithful unbundling against the real kernel (protocol.md section 3, record Version 1):
//! what R's TUN device receives carries the TOS byte the sender's kernel wrote, so DSCP and
//! ECN marks survive bundling. Needs root; skips (passing, with a note) otherwise.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use common::{ack_sender, enter, receiver, run_loop, serve_once, wait_ready, Pair, Sniffer, A, B};

/// DSCP EF (46 << 2). TCP sockets keep the ECN bits to themselves, so a TCP test can only
/// choose the DSCP part; the ECN bits are checked with UDP (tests of per-flow capture).
const EF: u8 = 0xB8;

/// A TCP connection to `to` whose every segment (handshake included) carries TOS `tos`.
fn connect_with_tos(to: std::net::SocketAddrV4, tos: u8) -> TcpStream {
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let v = i32::from(tos);
        let r = libc::setsockopt(
            fd,
            libc::IPPROTO_IP,
            libc::IP_TOS,
            (&v as *const i32).cast(),
            4,
        );
        assert_eq!(r, 0, "IP_TOS");
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as u16;
        sa.sin_port = to.port().to_be();
        sa.sin_addr.s_addr = u32::from(*to.ip()).to_be();
        let r = libc::connect(fd, (&sa as *const libc::sockaddr_in).cast(), 16);
        assert_eq!(r, 0, "connect");
        TcpStream::from_raw_fd(fd)
    }
}

#[test]
fn acks_reach_the_receiver_with_their_tos_byte() {
    if !common::can_run() {
        return;
    }
    let pair = Pair::new("f");
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();

    let (b, s, r) = (pair.b.clone(), stop.clone(), ready_tx.clone());
    let receiver = thread::spawn(move || {
        enter(&b);
        let m = receiver();
        let sniffer = Sniffer::open("mplextun");
        r.send(()).unwrap();
        (run_loop(m, s), sniffer.drain())
    });
    let server = serve_once(pair.b.clone(), 8001, vec![7u8; 300_000], ready_tx.clone());
    let (a, s) = (pair.a.clone(), stop.clone());
    let sender = thread::spawn(move || {
        enter(&a);
        let m = ack_sender();
        ready_tx.send(()).unwrap();
        run_loop(m, s)
    });
    wait_ready(&ready_rx, 3);

    enter(&pair.a);
    let mut c = connect_with_tos(std::net::SocketAddrV4::new(B, 8001), EF);
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    let result = c.read_to_end(&mut got);
    drop(c);
    let _ = server.join();
    thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let snd = sender.join().unwrap();
    let (rcv, injected) = receiver.join().unwrap();
    result.unwrap();
    assert_eq!(got.len(), 300_000, "the download arrived whole");

    let s = snd
        .sender(B, concast_mplex::Selection::Acks)
        .unwrap()
        .counters
        .clone();
    let r = rcv.receiver(1).unwrap().clone();
    let from_a: Vec<_> = injected
        .iter()
        .filter(|d| d.len() >= 20 && d[9] == 6 && d[12..16] == A.octets())
        .collect();
    let tos: std::collections::BTreeMap<u8, usize> =
        from_a.iter().fold(Default::default(), |mut m, d| {
            *m.entry(d[1]).or_default() += 1;
            m
        });
    eprintln!(
        "sender {}\nreceiver {}\nTOS of injected ACKs: {tos:?}",
        s.to_json(),
        r.to_json()
    );
    assert!(s.sent > 20, "ACKs were multiplexed: {}", s.to_json());
    assert_eq!(
        from_a.len() as u64,
        r.delivered,
        "the sniffer saw every injected datagram"
    );
    assert_eq!(
        tos.keys().copied().collect::<Vec<_>>(),
        vec![EF],
        "every rebuilt ACK carries the TOS byte its sender's kernel wrote"
    );
}
