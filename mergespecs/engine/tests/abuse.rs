//! Hostile and broken specs, run in real wasmtime: each is refused at upload with a readable
//! reason, or quarantines only its own flow (fail-open) while another flow in the same
//! engine keeps merging correctly. Stop times are printed, never asserted.

mod common;

use std::time::Instant;

use common::*;
use concast_engine::{
    EngineConfig, Fault, FlowError, Limits, OutputKind, Outputs, SpecError, Unmerged,
};

/// A minimal spec in WAT whose function bodies a test can replace. Every datagram gets tag
/// 0; `$n` counts merges; by default it never builds (so the engine holds what it merged).
#[derive(Clone)]
struct TestSpec {
    imports: &'static str,
    memory: &'static str,
    abi: &'static str,
    init: &'static str,
    tag: &'static str,
    merge: &'static str,
    done: &'static str,
    build: &'static str,
    extra: &'static str,
}

const COUNT_MERGE: &str = "(global.set $n (i32.add (global.get $n) (i32.const 1))) (i32.const 0)";

impl TestSpec {
    fn new() -> TestSpec {
        TestSpec {
            imports: "",
            memory: "(memory (export \"memory\") 2)",
            abi: "(i32.const 1)",
            init: "(i32.const 0)",
            tag: "(i64.const 0)",
            merge: COUNT_MERGE,
            done: "(i32.const 0)",
            build: "(i32.const 0)",
            extra: "",
        }
    }

    /// Merges twice normally, then runs `abuse` inside the third `concast_merge`.
    fn third_merge(abuse: &'static str) -> TestSpec {
        let merge: &'static str = Box::leak(
            format!("(if (i32.eq (global.get $n) (i32.const 2)) (then {abuse})) {COUNT_MERGE}")
                .into_boxed_str(),
        );
        TestSpec {
            merge,
            ..TestSpec::new()
        }
    }

    fn wasm(&self) -> Vec<u8> {
        wat(&self.text())
    }

    fn text(&self) -> String {
        format!(
            r#"(module
                 (import "concast" "emit" (func $emit (param i32 i32 i32 i32 i32)))
                 {imports}
                 {memory}
                 (global $n (mut i32) (i32.const 0))
                 (func (export "concast_abi_version") (result i32) {abi})
                 (func (export "concast_init") (result i32) {init})
                 (func (export "concast_get_tag") (param $len i32) (result i64) {tag})
                 (func (export "concast_state_new") (param $slot i32) (param $tag i64))
                 (func (export "concast_merge") (param $slot i32) (param $len i32) (result i32) {merge})
                 (func (export "concast_done") (param $slot i32) (result i32) {done})
                 (func (export "concast_build") (param $slot i32) (result i32) {build})
                 {extra})"#,
            imports = self.imports,
            memory = self.memory,
            abi = self.abi,
            init = self.init,
            tag = self.tag,
            merge = self.merge,
            done = self.done,
            build = self.build,
            extra = self.extra,
        )
    }
}

fn upload_error(bytes: &[u8]) -> SpecError {
    let err = engine()
        .load_spec(bytes)
        .expect_err("the module must be refused");
    println!("refused: {err}");
    err
}

