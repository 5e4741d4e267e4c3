//! ABI version 2 (docs/mergespec-abi.md section 12): batched specs give the same outputs as
//! their version 1 builds on the same input; a looping, trapping or memory-eating v2 spec is
//! stopped inside a batch and quarantined with fail-open; the version and batch-area
//! constants are pinned here, in the doc and in the C header.

mod common;
mod mplex_input;

use std::path::PathBuf;

use common::*;
use mplex_input::one_record;
use concast_engine::sdk::abi;
use concast_engine::{
    CpuLimit, EgressGate, Engine, EngineConfig, Fault, FlowId, Limits, OutputKind, Outputs,
    Unmerged,
};

fn v1_bytes(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../build/mergespecs/v1")
        .join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{}: {e}. Build the specs first: `make specs` at the repo root", path.display())
    })
}

/// xorshift: deterministic inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A link that is busy for a while after each output, as an egress gate sees it.
struct BusyLink(std::sync::Arc<std::sync::Mutex<u64>>);
impl EgressGate for BusyLink {
    fn busy_until(&mut self, _flow: FlowId, now: u64) -> Option<u64> {
        let free = *self.0.lock().unwrap();
        (free > now).then_some(free)
    }
}

/// Everything an engine did with `batches` (ingested at their times, timers fired in
/// between and at the end): each output as (time, kind, bytes), then the flow's counters.
fn run(spec: &[u8], params: &str, batches: &[(u64, Vec<Vec<u8>>)], gate: bool) -> (Vec<String>, String) {
    run_in(engine(), spec, params, batches, gate)
}

/// [`run`] in `engine`.
fn run_in(
    mut engine: Engine,
    spec: &[u8],
    params: &str,
    batches: &[(u64, Vec<Vec<u8>>)],
    gate: bool,
) -> (Vec<String>, String) {
    let link = std::sync::Arc::new(std::sync::Mutex::new(0u64));
    if gate {
        engine.set_egress_gate(Some(Box::new(BusyLink(link.clone()))));
    }
    let flow = add(&mut engine, spec, 7, params);
    let mut out = Outputs::new();
    let mut seen = Vec::new();
    let mut record = |out: &mut Outputs| {
        for o in out.iter() {
            let mut free = link.lock().unwrap();
            *free = (*free).max(o.at_us) + 120; // ~1500 bytes at 100 Mbit/s
            seen.push(format!("{} {} {:02x?}", o.at_us, o.kind.name(), o.datagram));
        }
        out.clear();
    };
    for (at, batch) in batches {
        engine.advance_until(*at, &mut out);
        record(&mut out);
        engine.ingest(flow, batch, *at, &mut out).unwrap();
        record(&mut out);
    }
    engine.advance_until(u64::MAX / 2, &mut out);
    record(&mut out);
    let stats = engine.stats(flow).unwrap();
    (seen, format!("{:?} quarantine={:?}", stats.counters, stats.quarantine))
}

fn assert_same(name: &str, v1: &[u8], v2: &[u8], params: &str, batches: &[(u64, Vec<Vec<u8>>)], gate: bool) {
    let (out1, counters1) = run(v1, params, batches, gate);
    let (out2, counters2) = run(v2, params, batches, gate);
    assert!(!out1.is_empty(), "{name}: something comes out");
    assert_eq!(out1.len(), out2.len(), "{name}: as many outputs from v1 and v2");
    for (i, (a, b)) in out1.iter().zip(&out2).enumerate() {
        assert_eq!(a, b, "{name}: output {i} differs between v1 and v2");
    }
    assert_eq!(counters1, counters2, "{name}: counters differ");
    println!("{name}: {} outputs identical; {counters2}", out2.len());
}

/// Batch sizes 1..=150 (so layouts of one, some and more than 64 datagrams), contributions
/// over a few keys from many senders, with TCP (passed) and short (malformed) datagrams
/// mixed in, at times that let some states time out.
fn aggregate_input(seed: u64) -> Vec<(u64, Vec<Vec<u8>>)> {
    let mut rng = Rng(seed);
    let mut now = 0;
    (0..60)
        .map(|_| {
            now += rng.below(3_000);
            let n = 1 + rng.below(150) as usize;
            let batch = (0..n)
                .map(|_| match rng.below(40) {
                    0 => {
                        let mut d = contribution(rng.below(250) as u8, 7, 1, 1);
                        d[9] = 6; // TCP: the spec passes it
                        d
                    }
                    1 => vec![0x45; 12], // too short: malformed
                    _ => contribution(
                        rng.below(250) as u8,
                        7,
                        rng.below(12) as u32,
                        rng.below(1_000) as i64 - 500,
                    ),
                })
                .collect();
            (now, batch)
        })
        .collect()
}

