//! Per-flow multiplexing against the real kernel: an application's UDP flows turned on by
//! port, each with its own delays and size threshold, next to a flow left alone. What R's
//! UDP sockets receive is compared byte for byte (and TOS for TOS) with what was sent, and
//! the MplexPkts on the wire are read back for their delay fields. Needs root; skips
//! (passing, with a note) otherwise.

mod common;

use std::collections::BTreeMap;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use common::{enter, receiver, run_loop, wait_ready, Pair, Sniffer, A, B};
use concast_mplex::{FlowProto, Mplex, Options, Selection, SenderConfig};
use concast_wire::{classify, Datagram};
use sha2::{Digest, Sha256};

/// (sender port, receiver port): flow 1 and 2 are multiplexed, flow 3 is not.
const F1: (u16, u16) = (7000, 7001);
const F2: (u16, u16) = (7002, 7003);
const F3: (u16, u16) = (7004, 7005);
const N: usize = 120;
/// DSCP and ECN values cycled over the datagrams: none, ECT(1), ECT(0), CE, EF + ECT(0).
const TOS: [u8; 5] = [0, 0b01, 0b10, 0b11, 0xB8 | 0b10];

fn set_tos(s: &UdpSocket, tos: u8) {
    let v = i32::from(tos);
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_TOS,
            (&v as *const i32).cast(),
            4,
        )
    };
    assert_eq!(r, 0, "IP_TOS");
}

/// A receiving socket that reports each datagram's TOS byte (IP_RECVTOS).
fn tos_socket(port: u16) -> UdpSocket {
    let s = UdpSocket::bind((B, port)).unwrap();
    let on: i32 = 1;
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_RECVTOS,
            (&on as *const i32).cast(),
            4,
        )
    };
    assert_eq!(r, 0, "IP_RECVTOS");
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s
}

/// Every datagram until the socket stays quiet: (payload, TOS).
fn receive_all(s: &UdpSocket) -> Vec<(Vec<u8>, u8)> {
    let mut out = Vec::new();
    loop {
        let mut buf = vec![0u8; 2048];
        let mut cbuf = [0u8; 64];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = cbuf.len();
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            return out;
        }
        let mut tos = None;
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                    tos = Some(*libc::CMSG_DATA(c));
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        buf.truncate(n as usize);
        out.push((buf, tos.expect("IP_TOS control message")));
    }
}

fn payload(flow: u16, i: usize) -> Vec<u8> {
    // 1..=150 bytes: every datagram is within flow 1's threshold of 200 (28 + 150 = 178).
    let len = 1 + (i * 37) % 150;
    (0..len)
        .map(|j| (j * 13 + i * 7 + usize::from(flow)) as u8)
        .collect()
}

fn digest(items: &[Vec<u8>]) -> Vec<u8> {
    let mut h = Sha256::new();
    for p in items {
        h.update((p.len() as u32).to_be_bytes());
        h.update(p);
    }
    h.finalize().to_vec()
}

