//! The CPU port's two read paths, the memory-mapped ring and recvmmsg, hand the router the
//! same frames: the same traffic sent over a veth through each gives the same merged
//! output and the same counters. Malformed frames inside a batch are counted and dropped
//! and the good ones around them still merge; a frame longer than a ring slot (a jumbo
//! bundle) arrives whole and in its place.
//!
//! A veth pair in a namespace of the test's own (MTU 9000); a send-only port writes the
//! frames on one end, the CPU port under test reads them on the other and feeds a Router
//! running `sum.wasm` as a static flow. Needs root and iproute2; skips without.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use concast_aggregate::payload::Contribution;
use concast_csp::{Config, FlowId, Selector};
use concast_engine::{Engine, EngineConfig};
use concast_routerd::cpu_port::{CpuPort, RxMode};
use concast_routerd::{dataplane, Router};
use concast_wire::ipv4::Params;

mod common;
use common::{enter, no_namespaces, sh, spec_bytes, Netns};

const ROUTER: &str = "10.0.0.1";
const RX: &str = "10.0.0.9";
const SOURCES: [&str; 2] = ["10.1.1.2", "10.1.2.2"];
const ROUTER_MAC: [u8; 6] = [2, 0xcc, 10, 0, 0, 1];
const KEYS: u32 = 150;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn frame(datagram: &[u8]) -> Vec<u8> {
    let mut f = ROUTER_MAC.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x00]);
    f.extend_from_slice(datagram);
    f
}

fn contribution(src: &str, key: u32, value: i64) -> Vec<u8> {
    let c = Contribution { sport: 4000, dport: 5000, key, count: 1, value };
    let mut buf = vec![0; 100];
    let n = concast_wire::build::concast(&mut buf, &Params::new(ip(src), ip(RX), 17), 7, &c.encode()).unwrap();
    frame(&buf[..n])
}