/// Runs `bad` on flow (R, 2) next to the `sum` spec on flow (R, 1): the bad flow must be
/// quarantined with a fault matching `expect`, everything it held or had not processed must
/// come back unmerged (fail-open), and flow 1 must merge before and after.
fn quarantines_only_its_flow(bad: &[u8], expect: impl Fn(&Fault) -> bool) -> Fault {
    let mut engine = engine();
    let good = add(&mut engine, &spec_bytes("sum"), 1, "fanin=2");
    let bad_flow = add(&mut engine, bad, 2, "");
    let mut out = Outputs::new();

    engine
        .ingest(good, &[contribution(1, 1, 5, 10)], 0, &mut out)
        .unwrap();
    let batch: Vec<Vec<u8>> = (1..=5)
        .map(|i| contribution(i, 2, 1, i64::from(i)))
        .collect();
    let started = Instant::now();
    engine.ingest(bad_flow, &batch, 1, &mut out).unwrap();
    let took = started.elapsed();

    let stats = engine.stats(bad_flow).unwrap();
    let q = stats
        .quarantine
        .clone()
        .expect("the bad flow is quarantined");
    println!("quarantined after {:?}: {q}", took);
    assert!(expect(&q.fault), "unexpected fault: {q}");
    let fail_open: Vec<&[u8]> = out
        .iter()
        .filter(|o| o.kind == OutputKind::Unmerged(Unmerged::FailOpen))
        .map(|o| o.datagram)
        .collect();
    let mut expected: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
    let mut got = fail_open.clone();
    expected.sort();
    got.sort();
    assert_eq!(
        got, expected,
        "every datagram of the batch comes back unmerged, held ones included"
    );
    assert_eq!(stats.counters.fail_open, 5);
    assert_eq!(stats.counters.traps, 1);
    assert!(
        out.iter().all(|o| o.kind != OutputKind::Merged),
        "nothing half-built leaks out"
    );

    // Later datagrams of the bad flow go through unmerged; the good flow is untouched.
    out.clear();
    engine
        .ingest(bad_flow, &[contribution(9, 2, 1, 1)], 2, &mut out)
        .unwrap();
    assert_eq!(
        out.get(0).unwrap().kind,
        OutputKind::Unmerged(Unmerged::FailOpen)
    );
    engine
        .ingest(good, &[contribution(2, 1, 5, 32)], 3, &mut out)
        .unwrap();
    let m = merged(&out);
    assert_eq!(m.len(), 1);
    assert_eq!(read_contribution(&m[0]).value, 42);
    assert!(engine.stats(good).unwrap().quarantine.is_none());
    q.fault
}

#[test]
fn infinite_loop_is_stopped_by_the_cpu_limit() {
    let spec = TestSpec::third_merge("(loop $forever (br $forever))").wasm();
    quarantines_only_its_flow(&spec, |f| matches!(f, Fault::CpuLimit(_)));
}

/// An idle engine's epoch ticker dozes (engine/src/epoch.rs); a call that runs away after
/// a quiet spell must still be stopped.
#[test]
fn infinite_loop_after_the_engine_was_idle_is_stopped() {
    let spec = TestSpec::third_merge("(loop $forever (br $forever))").wasm();
    let mut engine = engine();
    let bad = add(&mut engine, &spec, 2, "");
    let mut out = Outputs::new();
    let batch: Vec<Vec<u8>> = (1..=2).map(|i| contribution(i, 1, 1, 1)).collect();
    engine.ingest(bad, &batch, 0, &mut out).unwrap();
    // Well past the ticker's idle threshold (100 ticks of 1 ms).
    std::thread::sleep(std::time::Duration::from_millis(400));
    let t = std::time::Instant::now();
    engine
        .ingest(bad, &[contribution(3, 1, 1, 1)], 1, &mut out)
        .unwrap();
    println!("stopped after {:?}", t.elapsed());
    let q = engine.stats(bad).unwrap().quarantine.expect("the flow is quarantined");
    assert!(matches!(q.fault, Fault::CpuLimit(_)), "{:?}", q.fault);
}

#[test]
fn infinite_loop_is_stopped_by_fuel_too() {
    let limits = Limits {
        cpu: concast_engine::CpuLimit::Fuel(5_000_000),
        ..Limits::default()
    };
    let mut engine = concast_engine::Engine::new(EngineConfig {
        node: NODE,
        limits,
        ..EngineConfig::default()
    })
    .unwrap();
    let flow = add(
        &mut engine,
        &TestSpec::third_merge("(loop $forever (br $forever))").wasm(),
        2,
        "",
    );
    let mut out = Outputs::new();
    let batch: Vec<Vec<u8>> = (1..=3).map(|i| contribution(i, 2, 1, 0)).collect();
    let started = Instant::now();
    engine.ingest(flow, &batch, 0, &mut out).unwrap();
    println!("fuel stop after {:?}", started.elapsed());
    let q = engine.stats(flow).unwrap().quarantine.unwrap();
    assert!(matches!(q.fault, Fault::CpuLimit(_)), "{q}");
    assert_eq!(out.len(), 3);
}

