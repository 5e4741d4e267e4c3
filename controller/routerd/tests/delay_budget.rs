//! protocol.md 3.2-2 over several hops, in virtual time: a bundle held to its total budget at
//! one router reaches the next with less budget left than that router's timer lead. The next
//! router must send it on in the turn it came in (no time of the turn's end added to its
//! DelayedSoFar), and a router that did send past the budget counts it
//! (`mplex_budget_overruns`, `mplex_budget_overrun_max_us`).

use std::net::Ipv4Addr;
use std::path::PathBuf;

use concast_csp::{Config, FlowId, Selector};
use concast_engine::{Engine, EngineConfig};
use concast_routerd::{dataplane, Router};
use concast_wire::build::MplexBuilder;
use concast_wire::datagram::{classify, Datagram};
use concast_wire::ipv4::Params;
use concast_wire::mplex::{HeaderRepr, RecordRepr};

const RX: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);
const LEAD_US: u64 = 150;

fn spec_bytes(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/mergespecs").join(format!("{name}.wasm"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e} (run `make specs` first)", p.display()))
}

fn router(addr: Ipv4Addr) -> Router {
    let engine = Engine::new(EngineConfig { node: addr, timer_lead_us: LEAD_US, ..EngineConfig::default() }).unwrap();
    let mac = [2, 0xcc, addr.octets()[2], addr.octets()[3], 0, 1];
    let mut r = Router::new(addr, mac, [2, 0, 0, 0, 0xff, 1], Config::default(), engine, Box::new(dataplane::Static));
    let flow = FlowId { receiver: RX, group: 1 };
    r.add_static_flow(0, flow, Selector { proto: 254, dport: 0 }, spec_bytes("multiplex"), b"").unwrap();
    r
}

/// A one-record MplexPkt from `src` as a CPU-port frame: (MaxTotalDelay, DelayedSoFar, MaxLocalDelay).
fn frame(src: Ipv4Addr, delays: (u32, u32, u32)) -> Vec<u8> {
    let header = HeaderRepr { initial_ttl: 64, max_total_delay: delays.0, delayed_so_far: delays.1, max_local_delay: delays.2 };
    let mut buf = vec![0u8; 128];
    let mut b = MplexBuilder::new(&mut buf, &Params::new(src, RX, 254), 1, &header).unwrap();
    b.push(&RecordRepr { src, ttl: 64, protocol: 6, tos: 0, payload: &[0x50; 20] }).unwrap();
    let len = b.finish_bundle().unwrap();
    let mut f = vec![0u8; 14];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&buf[..len]);
    f
}

/// The (MaxTotalDelay, DelayedSoFar) of every MplexPkt among `frames`.
fn bundles(frames: &[Vec<u8>]) -> Vec<(u32, u32)> {
    frames
        .iter()
        .filter_map(|f| match classify(&f[14..]) {
            Ok(Datagram::Mplex { mplex, .. }) => Some((mplex.max_total_delay(), mplex.delayed_so_far())),
            _ => None,
        })
        .collect()
}

/// Hop 1 holds a bundle to its budget (its timer woke 60 µs into the lead); hop 2 gets it
/// with 90 µs left, less than its lead, and its turn takes 200 µs more before its timers run.
#[test]
fn a_bundle_with_less_budget_than_the_lead_leaves_in_the_turn_it_came_in() {
    let (mut r1, mut r2) = (router(Ipv4Addr::new(10, 0, 1, 1)), router(Ipv4Addr::new(10, 0, 2, 1)));
    let mut out1 = Vec::new();
    r1.handle_batch(1_000, [frame(Ipv4Addr::new(10, 1, 1, 2), (1_000, 0, 100_000)).as_slice()].into_iter(), &mut out1);
    assert!(bundles(&out1).is_empty(), "hop 1 holds the record");
    r1.tick(1_000 + 1_000 - LEAD_US + 60, &mut out1); // 60 µs into the lead
    let at_hop1 = bundles(&out1);
    assert_eq!(at_hop1, vec![(1_000, 910)], "hop 1 held it 910 µs");
    assert_eq!(r1.counters.mplex_budget_overruns, 0);

    let mut out2 = Vec::new();
    let fwd = out1.iter().find(|f| classify(&f[14..]).is_ok_and(|d| matches!(d, Datagram::Mplex { .. }))).unwrap();
    r2.handle_batch(50_000, [fwd.as_slice()].into_iter(), &mut out2);
    let sent_in_turn = bundles(&out2);
    r2.tick(50_200, &mut out2);
    assert_eq!(sent_in_turn.len(), 1, "hop 2 waited for the end of its turn: {:?}", bundles(&out2));
    let (total, so_far) = sent_in_turn[0];
    assert!(so_far <= total, "DelayedSoFar {so_far} past MaxTotalDelay {total} at R");
    assert_eq!(so_far, 910, "hop 2 added time it did not hold the bundle for bundling");
    assert_eq!(r2.counters.mplex_budget_overruns, 0);
}

/// A timer that fires after the budget ran out (the machine woke the router too late): the
/// bundle goes with its true DelayedSoFar, and the router counts the overrun.
#[test]
fn a_router_that_sends_past_the_budget_counts_the_overrun() {
    let mut r = router(Ipv4Addr::new(10, 0, 1, 1));
    let mut out = Vec::new();
    r.handle_batch(0, [frame(Ipv4Addr::new(10, 1, 1, 2), (1_000, 200, 100_000)).as_slice()].into_iter(), &mut out);
    r.tick(870, &mut out); // 800 left: due at 800 - lead; woke 70 µs after the budget ran out
    assert_eq!(bundles(&out), vec![(1_000, 1_070)]);
    assert_eq!(r.counters.mplex_budget_overruns, 1);
    assert_eq!(r.counters.mplex_budget_overrun_max_us, 70);
    assert_eq!(r.counters.to_json()["mplex_budget_overruns"], 1);
}