#[test]
fn udp_flows_turned_on_by_port_are_multiplexed_with_their_own_delays() {
    if !common::can_run() {
        return;
    }
    let pair = Pair::new("u");
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();

    let (b, s, r) = (pair.b.clone(), stop.clone(), ready_tx.clone());
    let receiver = thread::spawn(move || {
        enter(&b);
        let m = receiver();
        let wire = Sniffer::open("mtvb");
        let socks = [tos_socket(F1.1), tos_socket(F2.1), tos_socket(F3.1)];
        r.send(()).unwrap();
        let m = run_loop(m, s);
        let got: Vec<_> = socks.iter().map(receive_all).collect();
        (m, wire.drain(), got)
    });
    let (a, s) = (pair.a.clone(), stop.clone());
    let sender = thread::spawn(move || {
        enter(&a);
        let mut m = Mplex::new(Options::default());
        let base = SenderConfig::new(B, A, 1, 2.0, 10.0, None).unwrap();
        let f1 = Selection::flow(FlowProto::Udp, Some(F1.0), None).unwrap();
        let f2 = Selection::flow(FlowProto::Udp, Some(F2.0), Some(F2.1)).unwrap();
        m.add_sender(base.for_selection(f1, Some(200)).unwrap())
            .unwrap();
        let slow = SenderConfig::new(B, A, 1, 7.0, 20.0, None).unwrap();
        m.add_sender(slow.for_selection(f2, Some(200)).unwrap())
            .unwrap();
        m.start_capture(B).unwrap();
        ready_tx.send(()).unwrap();
        run_loop(m, s)
    });
    wait_ready(&ready_rx, 2);

    enter(&pair.a);
    let socks: Vec<UdpSocket> = [F1, F2, F3]
        .iter()
        .map(|f| UdpSocket::bind((A, f.0)).unwrap())
        .collect();
    let mut sent: BTreeMap<u16, Vec<(Vec<u8>, u8)>> = BTreeMap::new();
    for i in 0..N {
        for (s, f) in socks.iter().zip([F1, F2, F3]) {
            let (p, tos) = (payload(f.0, i), TOS[i % TOS.len()]);
            set_tos(s, tos);
            s.send_to(&p, SocketAddrV4::new(B, f.1)).unwrap();
            sent.entry(f.0).or_default().push((p, tos));
        }
        thread::sleep(Duration::from_micros(300));
    }
    // Too large for flow 1's threshold: goes out as it is.
    socks[0]
        .send_to(&[9u8; 400], SocketAddrV4::new(B, F1.1))
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let snd = sender.join().unwrap();
    let (rcv, wire, got) = receiver.join().unwrap();

    let c1 = snd
        .sender(
            B,
            Selection::flow(FlowProto::Udp, Some(F1.0), None).unwrap(),
        )
        .unwrap();
    let c2 = snd
        .sender(
            B,
            Selection::flow(FlowProto::Udp, Some(F2.0), Some(F2.1)).unwrap(),
        )
        .unwrap();
    eprintln!(
        "flow 1 {}\nflow 2 {}",
        c1.counters.to_json(),
        c2.counters.to_json()
    );
    eprintln!("receiver {}", rcv.receiver(1).unwrap().to_json());
    assert_eq!((c1.counters.sent, c2.counters.sent), (N as u64, N as u64));
    assert_eq!(
        c1.counters.passed.get("too_large"),
        Some(&1),
        "the flow's rule takes every datagram; the large one went out as it is"
    );

    // Byte for byte, TOS for TOS, in order, at R's own sockets.
    let mut want1 = sent[&F1.0].clone();
    want1.push((vec![9u8; 400], TOS[(N - 1) % TOS.len()]));
    for (got, want, name) in [
        (&got[0], &want1, "flow 1"),
        (&got[1], &sent[&F2.0], "flow 2"),
        (&got[2], &sent[&F3.0], "flow 3"),
    ] {
        let gp: Vec<_> = got.iter().map(|g| g.0.clone()).collect();
        let wp: Vec<_> = want.iter().map(|w| w.0.clone()).collect();
        assert_eq!(
            digest(&gp),
            digest(&wp),
            "{name}: the payloads arrived whole and in order"
        );
        assert_eq!(
            got.iter().map(|g| g.1).collect::<Vec<_>>(),
            want.iter().map(|w| w.1).collect::<Vec<_>>(),
            "{name}: every datagram kept its TOS byte"
        );
    }

    // On the wire: flows 1 and 2 only as MplexPkts carrying their own delays; flow 3 plain.
    let mut delays: BTreeMap<u16, BTreeMap<(u32, u32), usize>> = BTreeMap::new();
    let mut plain: BTreeMap<u16, usize> = BTreeMap::new();
    for d in &wire {
        match classify(d) {
            Ok(Datagram::Mplex { mplex, .. }) => {
                for r in mplex.records() {
                    let sport = u16::from_be_bytes([r.payload()[0], r.payload()[1]]);
                    *delays
                        .entry(sport)
                        .or_default()
                        .entry((mplex.max_local_delay(), mplex.max_total_delay()))
                        .or_default() += 1;
                }
            }
            Ok(Datagram::Ipv4(ip)) if ip.protocol() == 17 && ip.src_addr() == A => {
                let p = ip.payload();
                *plain.entry(u16::from_be_bytes([p[0], p[1]])).or_default() += 1;
            }
            _ => {}
        }
    }
    assert_eq!(
        delays[&F1.0],
        BTreeMap::from([((2000, 10_000), N)]),
        "flow 1's records"
    );
    assert_eq!(
        delays[&F2.0],
        BTreeMap::from([((7000, 20_000), N)]),
        "flow 2's records"
    );
    assert!(!delays.contains_key(&F3.0), "flow 3 was not turned on");
    assert_eq!(plain, BTreeMap::from([(F1.0, 1), (F3.0, N)]));
}
