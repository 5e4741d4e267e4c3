//! Queue access (docs/multiplex.md): a router in process with the bundled `multiplex.wasm`
//! at MaxLocalDelay 0 and an egress gate over a link state file this test writes in the
//! link emulator's layout. While the output link's transmitter is busy the finished bundle
//! stays open and keeps merging; it leaves when the link would have reached it, or when the
//! MaxTotalDelay budget runs out, whichever is first. Virtual time: the gate's clock origin
//! is 0, so engine µs = the file's CLOCK_MONOTONIC ns / 1000.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use concast_csp::{Config, FlowId, Selector};
use concast_engine::{Engine, EngineConfig};
use concast_routerd::config::Route;
use concast_routerd::linkgate::{parse_link_routes, LinkGate};
use concast_routerd::linkstate::{writer, LinkState, Slot};
use concast_routerd::{dataplane, Router};
use concast_wire::build::MplexBuilder;
use concast_wire::datagram::{classify, Datagram};
use concast_wire::ipv4::Params;
use concast_wire::mplex::{HeaderRepr, RecordRepr};
use serde_json::json;

mod common;
use common::spec_bytes;


const ROUTER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const RX: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);
const ROUTER_MAC: [u8; 6] = [2, 0xcc, 10, 0, 0, 1];

/// Sender `n`'s one-record MplexPkt, MaxLocalDelay 0, as a CPU-port frame.
fn ack_frame(n: u8, max_total_delay: u32) -> Vec<u8> {
    let src = Ipv4Addr::new(10, 1, n, 2);
    let header = HeaderRepr { initial_ttl: 64, max_total_delay, delayed_so_far: 0, max_local_delay: 0 };
    let mut buf = vec![0u8; 128];
    let mut b = MplexBuilder::new(&mut buf, &Params::new(src, RX, 254), 1, &header).unwrap();
    b.push(&RecordRepr { src, ttl: 64, protocol: 6, tos: 0, payload: &[0x50; 20] }).unwrap();
    let len = b.finish_bundle().unwrap();
    let mut f = ROUTER_MAC.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x00]);
    f.extend_from_slice(&buf[..len]);
    f
}

/// (when written, sources, DelayedSoFar) of every MplexPkt among `frames`.
fn bundles(frames: &[(u64, Vec<u8>)]) -> Vec<(u64, Vec<u8>, u32)> {
    frames
        .iter()
        .filter_map(|(at, f)| match classify(&f[14..]) {
            Ok(Datagram::Mplex { mplex, .. }) => {
                Some((*at, mplex.records().map(|r| r.src_addr().octets()[2]).collect(), mplex.delayed_so_far()))
            }
            _ => None,
        })
        .collect()
}

struct Lab {
    router: Router,
    out: Vec<(u64, Vec<u8>)>,
    file: PathBuf,
}

impl Lab {
    /// A router whose route toward R leaves by link slot 1 of a fresh state file.
    fn new(name: &str, gate: bool) -> Lab {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let file = dir.join(format!("{name}-{}.linkstate", std::process::id()));
        writer::create(&file, 2).unwrap();
        let engine = Engine::new(EngineConfig { node: ROUTER, ..EngineConfig::default() }).unwrap();
        let mut router = Router::new(ROUTER, ROUTER_MAC, [2, 0, 0, 0, 0xff, 1], Config::default(), engine, Box::new(dataplane::Static));
        if gate {
            let config: Vec<Route> = serde_json::from_value(json!([
                {"prefix": "10.0.0.0/24", "iface": "r1-eth2", "mac": "02:00:00:00:00:09", "link_slot": 1},
                {"prefix": "10.1.0.0/16", "iface": "r1-eth1", "mac": "02:00:00:00:00:08", "link_slot": 0},
            ]))
            .unwrap();
            let routes = parse_link_routes(&config).unwrap();
            let g = LinkGate::new(LinkState::open(&file).unwrap(), routes, 0).unwrap();
            router.engine.set_egress_gate(Some(Box::new(g)));
        }
        let flow = FlowId { receiver: RX, group: 1 };
        router.add_static_flow(0, flow, Selector { proto: 254, dport: 0 }, spec_bytes("multiplex"), b"").unwrap();
        Lab { router, out: Vec::new(), file }
    }

    /// The transmitter toward R is busy until `until_us`.
    fn busy_until(&self, until_us: u64) {
        let w = writer::Writer::open(&self.file).unwrap();
        w.publish(1, &Slot { tx_free_at_ns: until_us * 1_000, backlog_bytes: 9_000, backlog_pkts: 6, queue_limit_pkts: 100, rate_bps: 10_000_000, updated_ns: 1 });
    }

    fn at(&mut self, now: u64, frames: &[Vec<u8>]) {
        let mut sink: Vec<Vec<u8>> = Vec::new();
        self.router.tick(now, &mut sink);
        self.router.handle_batch(now, frames.iter().map(|f| f.as_slice()), &mut sink);
        self.out.extend(sink.into_iter().map(|f| (now, f)));
    }

    fn run_until(&mut self, end: u64) {
        while let Some(d) = self.router.next_deadline().filter(|&d| d <= end) {
            self.at(d, &[]);
        }
    }

    fn counters(&self) -> (u64, u64) {
        let id = self.router.engine.flow_slots()[0];
        let c = self.router.engine.stats(id).unwrap().counters;
        (c.gate_held, c.gate_hold_us)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

#[test]
fn a_busy_link_holds_the_bundle_open_until_it_would_have_been_sent() {
    let mut lab = Lab::new("busy", true);
    lab.busy_until(5_000);
    lab.at(1_000, &[ack_frame(1, 20_000)]);
    lab.at(2_000, &[ack_frame(2, 20_000), ack_frame(3, 20_000)]);
    lab.at(4_999, &[ack_frame(4, 20_000)]);
    assert!(bundles(&lab.out).is_empty(), "nothing leaves while the link is busy");
    lab.run_until(100_000);
    assert_eq!(
        bundles(&lab.out),
        [(5_000, vec![1, 2, 3, 4], 4_000)],
        "at T, one bundle with everything that arrived before T"
    );
    assert_eq!(lab.counters(), (1, 4_000));
    // The link idle now (T passed): the next ACK leaves at once, alone.
    lab.at(6_000, &[ack_frame(5, 20_000)]);
    assert_eq!(bundles(&lab.out)[1], (6_000, vec![5], 0));
}

#[test]
fn the_hold_never_passes_the_max_total_delay_budget() {
    let mut lab = Lab::new("budget", true);
    lab.busy_until(50_000);
    lab.at(1_000, &[ack_frame(1, 3_000)]);
    lab.at(1_500, &[ack_frame(2, 10_000)]);
    lab.run_until(100_000);
    assert_eq!(bundles(&lab.out), [(4_000, vec![1, 2], 3_000)], "leaves when ACK 1's budget is spent");
}

#[test]
fn without_queue_access_a_zero_delay_ack_leaves_at_once() {
    // The same busy link, but no gate (a network without a link state file): today's
    // behaviour, one MplexPkt per ACK at MaxLocalDelay 0.
    let mut lab = Lab::new("nogate", false);
    lab.busy_until(5_000);
    lab.at(1_000, &[ack_frame(1, 20_000)]);
    lab.at(2_000, &[ack_frame(2, 20_000)]);
    assert_eq!(bundles(&lab.out), [(1_000, vec![1], 0), (2_000, vec![2], 0)]);
    assert_eq!(lab.counters(), (0, 0));
}