#[test]
fn memory_grow_bomb_hits_the_memory_limit() {
    let spec = TestSpec::third_merge(
        "(loop $more (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))",
    )
    .wasm();
    let fault = quarantines_only_its_flow(&spec, |f| matches!(f, Fault::MemoryLimit { .. }));
    assert_eq!(
        fault.to_string(),
        "memory limit: asked for 16908288 bytes of linear memory, the limit is 16777216"
    );
}

#[test]
fn unreachable_trap_quarantines() {
    let spec = TestSpec::third_merge("unreachable").wasm();
    quarantines_only_its_flow(
        &spec,
        |f| matches!(f, Fault::Trap(t) if t.contains("unreachable")),
    );
}

#[test]
fn trap_in_get_tag_quarantines() {
    let spec = TestSpec {
        tag: "(if (i32.eq (global.get $n) (i32.const 2)) (then unreachable)) (i64.const 0)",
        ..TestSpec::new()
    };
    quarantines_only_its_flow(&spec.wasm(), |f| matches!(f, Fault::Trap(_)));
}

#[test]
fn datagrams_taken_from_the_pending_queue_are_not_lost_on_a_trap() {
    let spec = TestSpec {
        imports: r#"(import "concast" "pending_take" (func $take (param i32 i32 i32) (result i32)))"#,
        ..TestSpec::third_merge(
            "(drop (call $take (i32.const 0) (i32.const 0) (i32.const 2048))) unreachable",
        )
    };
    quarantines_only_its_flow(&spec.wasm(), |f| matches!(f, Fault::Trap(_)));
}

#[test]
fn stack_overflow_quarantines() {
    let spec = TestSpec {
        extra: "(func $deep (param i32) (result i32) (call $deep (i32.add (local.get 0) (i32.const 1))))",
        ..TestSpec::third_merge("(drop (call $deep (i32.const 0)))")
    };
    quarantines_only_its_flow(
        &spec.wasm(),
        |f| matches!(f, Fault::Trap(t) if t.contains("stack")),
    );
}

#[test]
fn output_larger_than_allowed_quarantines() {
    let spec = TestSpec {
        done: "(i32.ge_u (global.get $n) (i32.const 3))",
        build: "(call $emit (i32.const 0) (i32.const 70000) (i32.const 17) (i32.const 64) (i32.const 0)) (i32.const 0)",
        ..TestSpec::new()
    };
    let fault = quarantines_only_its_flow(&spec.wasm(), |f| {
        matches!(f, Fault::OutputTooLarge { len: 70000, .. })
    });
    println!("{fault}");
}

#[test]
fn emit_outside_build_is_an_abi_violation() {
    let spec = TestSpec::third_merge(
        "(call $emit (i32.const 0) (i32.const 4) (i32.const 17) (i32.const 64) (i32.const 0))",
    );
    quarantines_only_its_flow(
        &spec.wasm(),
        |f| matches!(f, Fault::Abi(w) if w.contains("emit called outside concast_build")),
    );
}

#[test]
fn out_of_bounds_pointer_is_an_abi_violation() {
    let spec = TestSpec {
        done: "(i32.ge_u (global.get $n) (i32.const 3))",
        build: "(call $emit (i32.const 131000) (i32.const 1000) (i32.const 17) (i32.const 64) (i32.const 0)) (i32.const 0)",
        ..TestSpec::new()
    };
    quarantines_only_its_flow(
        &spec.wasm(),
        |f| matches!(f, Fault::Abi(w) if w.contains("outside linear memory")),
    );
}

