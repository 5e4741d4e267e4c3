//! The per-flow CPU budget (`Limits::cpu_per_second`): a flow whose calls are each short
//! but add up — a timer flood, an expensive merge under traffic — is quarantined once it has
//! used its budget within one second, while a cheap flow in the same engine keeps merging and
//! is charged far less. Real wasmtime, the thread's real CPU time; engine time is virtual.

mod common;

use std::time::Duration;

use common::*;
use concast_engine::{Engine, EngineConfig, Fault, Limits, Outputs};

/// Burns roughly 100 µs of CPU in every `concast_merge` (a counted loop, well inside the
/// 1 ms per-call limit), never builds.
const SLOW_MERGE: &str = r#"(module
  (memory (export "memory") 2)
  (func (export "concast_abi_version") (result i32) (i32.const 1))
  (func (export "concast_init") (result i32) (i32.const 65536))
  (func (export "concast_get_tag") (param i32) (result i64) (i64.const 0))
  (func (export "concast_state_new") (param i32 i64))
  (func (export "concast_merge") (param i32 i32) (result i32) (local $i i32)
    (local.set $i (i32.const 100000))
    (loop $spin (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                (br_if $spin (local.get $i)))
    (i32.const 0))
  (func (export "concast_done") (param i32) (result i32) (i32.const 0))
  (func (export "concast_build") (param i32) (result i32) (i32.const 0)))"#;

/// Re-arms its state's timer for "now" from every timeout: it would fire on every pass of
/// a daemon's loop for ever.
const TIMER_FLOOD: &str = r#"(module
  (import "concast" "set_timer" (func $set_timer (param i64)))
  (import "concast" "now_us" (func $now (result i64)))
  (memory (export "memory") 2)
  (func (export "concast_abi_version") (result i32) (i32.const 1))
  (func (export "concast_init") (result i32) (i32.const 65536))
  (func (export "concast_get_tag") (param i32) (result i64) (i64.const 0))
  (func (export "concast_state_new") (param i32 i64))
  (func (export "concast_merge") (param i32 i32) (result i32) (call $set_timer (call $now)) (i32.const 0))
  (func (export "concast_done") (param i32) (result i32) (i32.const 0))
  (func (export "concast_timeout") (param i32) (result i32) (call $set_timer (call $now)) (i32.const 0))
  (func (export "concast_build") (param i32) (result i32) (i32.const 0)))"#;

fn engine_with_budget(budget: Option<Duration>) -> Engine {
    Engine::new(EngineConfig {
        node: NODE,
        limits: Limits { cpu_per_second: budget, ..Limits::default() },
        ..EngineConfig::default()
    })
    .expect("engine starts")
}

const BUDGET: Duration = Duration::from_millis(20);

#[test]
fn an_expensive_merge_is_quarantined_by_the_budget_and_a_cheap_flow_is_not() {
    let mut e = engine_with_budget(Some(BUDGET));
    let good = add(&mut e, &spec_bytes("sum"), 1, "fanin=2");
    let slow = add(&mut e, &wat(SLOW_MERGE), 2, "");
    let mut out = Outputs::new();
    let mut sums = 0;
    // 1000 datagrams each, 1 ms of engine time apart: all within one second.
    for i in 0..1000u64 {
        if e.stats(slow).unwrap().quarantine.is_none() {
            e.ingest(slow, &[contribution(1, 2, 1, 1)], i * 1000, &mut out).unwrap();
        }
        let pair = [contribution(1, 1, i as u32, 1), contribution(2, 1, i as u32, 2)];
        out.clear();
        e.ingest(good, &pair, i * 1000 + 1, &mut out).unwrap();
        sums += merged(&out).iter().map(|d| read_contribution(d).value).sum::<i64>();
    }
    let bad = e.stats(slow).unwrap();
    let q = bad.quarantine.expect("the expensive flow is quarantined");
    assert!(matches!(q.fault, Fault::CpuBudget { budget_us: 20_000, .. }), "{q}");
    assert_eq!(q.fault.kind(), "cpu_budget");
    // Quarantined once over the budget: well before all 1000 datagrams, each about 0.1 ms.
    assert!(bad.counters.received < 1000, "{:?}", bad.counters);
    assert!(bad.counters.cpu_us >= 20_000, "{:?}", bad.counters);
    let fine = e.stats(good).unwrap();
    assert!(fine.quarantine.is_none());
    assert_eq!(sums, 3 * 1000, "the cheap flow merged every pair exactly");
    assert!(fine.counters.cpu_us > 0 && fine.counters.cpu_us < bad.counters.cpu_us, "{:?}", fine.counters);
}

#[test]
fn the_same_cost_spread_over_seconds_stays_within_the_budget() {
    let mut e = engine_with_budget(Some(BUDGET));
    let slow = add(&mut e, &wat(SLOW_MERGE), 2, "");
    let mut out = Outputs::new();
    // Ten datagrams per second of engine time: about 2 ms of CPU per second.
    for i in 0..50u64 {
        e.ingest(slow, &[contribution(1, 2, 1, 1)], i * 100_000, &mut out).unwrap();
    }
    let s = e.stats(slow).unwrap();
    assert!(s.quarantine.is_none(), "{:?}", s.quarantine);
    assert_eq!(s.counters.merged, 50);
    assert!(s.counters.cpu_us > 0);
}

#[test]
fn a_timer_flood_is_quarantined_by_the_budget() {
    let mut e = engine_with_budget(Some(BUDGET));
    let flood = add(&mut e, &wat(TIMER_FLOOD), 3, "");
    let mut out = Outputs::new();
    e.ingest(flood, &[contribution(1, 3, 1, 1)], 0, &mut out).unwrap();
    // A daemon's loop: always a timer due, one engine microsecond later.
    let mut now = 1;
    while let Some(at) = e.next_deadline() {
        now = at.max(now + 1);
        e.advance(now, &mut out);
        assert!(now < 1_000_000, "still firing after a second of engine time");
    }
    let s = e.stats(flood).unwrap();
    let q = s.quarantine.expect("quarantined");
    assert_eq!(q.fault.kind(), "cpu_budget", "{q}");
    assert!(s.counters.timer_fires > 100, "{:?}", s.counters);
    assert_eq!(s.counters.fail_open, 1, "the held datagram went on unmerged");
    assert_eq!(e.timers_armed(), 0);
}

#[test]
fn without_a_budget_nothing_is_measured() {
    let mut e = engine_with_budget(None);
    let slow = add(&mut e, &wat(SLOW_MERGE), 2, "");
    let mut out = Outputs::new();
    for i in 0..200u64 {
        e.ingest(slow, &[contribution(1, 2, 1, 1)], i, &mut out).unwrap();
    }
    let s = e.stats(slow).unwrap();
    assert!(s.quarantine.is_none());
    assert_eq!(s.counters.cpu_us, 0);
}
