//! `sum-c`, the sum spec written in C on the C SDK (mergespecs/sdk-c, specs/c/sum-c.c), against
//! its Rust twin `sum`: for the same inputs and parameters it must forward the same datagrams,
//! byte for byte, at the same times, count the same, log the same and refuse the same
//! parameters. This pins the SDK's exports, imports, parameter parsing and UDP emitter.

mod common;

use std::net::Ipv4Addr;
use std::path::PathBuf;

use common::*;
use concast_aggregate::payload::Contribution;
use concast_engine::{FlowConfig, OutputKind, Outputs};

/// The C spec's bytes, or None (with the reason printed) when clang/wasm-ld are missing, in
/// which case `make specs` skipped it. With them installed a missing file is a failure.
fn sum_c() -> Option<Vec<u8>> {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/mergespecs/sum-c.wasm");
    if !built.exists() && !has_c_toolchain() {
        eprintln!("skipped: clang and wasm-ld are not installed, so make specs built no sum-c.wasm (apt-get install clang lld)");
        return None;
    }
    Some(spec_bytes("sum-c"))
}

fn has_c_toolchain() -> bool {
    ["clang", "wasm-ld"].iter().all(|tool| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(tool).is_file()))
    })
}

/// A small deterministic generator (xorshift64*), so the mixed input is the same every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One datagram of a mixed workload: mostly contributions (keys 0..6, counts 0..3, values
/// up to the i64 extremes so sums wrap, TTLs 1..64), and some that must pass unmerged.
fn datagram_for(rng: &mut Rng, group: u32) -> Vec<u8> {
    let src = Ipv4Addr::new(10, 0, 1, 1 + rng.below(200) as u8);
    let ttl = 1 + rng.below(64) as u8;
    let value = match rng.below(6) {
        0 => i64::MAX - rng.below(3) as i64,
        1 => i64::MIN + rng.below(3) as i64,
        _ => rng.below(2001) as i64 - 1000,
    };
    let c = Contribution {
        sport: 4000 + rng.below(3) as u16,
        dport: 5000,
        key: rng.below(6) as u32,
        count: rng.below(4) as u32,
        value,
    };
    let mut payload = c.encode().to_vec();
    match rng.below(20) {
        0 => payload[8] = b'X',                   // not the aggregate magic
        1 => payload[10] = 2,                     // another version
        2 => payload.truncate(31),                // too short
        3 => payload.extend_from_slice(b"extra"), // longer is fine
        _ => {}
    }
    let mut d = datagram(src, group, ttl, &payload);
    match rng.below(25) {
        0 => d[9] = 6,     // TCP: not an aggregate
        1 => d[6] |= 0x20, // More Fragments: never merged
        _ => {}
    }
    d
}

/// What a flow of `spec` forwards for the seeded workload: (time, kind, bytes) of every
/// output, the counters and the log lines.
type Run = (
    Vec<(u64, OutputKind, Vec<u8>)>,
    concast_engine::FlowCounters,
    Vec<String>,
);

fn run(spec: &[u8], params: &str, children: u32, seed: u64) -> Run {
    let mut engine = engine();
    let spec = engine.load_spec(spec).expect("spec loads");
    let mut cfg = FlowConfig::new(key(7), spec);
    cfg.params = params.as_bytes().to_vec();
    cfg.children = children;
    let flow = engine.add_flow(cfg, 0).expect("flow starts");
    let mut rng = Rng(seed);
    let mut out = Outputs::new();
    let mut now = 0;
    for _ in 0..300 {
        now += rng.below(4_000);
        let batch: Vec<Vec<u8>> = (0..1 + rng.below(6))
            .map(|_| datagram_for(&mut rng, 7))
            .collect();
        engine.advance_until(now, &mut out);
        engine.ingest(flow, &batch, now, &mut out).unwrap();
    }
    engine.advance_until(now + 10_000_000, &mut out);
    let outputs = out
        .iter()
        .map(|o| (o.at_us, o.kind, o.datagram.to_vec()))
        .collect();
    let stats = engine.stats(flow).unwrap();
    assert!(stats.quarantine.is_none(), "{:?}", stats.quarantine);
    let logs = engine.logs(flow).into_iter().map(|l| l.text).collect();
    (outputs, stats.counters, logs)
}

#[test]
fn c_sum_forwards_what_the_rust_sum_forwards() {
    let Some(c) = sum_c() else { return };
    let rust = spec_bytes("sum");
    for (params, children) in [
        ("", 0),
        ("", 3),
        ("fanin=4", 0),
        ("k=5 timeout_us=2500", 2),
        ("k=3,fanin=9;ttl=9\ntimeout_us=0x400", 0),
        ("timeout_us=1 fanin=1000", 0),
    ] {
        for seed in [1, 0x5eed] {
            let want = run(&rust, params, children, seed);
            let merged = want.0.iter().filter(|o| o.1 == OutputKind::Merged).count();
            let passed = want.0.iter().filter(|o| o.1 != OutputKind::Merged).count();
            assert!(
                merged > 50 && passed > 10,
                "{params:?}: a workload that merges and passes ({merged}, {passed})"
            );
            let got = run(&c, params, children, seed);
            assert_eq!(
                got.1, want.1,
                "counters, params {params:?} children {children}"
            );
            assert_eq!(got.2, want.2, "logs, params {params:?} children {children}");
            assert_eq!(
                got.0, want.0,
                "outputs, params {params:?} children {children}"
            );
        }
    }
}