#[test]
fn sum_v1_and_v2_give_the_same_outputs() {
    for (seed, params) in [(1, "fanin=4"), (2, "fanin=8 timeout_us=2000"), (3, "fanin=1000 timeout_us=500")] {
        let input = aggregate_input(seed);
        assert_same(&format!("sum {params}"), &v1_bytes("sum"), &spec_bytes("sum"), params, &input, false);
    }
}

#[test]
fn c_spec_v1_and_v2_give_the_same_outputs() {
    let v2 = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/mergespecs/sum-c.wasm");
    if !v2.exists() {
        eprintln!("skipped: build/mergespecs/sum-c.wasm missing (clang and lld needed; make specs)");
        return;
    }
    for (seed, params) in [(5, "fanin=4"), (6, "fanin=16 timeout_us=1000")] {
        let input = aggregate_input(seed);
        assert_same(&format!("sum-c {params}"), &v1_bytes("sum-c"), &spec_bytes("sum-c"), params, &input, false);
    }
}

/// One-record MplexPkts (a TCP ACK inside) from `senders` senders in turn.
fn mplex_input(seed: u64, delays: (u32, u32)) -> Vec<(u64, Vec<Vec<u8>>)> {
    let mut rng = Rng(seed);
    let mut now = 0;
    let mut sender = 0usize;
    (0..80)
        .map(|_| {
            now += rng.below(2_500);
            let n = 1 + rng.below(130) as usize;
            let batch = (0..n)
                .map(|_| {
                    sender = (sender + 1 + rng.below(3) as usize) % 300;
                    one_record(sender, R, 7, delays, &vec![0x50; 20 + rng.below(40) as usize])
                })
                .collect();
            (now, batch)
        })
        .collect()
}

#[test]
fn multiplex_v1_and_v2_give_the_same_outputs() {
    for (seed, delays, gate) in [
        (7, (0, 0), false),        // zero delay: bundles filled from the pending queue
        (8, (20_000, 2_000), false), // bundles wait up to 2 ms
        (9, (20_000, 2_000), true),  // and the egress gate holds finished ones
        (10, (0, 0), true),
    ] {
        let input = mplex_input(seed, delays);
        assert_same(
            &format!("multiplex delays {delays:?} gate {gate}"),
            &v1_bytes("multiplex"),
            &spec_bytes("multiplex"),
            "",
            &input,
            gate,
        );
    }
}

/// A version 2 spec in WAT: every datagram gets tag 0 (the entry's zeroed tag field), each
/// merge counts; `abuse` runs inside the third merge.
fn v2_spec(abuse: &str) -> Vec<u8> {
    wat(&format!(
        r#"(module
          (memory (export "memory") 2)
          (global $n (mut i32) (i32.const 0))
          (func (export "concast_abi_version") (result i32) (i32.const 2))
          (func (export "concast_init") (result i32) (i32.const 0))
          (func (export "concast_state_new") (param i32 i64))
          (func (export "concast_done") (param i32) (result i32) (i32.const 0))
          (func (export "concast_build") (param i32) (result i32) (i32.const 0))
          (func (export "concast_run") (param $first i32) (param $count i32) (param $slot i32)
                (param $tag i64) (result i32)
            (local $i i32) (local $e i32)
            (local.set $i (local.get $first))
            (block $out
              (loop $next
                (br_if $out (i32.ge_u (local.get $i) (local.get $count)))
                (local.set $e (i32.add (i32.const 64) (i32.mul (local.get $i) (i32.const 24))))
                (i32.store (i32.const 0) (local.get $i))
                (if (i32.lt_s (local.get $slot) (i32.const 0))
                  (then (i32.store offset=20 (local.get $e) (i32.const 4))
                        (return (local.get $i))))
                (if (i32.eq (global.get $n) (i32.const 2)) (then {abuse}))
                (global.set $n (i32.add (global.get $n) (i32.const 1)))
                (i32.store offset=20 (local.get $e) (i32.const 0))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $next)))
            (local.get $count)))"#
    ))
}

