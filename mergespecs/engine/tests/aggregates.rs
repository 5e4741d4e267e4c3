//! The bundled sum/count/min/max specs, run as real Wasm, checked against hand-computed
//! results and against the same logic run natively.

mod common;

use common::*;
use concast_aggregate::{Aggregate, Count, Max, Min, Sum};
use concast_engine::{FlowConfig, OutputKind, Outputs, SpecRef};

/// Feeds contributions `values` (one sender each) with key 1 and returns merged outputs.
fn run(spec: &str, params: &str, values: &[i64]) -> Vec<concast_aggregate::payload::Contribution> {
    let mut engine = engine();
    let flow = add(&mut engine, &spec_bytes(spec), 7, params);
    let batch: Vec<Vec<u8>> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| contribution(i as u8 + 1, 7, 1, v))
        .collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 10, &mut out).unwrap();
    merged(&out).iter().map(|d| read_contribution(d)).collect()
}

#[test]
fn sum_count_min_max_fold_k_contributions() {
    let values = [5, -3, 40, 7];
    let one = |spec: &str| {
        let outs = run(spec, "fanin=4", &values);
        assert_eq!(
            outs.len(),
            1,
            "{spec}: one merged datagram for 4 contributions"
        );
        assert_eq!(outs[0].count, 4);
        assert_eq!(outs[0].key, 1);
        outs[0].value
    };
    assert_eq!(one("sum"), 49);
    assert_eq!(one("count"), 4);
    assert_eq!(one("min"), -3);
    assert_eq!(one("max"), 40);
}

#[test]
fn default_fanin_is_two_and_merged_output_has_a_concast_header() {
    let mut engine = engine();
    let flow = add(&mut engine, &spec_bytes("sum"), 7, "");
    let batch: Vec<Vec<u8>> = (1..=5)
        .map(|i| contribution(i, 7, 3, i64::from(i)))
        .collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 10, &mut out).unwrap();
    let m = merged(&out);
    assert_eq!(m.len(), 2, "pairs (1,2) and (3,4); 5 waits");
    assert_eq!(read_contribution(&m[0]).value, 3);
    assert_eq!(read_contribution(&m[1]).value, 7);
    let o = out.iter().next().unwrap();
    assert_eq!(concast_engine::ipv4::flow_key(o.datagram), Ok(key(7)));
    assert_eq!(&o.datagram[12..16], &NODE.octets(), "source is this node");
    assert_eq!(o.datagram[9], 17);
    assert_eq!(concast_engine::ipv4::checksum(&o.datagram[..28]), 0);
    let stats = engine.stats(flow).unwrap();
    assert_eq!(
        (
            stats.counters.received,
            stats.counters.merged,
            stats.counters.out
        ),
        (5, 5, 2)
    );
    assert_eq!(stats.open_states, 1);
}

#[test]
fn k_counts_contributions_carried_by_merged_datagrams() {
    // Upstream, a merged datagram stands for `count` senders: k=5 is reached by 2 + 3.
    let mut engine = engine();
    let flow = add(&mut engine, &spec_bytes("sum"), 7, "k=5 fanin=100");
    let mk = |count: u32, value: i64| {
        let c = concast_aggregate::payload::Contribution {
            sport: 1,
            dport: 2,
            key: 9,
            count,
            value,
        };
        datagram("10.0.2.1".parse().unwrap(), 7, 60, &c.encode())
    };
    let mut out = Outputs::new();
    engine.ingest(flow, &[mk(2, 10)], 0, &mut out).unwrap();
    assert!(merged(&out).is_empty());
    engine.ingest(flow, &[mk(3, 5)], 5, &mut out).unwrap();
    let m = merged(&out);
    assert_eq!(m.len(), 1);
    let c = read_contribution(&m[0]);
    assert_eq!((c.count, c.value), (5, 15));
    assert_eq!(m[0][8], 60, "TTL is the largest merged TTL");
}