/// Parameters are embedded by the receiver (`concast-spec embed`): the C SDK reads them from
/// `flow_params` like the Rust SDK, as key=value items separated by newlines, spaces, `,` or `;`.
#[test]
fn c_sum_reads_parameters_as_the_rust_sdk_does() {
    let Some(c) = sum_c() else { return };
    let rust = spec_bytes("sum");
    let five = |spec: &[u8], params: &str| {
        let mut engine = engine();
        let flow = add(&mut engine, spec, 7, params);
        let batch: Vec<Vec<u8>> = (1..=5)
            .map(|i| contribution(i, 7, 3, i64::from(i)))
            .collect();
        let mut out = Outputs::new();
        engine.ingest(flow, &batch, 10, &mut out).unwrap();
        merged(&out)
            .iter()
            .map(|d| read_contribution(d))
            .collect::<Vec<_>>()
    };
    for params in [
        "",
        "fanin=5",
        "fanin=2\nfanin=5",
        "k=3",
        "k=0x3",
        "kk=9 k=4",
        "flag,fanin=1",
        "fanin=5;k=2",
    ] {
        let want = five(&rust, params);
        assert_eq!(five(&c, params), want, "{params:?}");
    }
    assert_eq!(five(&c, "fanin=5").len(), 1, "a fan-in of 5 is one round");
    assert_eq!(five(&c, "fanin=1").len(), 5);
    let embedded = concast_engine::params_section::with_params(&c, b"fanin=5").unwrap();
    assert_eq!(five(&embedded, "").len(), 1, "the embedded fan-in applies");
    assert_eq!(
        five(&embedded, "fanin=1").len(),
        5,
        "a flow's own parameters win"
    );
}

#[test]
fn c_sum_refuses_the_parameters_the_rust_sum_refuses() {
    let Some(c) = sum_c() else { return };
    let rust = spec_bytes("sum");
    let start = |spec: &[u8], params: &str| {
        let mut engine = engine();
        let spec = engine.load_spec(spec).unwrap();
        let mut cfg = FlowConfig::new(key(7), spec);
        cfg.params = params.as_bytes().to_vec();
        engine
            .add_flow(cfg, 0)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    for params in [
        "k=x",
        "k=",
        "ttl=256",
        "fanin=4294967296",
        "timeout_us=3600000001",
        "k=99999999999999999999",
        "k=0x",
        "k=-1",
        "k=4 k=1e3",
    ] {
        let want = start(&rust, params);
        assert!(want.is_err(), "{params:?} is refused by sum");
        assert_eq!(start(&c, params), want, "{params:?}");
    }
    assert!(start(&c, "ttl=255 timeout_us=3600000000").is_ok());
}

fn concast_spec(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_concast-spec"))
        .args(args)
        .output()
        .expect("runs")
}

/// `concast-spec check` accepts the module the documented build makes: the ABI's exports by
/// name, only `concast` imports (memcpy and memset are the SDK's, not imports).
#[test]
fn concast_spec_check_accepts_the_c_module() {
    if sum_c().is_none() {
        return;
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/mergespecs/sum-c.wasm");
    let out = concast_spec(&[
        "check",
        path.to_str().unwrap(),
        "--json",
        "--param",
        "fanin=3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["abi_version"], 2, "the C SDK builds ABI v2");
    let names = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap().split(' ').next().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names("exports"),
        [
            "memory",
            "concast_abi_version",
            "concast_run",
            "concast_done",
            "concast_init",
            "concast_state_new",
            "concast_build"
        ]
    );
    assert!(
        names("imports").iter().all(|i| i.starts_with("concast.")),
        "{:?}",
        names("imports")
    );
}

/// `concast-spec run` over the example input gives the C and the Rust spec's identical reports
/// (all but the spec's hash).
#[test]
fn concast_spec_run_reports_alike_for_the_c_and_the_rust_sum() {
    if sum_c().is_none() {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let input = dir.join("tests/data/sum.jsonl");
    let report = |name: &str, param: &str| {
        let spec = dir.join(format!("../../build/mergespecs/{name}.wasm"));
        let out = concast_spec(&[
            "run",
            spec.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--json",
            "--param",
            param,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut lines: Vec<serde_json::Value> = out
            .stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        lines.last_mut().unwrap()["summary"]["spec_sha256"] = serde_json::Value::Null;
        lines
    };
    for param in ["fanin=2", "fanin=3", "timeout_us=100"] {
        let want = report("sum", param);
        assert!(want.len() > 2, "{want:?}");
        assert_eq!(report("sum-c", param), want, "{param}");
    }
}
