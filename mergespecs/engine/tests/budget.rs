//! The node's buffer budget (paper 4.2.2, condition 3): all flows of an engine together hold
//! at most `node_buffer_bytes` of datagrams in open states; beyond it the flow holding most
//! builds its oldest state early. Nothing is lost, and the other flows keep their timing.

mod bundled;

use std::net::Ipv4Addr;

use bundled::*;
use concast_engine::sdk::wire::build;
use concast_engine::sdk::wire::ipv4::Params;
use concast_engine::sdk::wire::{classify, Datagram};
use concast_engine::{Engine, EngineConfig, FlowConfig, FlowSlot, FlowId, OutputKind, Outputs};
use concast_speckit::test_host::make::host;

const R2: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 10);
const PARAMS: &str = "max_local_delay_us=50000 max_total_delay_us=100000";

/// A plain concast TCP ACK from sender `n` to `receiver`, group G.
fn ack(n: u8, receiver: Ipv4Addr) -> Vec<u8> {
    let mut tcp = vec![0x50; 20];
    tcp[0] = n;
    let mut buf = vec![0u8; 28 + tcp.len()];
    let len = build::concast(&mut buf, &Params::new(host(n), receiver, 6), G, &tcp).expect("fits");
    buf.truncate(len);
    buf
}

fn engine(budget: usize) -> (Engine, FlowSlot, FlowSlot) {
    let mut e = Engine::new(EngineConfig { node: NODE, node_buffer_bytes: budget, ..EngineConfig::default() })
        .expect("engine starts");
    let spec = e.load_spec(&wasm("multiplex")).expect("spec loads");
    let mut add = |r| {
        let mut cfg = FlowConfig::new(FlowId::new(r, G), spec.clone());
        cfg.params = PARAMS.as_bytes().to_vec();
        e.add_flow(cfg, 0).expect("flow starts")
    };
    let (a, b) = (add(R), add(R2));
    (e, a, b)
}

/// (time, receiver, records) of every MplexPkt out.
fn bundles(out: &Outputs) -> Vec<(u64, Ipv4Addr, usize)> {
    out.iter()
        .filter(|o| o.kind == OutputKind::Merged)
        .map(|o| {
            let Ok(Datagram::Mplex { ip, mplex, .. }) = classify(&o.datagram) else { panic!("not an MplexPkt") };
            (o.at_us, ip.dst_addr(), mplex.records().count())
        })
        .collect()
}

#[test]
fn over_budget_the_flow_holding_most_sends_its_oldest_bundle_early() {
    let l = ack(1, R).len();
    let (mut e, a, b) = engine(6 * l);
    let mut out = Outputs::new();
    let to_a: Vec<_> = (1..=5).map(|n| ack(n, R)).collect();
    e.ingest(a, &to_a, 1_000, &mut out).unwrap();
    assert_eq!((e.held_bytes(), bundles(&out).len()), (5 * l, 0), "under budget: all held");
    let to_b: Vec<_> = (1..=3).map(|n| ack(n, R2)).collect();
    e.ingest(b, &to_b, 2_000, &mut out).unwrap();
    // 8 held > 6 allowed: A (5 of them) gives way, B keeps its 3.
    assert_eq!(bundles(&out), [(2_000, R, 5)]);
    assert_eq!(e.held_bytes(), 3 * l);
    assert_eq!(e.stats(a).unwrap().counters.budget_builds, 1);
    assert_eq!(e.stats(b).unwrap().counters.budget_builds, 0);
    // B's bundle leaves at its own deadline, 50 ms after its first ACK.
    e.advance_until(200_000, &mut out);
    assert_eq!(bundles(&out), [(2_000, R, 5), (52_000, R2, 3)]);
    assert_eq!(e.held_bytes(), 0);
}

#[test]
fn one_flow_alone_is_kept_under_budget_batch_by_batch_and_loses_nothing() {
    let l = ack(1, R).len();
    let (mut e, a, _) = engine(4 * l);
    let mut out = Outputs::new();
    for round in 0..5u64 {
        // Ten senders per round, one batch each: the budget is checked after every batch.
        for n in 1..=10 {
            e.ingest(a, &[ack(n, R)], 1_000 + round * 100_000 + u64::from(n), &mut out).unwrap();
            assert!(e.held_bytes() <= 4 * l, "round {round}, sender {n}: {} held", e.held_bytes());
        }
    }
    e.advance_until(1_000_000, &mut out);
    let records: usize = bundles(&out).iter().map(|b| b.2).sum();
    assert_eq!(records, 50, "every ACK left in some bundle");
    assert!(e.stats(a).unwrap().counters.budget_builds >= 5);
    assert_eq!(e.held_bytes(), 0);
}