#[test]
fn a_timeout_forwards_a_partial_round_in_virtual_time() {
    let mut engine = engine();
    let flow = add(
        &mut engine,
        &spec_bytes("max"),
        7,
        "fanin=3 timeout_us=5000",
    );
    let mut out = Outputs::new();
    engine
        .ingest(
            flow,
            &[contribution(1, 7, 1, 4), contribution(2, 7, 1, 9)],
            1_000,
            &mut out,
        )
        .unwrap();
    assert!(merged(&out).is_empty());
    assert_eq!(engine.next_deadline(), Some(6_000));
    engine.advance(5_999, &mut out);
    assert!(merged(&out).is_empty(), "not before the deadline");
    engine.advance(6_000, &mut out);
    let m = merged(&out);
    assert_eq!(m.len(), 1);
    assert_eq!(
        (
            read_contribution(&m[0]).count,
            read_contribution(&m[0]).value
        ),
        (2, 9)
    );
    assert_eq!(out.iter().last().unwrap().at_us, 6_000);
    let stats = engine.stats(flow).unwrap();
    assert_eq!((stats.counters.timer_fires, stats.open_states), (1, 0));
    assert_eq!(engine.timers_armed(), 0);
}

#[test]
fn children_set_the_default_fanin() {
    let mut engine = engine();
    let spec = engine.load_spec(&spec_bytes("count")).unwrap();
    let mut cfg = FlowConfig::new(key(7), spec);
    cfg.children = 3;
    let flow = engine.add_flow(cfg, 0).unwrap();
    let batch: Vec<Vec<u8>> = (1..=3).map(|i| contribution(i, 7, 1, 0)).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch[..2], 0, &mut out).unwrap();
    assert!(merged(&out).is_empty());
    engine.ingest(flow, &batch[2..], 1, &mut out).unwrap();
    assert_eq!(read_contribution(&merged(&out)[0]).value, 3);
}

#[test]
fn other_datagrams_pass_unchanged_and_keys_merge_separately() {
    let mut engine = engine();
    let flow = add(&mut engine, &spec_bytes("sum"), 7, "");
    let foreign = datagram(
        "10.0.3.3".parse().unwrap(),
        7,
        64,
        b"not an aggregate payload at all!!",
    );
    let batch = vec![
        contribution(1, 7, 1, 1),
        foreign.clone(),
        contribution(2, 7, 2, 10),
        contribution(3, 7, 1, 2),
        contribution(4, 7, 2, 20),
    ];
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 0, &mut out).unwrap();
    let kinds: Vec<OutputKind> = out.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds[0],
        OutputKind::Unmerged(concast_engine::Unmerged::Passed)
    );
    assert_eq!(out.get(0).unwrap().datagram, &foreign[..]);
    let m: Vec<_> = merged(&out)
        .iter()
        .map(|d| (read_contribution(d).key, read_contribution(d).value))
        .collect();
    assert_eq!(m, vec![(1, 3), (2, 30)]);
    assert_eq!(engine.stats(flow).unwrap().counters.passed, 1);
}