/// `bad` on flow 2 beside sum on flow 1, one batch of 40: the bad flow is quarantined with a
/// fault `expect` accepts, all 40 datagrams come back unmerged, flow 1 keeps merging.
fn quarantined_in_a_batch(engine: &mut Engine, bad: &[u8], expect: impl Fn(&Fault) -> bool) {
    let good = add(engine, &spec_bytes("sum"), 1, "fanin=2");
    let bad_flow = add(engine, bad, 2, "");
    let batch: Vec<Vec<u8>> = (1..=40).map(|i| contribution(i, 2, 1, i64::from(i))).collect();
    let mut out = Outputs::new();
    engine.ingest(bad_flow, &batch, 1, &mut out).unwrap();
    let stats = engine.stats(bad_flow).unwrap();
    let q = stats.quarantine.clone().expect("the bad flow is quarantined");
    println!("quarantined: {q}");
    assert!(expect(&q.fault), "unexpected fault: {q}");
    assert_eq!(q.call, "concast_run");
    let mut got: Vec<&[u8]> = out
        .iter()
        .filter(|o| o.kind == OutputKind::Unmerged(Unmerged::FailOpen))
        .map(|o| o.datagram)
        .collect();
    let mut expected: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "every datagram of the batch comes back unmerged, once");
    assert_eq!(out.len(), 40, "and nothing else");
    assert_eq!((stats.counters.fail_open, stats.counters.traps), (40, 1));
    out.clear();
    engine
        .ingest(good, &[contribution(1, 1, 5, 10), contribution(2, 1, 5, 20)], 2, &mut out)
        .unwrap();
    assert_eq!(merged(&out).len(), 1, "the other flow still merges");
}

#[test]
fn an_endless_loop_in_a_batch_is_stopped_and_quarantined() {
    quarantined_in_a_batch(&mut engine(), &v2_spec("(loop $l (br $l))"), |f| {
        matches!(f, Fault::CpuLimit(_))
    });
}

#[test]
fn an_endless_loop_in_a_batch_is_stopped_by_fuel() {
    let mut e = Engine::new(EngineConfig {
        node: NODE,
        limits: Limits {
            cpu: CpuLimit::Fuel(1_000_000),
            ..Limits::default()
        },
        ..EngineConfig::default()
    })
    .unwrap();
    quarantined_in_a_batch(&mut e, &v2_spec("(loop $l (br $l))"), |f| {
        matches!(f, Fault::CpuLimit(_))
    });
}

#[test]
fn a_trap_in_a_batch_quarantines() {
    quarantined_in_a_batch(&mut engine(), &v2_spec("unreachable"), |f| matches!(f, Fault::Trap(_)));
}

#[test]
fn eating_memory_in_a_batch_quarantines() {
    let grow = "(loop $g (br_if $g (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))";
    quarantined_in_a_batch(&mut engine(), &v2_spec(grow), |f| {
        matches!(f, Fault::MemoryLimit { .. })
    });
}

/// The engine accounts a run's merged entries in one pass over its table; the flow's
/// held-bytes limit, crossed in the middle of a run, still quarantines it as v1 does: same
/// fault, same outputs, same counters.
#[test]
fn held_bytes_limit_crossed_inside_a_run_quarantines_as_v1_does() {
    let with_limit = || {
        let limits = Limits { held_bytes: 5 * 60 + 30, ..Limits::default() };
        Engine::new(EngineConfig { node: NODE, limits, ..EngineConfig::default() }).unwrap()
    };
    let batch: Vec<Vec<u8>> = (1..=20).map(|i| contribution(i, 7, 3, i64::from(i))).collect();
    let input = [(10, batch)];
    let params = "fanin=1000 timeout_us=500000";
    let (out1, counters1) = run_in(with_limit(), &v1_bytes("sum"), params, &input, false);
    let (out2, counters2) = run_in(with_limit(), &spec_bytes("sum"), params, &input, false);
    assert!(counters2.contains("HeldBytes { limit: 330 }"), "v2 quarantined: {counters2}");
    assert!(counters2.contains("fail_open: 20"), "every datagram forwarded: {counters2}");
    assert_eq!(out1, out2, "the same outputs from v1 and v2");
    assert_eq!(counters1, counters2, "the same counters");
}