/// A plain UDP datagram of `len` bytes (not concast: passed back unchanged), e.g. longer
/// than a ring slot.
fn big_udp(len: usize) -> Vec<u8> {
    let mut d = vec![0u8; len];
    d[0] = 0x45;
    d[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    d[8] = 64;
    d[9] = 17;
    d[12..16].copy_from_slice(&ip("10.1.1.2").octets());
    d[16..20].copy_from_slice(&ip("10.2.2.2").octets());
    for (i, b) in d[28..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let mut p = concast_wire::ipv4::Packet::new_checked(&mut d[..]).unwrap();
    p.fill_checksum();
    frame(&d)
}

/// The traffic: every key from both sources, with malformed frames and one jumbo datagram
/// among them. Returns (frames, malformed frames in it).
fn traffic() -> (Vec<Vec<u8>>, u64) {
    let mut frames = Vec::new();
    let mut bad = 0;
    for key in 0..KEYS {
        for (s, src) in SOURCES.iter().enumerate() {
            frames.push(contribution(src, key, i64::from(key) * 10 + s as i64));
        }
        let good = contribution(SOURCES[0], 9999, 1);
        match key % 25 {
            3 => {
                let mut f = good;
                f[14 + 21] = 8; // Concast ID option length 8
                frames.push(f);
                bad += 1;
            }
            7 => {
                frames.push(good[..14 + 10].to_vec()); // truncated IPv4 header
                bad += 1;
            }
            11 => {
                let mut f = good;
                f[14 + 10] ^= 0x55; // header checksum wrong
                frames.push(f);
                bad += 1;
            }
            17 => frames.push(big_udp(6000)),
            _ => {}
        }
    }
    (frames, bad)
}

struct Run {
    mode: &'static str,
    out: Vec<Vec<u8>>,
    counters: serde_json::Value,
    batches: usize,
    /// Frames whose ring-to-read delay was recorded.
    delays: u64,
}

/// Sends `frames` through the veth in bursts and runs what the CPU port reads through a
/// fresh router until every frame arrived (or 10 s pass).
fn run(ns: &str, mode: RxMode, frames: &[Vec<u8>]) -> Run {
    let tx = CpuPort::open_tx("rpa0").unwrap();
    let mut port = CpuPort::open_rx("rpa1", mode).unwrap();
    let engine = Engine::new(EngineConfig { node: ip(ROUTER), ..EngineConfig::default() }).unwrap();
    let mut router = Router::new(ip(ROUTER), ROUTER_MAC, port.mac, Config::default(), engine, Box::new(dataplane::Static));
    let flow = FlowId { receiver: ip(RX), group: 7 };
    router.add_static_flow(0, flow, Selector { proto: 17, dport: 5000 }, spec_bytes("sum"), b"fanin=2").unwrap();
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut batches = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    // Bursts of 50 so batches fill and a malformed frame sits among good ones; the
    // socket buffers hold a whole burst.
    for burst in frames.chunks(50) {
        assert_eq!(tx.send_batch(burst).unwrap(), burst.len(), "{ns}: every frame sent");
        let want = router.counters.frames_in + burst.len() as u64;
        while router.counters.frames_in < want {
            assert!(Instant::now() < deadline, "{mode:?}: only {} of {want} frames arrived", router.counters.frames_in);
            let mut pfd = libc::pollfd { fd: port.raw_fd(), events: libc::POLLIN, revents: 0 };
            unsafe { libc::poll(&mut pfd, 1, 100) };
            let n = port.recv_batch().unwrap();
            if n > 0 {
                batches += 1;
                router.handle_batch(0, (0..n).map(|i| port.frame(i)), &mut out);
            }
        }
    }
    assert_eq!(port.kernel_drops(), 0, "{mode:?}: the kernel dropped frames");
    assert_eq!(port.batches, batches as u64, "{mode:?}: the port counts the reads that returned frames");
    assert_eq!(port.full_batches, 0, "{mode:?}: bursts of 50 never fill a batch of 64");
    let delays = port.read_delay().to_json()["n"].as_u64().unwrap();
    Run { mode: port.rx_mode(), out, counters: router.counters.to_json(), batches, delays }
}

#[test]
fn the_ring_and_recvmmsg_give_the_same_merged_output_and_counters() {
    if let Some(why) = no_namespaces() {
        eprintln!("skipped: {why}");
        return;
    }
    let ns = Netns::new("rxpaths");
    assert!(sh(&["ip", "-n", &ns.0, "link", "add", "rpa0", "mtu", "9000", "type", "veth", "peer", "name", "rpa1", "mtu", "9000"]));
    for i in ["rpa0", "rpa1"] {
        assert!(sh(&["ip", "-n", &ns.0, "link", "set", i, "up"]));
    }
    enter(&ns.0);

    let (frames, bad) = traffic();
    let ring = run(&ns.0, RxMode::Ring, &frames);
    let socket = run(&ns.0, RxMode::Socket, &frames);
    assert_eq!((ring.mode, socket.mode), ("ring", "socket"), "each path ran as asked");

    // What the paths must agree on, and that it is what the traffic says.
    let c = &ring.counters;
    assert_eq!(c["frames_in"], frames.len() as u64);
    assert_eq!(c["malformed_dropped"], bad, "every malformed frame counted: {c}");
    assert_eq!(c["merged_in"], u64::from(KEYS) * 2);
    assert_eq!(c["merged_out"], u64::from(KEYS), "one merged datagram per key");
    let jumbo: Vec<&Vec<u8>> = frames.iter().filter(|f| f.len() > 2048).collect();
    assert!(!jumbo.is_empty());
    for j in &jumbo {
        assert!(ring.out.contains(j), "a frame longer than a ring slot came back whole");
    }
    assert_eq!((ring.delays, socket.delays), (frames.len() as u64, 0), "the read delay is timed for every ring slot");
    assert!(ring.batches < frames.len() / 4, "frames were read in batches ({} turns)", ring.batches);
    assert_eq!(ring.counters, socket.counters, "the same counters on both paths");
    // Merged datagrams leave at the end of their batch and passed frames at once, so where
    // batches split may reorder the two kinds: the same frames, compared as sets.
    let (mut a, mut b) = (ring.out.clone(), socket.out.clone());
    a.sort();
    b.sort();
    assert_eq!(a.len(), b.len());
    assert!(a == b, "the same output frames on both paths");
}

/// The port's read counters say whether it had a backlog (bench_routerd.py --saturate proves
/// saturation with them): frames queued beyond a batch come back as a full read, the rest as
/// a short one.
#[test]
fn a_backlog_is_read_as_full_batches_and_counted() {
    if let Some(why) = no_namespaces() {
        eprintln!("skipped: {why}");
        return;
    }
    let ns = Netns::new("rxfull");
    assert!(sh(&["ip", "-n", &ns.0, "link", "add", "rpf0", "type", "veth", "peer", "name", "rpf1"]));
    for i in ["rpf0", "rpf1"] {
        assert!(sh(&["ip", "-n", &ns.0, "link", "set", i, "up"]));
    }
    enter(&ns.0);
    let batch = concast_routerd::cpu_port::BATCH;
    let frames: Vec<Vec<u8>> = (0..batch as u32 + 10).map(|k| contribution(SOURCES[0], k, 1)).collect();
    for mode in [RxMode::Ring, RxMode::Socket] {
        let tx = CpuPort::open_tx("rpf0").unwrap();
        let mut port = CpuPort::open_rx("rpf1", mode).unwrap();
        assert_eq!(tx.send_batch(&frames).unwrap(), frames.len());
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut reads = Vec::new();
        while reads.iter().sum::<usize>() < frames.len() {
            assert!(Instant::now() < deadline, "{mode:?}: only {reads:?} of {} frames arrived", frames.len());
            let mut pfd = libc::pollfd { fd: port.raw_fd(), events: libc::POLLIN, revents: 0 };
            unsafe { libc::poll(&mut pfd, 1, 100) };
            let n = port.recv_batch().unwrap();
            if n > 0 {
                reads.push(n);
            }
        }
        assert_eq!(port.recv_batch().unwrap(), 0, "{mode:?}: nothing more");
        let full = reads.iter().filter(|&&n| n == batch).count() as u64;
        assert_eq!((port.batches, port.full_batches), (reads.len() as u64, full), "{mode:?}: reads {reads:?}");
        assert!(full >= 1, "{mode:?}: {} frames queued before the first read fill a batch: {reads:?}", frames.len());
    }
}