/// The same input through the Wasm spec and the native build of the same Rust code gives
/// byte-identical outputs.
#[test]
fn wasm_and_native_specs_agree() {
    fn outputs(spec: impl Fn(&mut concast_engine::Engine) -> SpecRef) -> Vec<(u64, Vec<u8>)> {
        let mut engine = engine();
        let spec = spec(&mut engine);
        let mut cfg = FlowConfig::new(key(7), spec);
        cfg.params = b"fanin=3 timeout_us=700".to_vec();
        let flow = engine.add_flow(cfg, 0).unwrap();
        let mut out = Outputs::new();
        for round in 0..50u32 {
            let batch: Vec<Vec<u8>> = (0..4)
                .map(|i| {
                    contribution(
                        i,
                        7,
                        (round * 7 + u32::from(i)) % 5,
                        i64::from(round) * 3 - i64::from(i),
                    )
                })
                .collect();
            engine
                .ingest(flow, &batch, u64::from(round) * 300, &mut out)
                .unwrap();
        }
        engine.advance_until(1_000_000, &mut out);
        out.iter().map(|o| (o.at_us, o.datagram.to_vec())).collect()
    }
    let native = outputs(|_| SpecRef::native::<Aggregate<Sum>>());
    let wasm = outputs(|e| e.load_spec(&spec_bytes("sum")).unwrap());
    assert!(native.len() > 50);
    assert_eq!(native, wasm);
    for (spec, native_spec) in [
        ("count", SpecRef::native::<Aggregate<Count>>()),
        ("min", SpecRef::native::<Aggregate<Min>>()),
        ("max", SpecRef::native::<Aggregate<Max>>()),
    ] {
        let n = outputs(|_| native_spec.clone());
        assert_eq!(
            n,
            outputs(|e| e.load_spec(&spec_bytes(spec)).unwrap()),
            "{spec}"
        );
    }
}

/// The hand-written WAT spec forwards exactly what the Rust `sum` spec forwards: the ABI
/// does not depend on the SDK or the language.
#[test]
fn hand_written_wat_sum_matches_the_rust_sum() {
    let run = |name: &str| {
        let mut engine = engine();
        let spec = engine.load_spec(&spec_bytes(name)).unwrap();
        let mut cfg = FlowConfig::new(key(7), spec);
        cfg.children = 3;
        let flow = engine.add_flow(cfg, 0).unwrap();
        let mut out = Outputs::new();
        for round in 0..40u32 {
            let batch: Vec<Vec<u8>> = (0..5)
                .map(|i| {
                    contribution(
                        i,
                        7,
                        (round + u32::from(i)) % 6,
                        i64::from(round) - 100 * i64::from(i),
                    )
                })
                .collect();
            engine
                .ingest(flow, &batch, u64::from(round) * 4_000, &mut out)
                .unwrap();
        }
        engine.advance_until(10_000_000, &mut out);
        out.iter()
            .map(|o| (o.at_us, o.kind, o.datagram.to_vec()))
            .collect::<Vec<_>>()
    };
    let rust = run("sum");
    assert!(rust.len() > 40);
    assert_eq!(rust, run("sum-wat"));
}

/// Merged outputs of five contributions fed to a flow of `spec` given `params`.
fn five_through(spec: &[u8], params: &str) -> Vec<concast_aggregate::payload::Contribution> {
    let mut engine = engine();
    let flow = add(&mut engine, spec, 7, params);
    let batch: Vec<Vec<u8>> = (1..=5).map(|i| contribution(i, 7, 3, i64::from(i))).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 10, &mut out).unwrap();
    merged(&out).iter().map(|d| read_contribution(d)).collect()
}

#[test]
fn parameters_embedded_by_the_receiver_apply_unless_the_flow_has_its_own() {
    let with = concast_engine::params_section::with_params(&spec_bytes("sum"), b"fanin=5").unwrap();
    let outs = five_through(&with, "");
    assert_eq!(outs.len(), 1, "the embedded fan-in of 5 makes one round");
    assert_eq!((outs[0].count, outs[0].value), (5, 15));
    assert_eq!(five_through(&with, "fanin=2").len(), 2, "a flow's own parameters win");
}

#[test]
fn fanin_follows_the_children_the_node_has_now() {
    let mut engine = engine();
    let flow = add(&mut engine, &spec_bytes("sum"), 7, "");
    engine.set_children(flow, 3).unwrap();
    let batch: Vec<Vec<u8>> = (1..=3).map(|i| contribution(i, 7, 3, i64::from(i))).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch[..2], 10, &mut out).unwrap();
    assert!(merged(&out).is_empty(), "3 children: 2 contributions are not a round");
    engine.ingest(flow, &batch[2..], 20, &mut out).unwrap();
    assert_eq!(merged(&out).iter().map(|d| read_contribution(d).count).collect::<Vec<_>>(), vec![3]);
}