/// A merge result the ABI does not know, written for an entry the run went past, is found
/// when the engine accounts the run: the flow is quarantined and every datagram comes back
/// unmerged, once.
#[test]
fn an_unknown_merge_result_inside_a_run_quarantines() {
    let bad_result = "(i32.store offset=20 (local.get $e) (i32.const 9))
        (global.set $n (i32.add (global.get $n) (i32.const 1)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)";
    quarantined_in_a_batch(&mut engine(), &v2_spec(bad_result), |f| {
        matches!(f, Fault::Abi(why) if why.contains("merge result 9"))
    });
}

#[test]
fn a_v2_module_without_concast_run_is_refused() {
    let module = wat(
        r#"(module (memory (export "memory") 2)
          (func (export "concast_abi_version") (result i32) (i32.const 2))
          (func (export "concast_init") (result i32) (i32.const 0))
          (func (export "concast_get_tag") (param i32) (result i64) (i64.const 0))
          (func (export "concast_state_new") (param i32 i64))
          (func (export "concast_merge") (param i32 i32) (result i32) (i32.const 0))
          (func (export "concast_done") (param i32) (result i32) (i32.const 0))
          (func (export "concast_build") (param i32) (result i32) (i32.const 0)))"#,
    );
    let err = engine().load_spec(&module).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "missing export `concast_run` (i32, i32, i32, i64) -> i32 (required by concast ABI v2)"
    );
}

#[test]
fn version_and_batch_constants_are_pinned() {
    assert_eq!((abi::VERSION_1, abi::VERSION_2, abi::VERSION), (1, 2, 2));
    assert_eq!(abi::SUPPORTED_VERSIONS, &[1, 2]);
    use abi::batch;
    let pinned = [
        ("CURRENT", batch::CURRENT as u64, 0),
        ("TABLE", batch::TABLE as u64, 64),
        ("MAX", batch::MAX as u64, 64),
        ("ENTRY_LEN", batch::ENTRY_LEN as u64, 24),
        ("DATA", batch::DATA as u64, 2048),
        ("AREA_LEN", batch::AREA_LEN as u64, 67_584),
        ("TAG_KNOWN", u64::from(batch::TAG_KNOWN), 1),
        ("TAKEN", u64::from(batch::TAKEN), 2),
        ("NEEDS_STATE", u64::from(batch::NEEDS_STATE), 4),
        ("DONE", u64::from(batch::DONE), 0x100),
    ];
    for (name, value, want) in pinned {
        assert_eq!(value, want, "abi::batch::{name}");
    }
    assert_eq!(
        (batch::OFF, batch::LEN, batch::TAG, batch::FLAGS, batch::RESULT),
        (0, 4, 8, 16, 20)
    );
    assert!(batch::TABLE + batch::MAX * batch::ENTRY_LEN <= batch::DATA);

    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(repo.join("docs/mergespec-abi.md")).unwrap();
    for text in [
        "returns **1** or **2**",
        "(67,584\nbytes, `batch::AREA_LEN`)",
        "| 0 | `current: u32`",
        "| 64 + 24 i | entry i (i < 64): `off: u32, len: u32, tag: u64, flags: u32, result: u32`",
        "| 2048 | the datagrams",
        "`TAKEN` (2)",
        "`TAG_KNOWN` (1)",
        "`NEEDS_STATE` (4)",
        "`DONE` (0x100)",
    ] {
        assert!(doc.contains(text), "docs/mergespec-abi.md says {text:?}");
    }
    let header = std::fs::read_to_string(repo.join("mergespecs/sdk-c/concast_spec.h")).unwrap();
    let define = |name: &str| -> String {
        let line = header
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("concast_spec.h defines {name}"));
        line.split_whitespace().nth(2).unwrap().to_string()
    };
    assert_eq!(define("CONCAST_BATCH_CURRENT"), "0");
    assert_eq!(define("CONCAST_BATCH_TABLE"), "64");
    assert_eq!(define("CONCAST_BATCH_MAX"), "64");
    assert_eq!(define("CONCAST_BATCH_ENTRY_LEN"), "24");
    assert_eq!(define("CONCAST_BATCH_DATA"), "2048");
    assert_eq!(define("CONCAST_BATCH_TAG_KNOWN"), "1u");
    assert_eq!(define("CONCAST_BATCH_TAKEN"), "2u");
    assert_eq!(define("CONCAST_BATCH_NEEDS_STATE"), "4u");
    assert_eq!(define("CONCAST_BATCH_DONE"), "0x100u");
}