#[test]
fn abort_reports_the_spec_message() {
    let spec = TestSpec {
        imports: r#"(import "concast" "abort" (func $abort (param i32 i32)))"#,
        extra: r#"(data (i32.const 70000) "gave up: bad input")"#,
        ..TestSpec::third_merge("(call $abort (i32.const 70000) (i32.const 18))")
    };
    let fault = quarantines_only_its_flow(&spec.wasm(), |f| matches!(f, Fault::Aborted(_)));
    assert_eq!(fault.to_string(), "aborted: gave up: bad input");
}

#[test]
fn too_many_states_quarantines() {
    // Every datagram its own tag: the fourth state passes a limit of 3.
    let limits = Limits {
        states: 3,
        ..Limits::default()
    };
    let mut engine = concast_engine::Engine::new(EngineConfig {
        node: NODE,
        limits,
        ..EngineConfig::default()
    })
    .unwrap();
    let spec = TestSpec {
        tag: "(global.get $n) (i64.extend_i32_u)",
        ..TestSpec::new()
    };
    let flow = add(&mut engine, &spec.wasm(), 2, "");
    let batch: Vec<Vec<u8>> = (1..=5).map(|i| contribution(i, 2, 1, 0)).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 0, &mut out).unwrap();
    let q = engine.stats(flow).unwrap().quarantine.unwrap();
    assert_eq!(q.fault, Fault::TooManyStates { limit: 3 });
    assert_eq!(
        out.iter()
            .filter(|o| o.kind == OutputKind::Unmerged(Unmerged::FailOpen))
            .count(),
        5
    );
}

#[test]
fn held_bytes_limit_quarantines() {
    let limits = Limits {
        held_bytes: 150,
        ..Limits::default()
    };
    let mut engine = concast_engine::Engine::new(EngineConfig {
        node: NODE,
        limits,
        ..EngineConfig::default()
    })
    .unwrap();
    let flow = add(&mut engine, &TestSpec::new().wasm(), 2, "");
    let batch: Vec<Vec<u8>> = (1..=5).map(|i| contribution(i, 2, 1, 0)).collect(); // 60 bytes each
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 0, &mut out).unwrap();
    assert_eq!(
        engine.stats(flow).unwrap().quarantine.unwrap().fault,
        Fault::HeldBytes { limit: 150 }
    );
    assert_eq!(out.len(), 5);
}

/// Loads `spec` into a fresh engine and starts flow (R, 2) with it: what `concast_init` made
/// of the flow.
fn start_flow(spec: &TestSpec) -> Result<concast_engine::FlowSlot, FlowError> {
    let mut engine = engine();
    let spec = engine.load_spec(&spec.wasm()).unwrap();
    engine.add_flow(concast_engine::FlowConfig::new(key(2), spec), 0)
}

#[test]
fn init_that_loops_is_still_stopped() {
    let spec = TestSpec {
        init: "(loop $forever (br $forever)) (i32.const 0)",
        ..TestSpec::new()
    };
    let err = start_flow(&spec).unwrap_err();
    assert!(matches!(
        err,
        FlowError::Refused {
            call: "concast_init",
            fault: Fault::CpuLimit(_)
        }
    ));
}

/// `concast_init` runs once per flow and may set up storage: a few milliseconds of CPU,
/// far past the 1 ms every other call gets, still start the flow (the multiplex spec's
/// arena did not, on a loaded 220-router network).
#[test]
fn init_may_take_longer_than_one_call() {
    // A few milliseconds of CPU: a counted loop of three million iterations.
    let spec = TestSpec {
        init: "(loop $spin (global.set $n (i32.add (global.get $n) (i32.const 1))) \
                 (br_if $spin (i32.lt_u (global.get $n) (i32.const 3000000)))) \
               (global.set $n (i32.const 0)) (i32.const 0)",
        ..TestSpec::new()
    };
    let t = std::time::Instant::now();
    start_flow(&spec).expect("a slow init within its budget starts the flow");
    println!("engine, spec load and init took {:?}", t.elapsed());
}

#[test]
fn init_that_aborts_refuses_the_flow() {
    let spec = TestSpec {
        imports: r#"(import "concast" "abort" (func $abort (param i32 i32)))"#,
        init: "(call $abort (i32.const 0) (i32.const 0)) (i32.const 0)",
        ..TestSpec::new()
    };
    let err = start_flow(&spec).unwrap_err();
    println!("{err}");
    assert!(matches!(
        err,
        FlowError::Refused {
            call: "concast_init",
            fault: Fault::Aborted(_)
        }
    ));
}

#[test]
fn message_buffer_outside_memory_refuses_the_flow() {
    let spec = TestSpec {
        init: "(i32.const 100000)",
        ..TestSpec::new()
    };
    let err = start_flow(&spec).unwrap_err();
    assert!(err.to_string().contains("message buffer 100000"), "{err}");
}

// ---- refused at upload ----

#[test]
fn missing_export_is_refused() {
    let text = TestSpec::new()
        .text()
        .replace("(export \"concast_done\")", "(export \"concast_dome\")");
    let err = upload_error(&wat(&text));
    assert_eq!(
        err,
        SpecError::MissingExport {
            name: "concast_done",
            signature: "(i32) -> i32"
        }
    );
    assert_eq!(
        err.to_string(),
        "missing export `concast_done` (i32) -> i32 (required by concast ABI v1)"
    );
}

#[test]
fn wrong_export_type_is_refused() {
    let text = TestSpec::new().text().replace(
        "(export \"concast_done\") (param $slot i32)",
        "(export \"concast_done\") (param $slot i64)",
    );
    let err = upload_error(&wat(&text));
    assert_eq!(
        err.to_string(),
        "export `concast_done` has type (i64) -> i32; the ABI requires (i32) -> i32"
    );
}

#[test]
fn wasi_import_is_refused() {
    let spec = TestSpec {
        imports: r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
        ..TestSpec::new()
    };
    let err = upload_error(&spec.wasm());
    assert_eq!(
        err.to_string(),
        "imports `wasi_snapshot_preview1`.`fd_write`: only `concast` functions may be imported (no WASI, no clock but the engine's, no I/O)"
    );
}

#[test]
fn unknown_concast_import_and_wrong_signature_are_refused() {
    let spec = TestSpec {
        imports: r#"(import "concast" "open_socket" (func (param i32)))"#,
        ..TestSpec::new()
    };
    assert!(upload_error(&spec.wasm())
        .to_string()
        .starts_with("imports `concast`.`open_socket`: ABI v1 has no such import"));
    let spec = TestSpec {
        imports: r#"(import "concast" "now_us" (func (result i32)))"#,
        ..TestSpec::new()
    };
    assert_eq!(
        upload_error(&spec.wasm()).to_string(),
        "imports `concast`.`now_us`: declared as () -> i32, the ABI defines () -> i64"
    );
    let spec = TestSpec {
        imports: r#"(import "concast" "mem" (memory 1))"#,
        memory: "",
        ..TestSpec::new()
    };
    assert!(upload_error(&spec.wasm())
        .to_string()
        .contains("only functions may be imported"));
}

#[test]
fn wrong_abi_version_is_refused() {
    let spec = TestSpec {
        abi: "(i32.const 3)",
        ..TestSpec::new()
    };
    assert_eq!(
        upload_error(&spec.wasm()).to_string(),
        "concast_abi_version returns 3; this engine supports ABI versions 1 and 2"
    );
    let spec = TestSpec {
        abi: "(loop $l (br $l)) (i32.const 1)",
        ..TestSpec::new()
    };
    assert!(upload_error(&spec.wasm())
        .to_string()
        .contains("ran out of CPU time"));
}

/// A valid module made 2 MiB long by a custom section.
fn two_mib_module() -> Vec<u8> {
    let mut bytes = TestSpec::new().wasm();
    let name = b"padding";
    let payload = vec![0u8; 2 << 20];
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(&payload);
    bytes.push(0); // custom section id
    let mut n = section.len() as u32; // LEB128 length
    loop {
        let byte = (n & 0x7F) as u8;
        n >>= 7;
        bytes.push(if n != 0 { byte | 0x80 } else { byte });
        if n == 0 {
            break;
        }
    }
    bytes.extend_from_slice(&section);
    bytes
}

#[test]
fn two_mib_module_is_refused() {
    let bytes = two_mib_module();
    assert_eq!(
        upload_error(&bytes),
        SpecError::TooLarge {
            size: bytes.len(),
            limit: 1 << 20
        }
    );
    assert_eq!(
        upload_error(&bytes).to_string(),
        format!("module is {} bytes; the limit is 1048576", bytes.len())
    );
    // The same bytes are a valid spec under a larger limit: only the size was wrong.
    let limits = Limits {
        module_bytes: 4 << 20,
        ..Limits::default()
    };
    let mut big = concast_engine::Engine::new(EngineConfig {
        limits,
        ..EngineConfig::default()
    })
    .unwrap();
    big.load_spec(&bytes).expect("valid apart from its size");
}

#[test]
fn garbage_bytes_are_refused() {
    let err = upload_error(b"\x7fELF garbage, not wasm at all");
    assert!(matches!(err, SpecError::NotWasm(_)));
    assert!(
        err.to_string()
            .starts_with("not a valid WebAssembly module:"),
        "{err}"
    );
    assert!(matches!(upload_error(b""), SpecError::NotWasm(_)));
}

#[test]
fn huge_initial_memory_is_refused() {
    let spec = TestSpec {
        memory: "(memory (export \"memory\") 300)",
        ..TestSpec::new()
    };
    assert_eq!(
        upload_error(&spec.wasm()).to_string(),
        "initial linear memory is 19660800 bytes; the per-flow limit is 16777216"
    );
}

#[test]
fn missing_memory_is_refused() {
    let spec = TestSpec {
        memory: "(memory 1)",
        ..TestSpec::new()
    };
    assert_eq!(
        upload_error(&spec.wasm()).to_string(),
        "missing export `memory` (linear memory) (required by concast ABI v1)"
    );
}

#[test]
fn identical_modules_compile_once() {
    let mut engine = engine();
    let a = engine.load_spec(&spec_bytes("sum")).unwrap();
    let b = engine.load_spec(&spec_bytes("sum")).unwrap();
    assert!(a.same(&b), "the second load is a cache hit");
    assert!(!a.same(&engine.load_spec(&spec_bytes("min")).unwrap()));
    assert_eq!(a.info().sha256, concast_engine::sha256(&spec_bytes("sum")));
}

#[test]
fn emitting_a_csp_datagram_is_an_abi_violation() {
    let spec = TestSpec {
        done: "(i32.ge_u (global.get $n) (i32.const 3))",
        build: "(call $emit (i32.const 0) (i32.const 16) (i32.const 253) (i32.const 64) (i32.const 0)) (i32.const 0)",
        ..TestSpec::new()
    };
    quarantines_only_its_flow(
        &spec.wasm(),
        |f| matches!(f, Fault::Abi(w) if w.contains("protocol-253")),
    );
}

#[test]
fn an_out_of_range_protocol_is_an_abi_violation_not_truncated() {
    // 0x1FD would become 253 as a byte.
    let spec = TestSpec {
        done: "(i32.ge_u (global.get $n) (i32.const 3))",
        build: "(call $emit (i32.const 0) (i32.const 16) (i32.const 509) (i32.const 64) (i32.const 0)) (i32.const 0)",
        ..TestSpec::new()
    };
    quarantines_only_its_flow(
        &spec.wasm(),
        |f| matches!(f, Fault::Abi(w) if w.contains("protocol 509")),
    );
}
