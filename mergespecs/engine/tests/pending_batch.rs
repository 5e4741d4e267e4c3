//! `pending_scan` and `pending_take_list` (docs/mergespec-abi.md §7-8) as a module sees them:
//! one scan names every queued datagram with its length (not in memory for a v1 spec), a
//! take list out of order takes nothing, an ascending one takes exactly those datagrams.

mod common;

use common::*;
use concast_engine::Outputs;

/// In its first `concast_merge` the spec scans the queue, checks the records, tries the
/// take list [2, 0] (refused) and [0, 2] (taken); any surprise traps (quarantine).
const SCANNER: &str = r#"(module
    (import "concast" "pending_scan" (func $scan (param i32 i32 i32) (result i32)))
    (import "concast" "pending_take_list" (func $take (param i32 i32) (result i32)))
    (memory (export "memory") 2)
    (global $n (mut i32) (i32.const 0))
    (func $check (param i32) (if (i32.eqz (local.get 0)) (then unreachable)))
    (func (export "concast_abi_version") (result i32) (i32.const 1))
    (func (export "concast_init") (result i32) (i32.const 0))
    (func (export "concast_get_tag") (param i32) (result i64) (i64.const 1))
    (func (export "concast_state_new") (param i32 i64))
    (func (export "concast_merge") (param $slot i32) (param $len i32) (result i32)
        (if (i32.eqz (global.get $n)) (then
            ;; four datagrams wait behind this one, each a byte longer than the one before,
            ;; none in memory (v1)
            (call $check (i32.eq (call $scan (i32.const 0) (i32.const 70000) (i32.const 64)) (i32.const 4)))
            (call $check (i32.eq (i32.load (i32.const 70000)) (i32.const 0)))
            (call $check (i32.eq (i32.load (i32.const 70004)) (i32.add (local.get $len) (i32.const 1))))
            (call $check (i32.eq (i32.load (i32.const 70028)) (i32.add (local.get $len) (i32.const 4))))
            ;; from the third on: two records
            (call $check (i32.eq (call $scan (i32.const 2) (i32.const 70000) (i32.const 64)) (i32.const 2)))
            ;; out of order: refused, nothing taken
            (i32.store (i32.const 70600) (i32.const 2))
            (i32.store (i32.const 70604) (i32.const 0))
            (call $check (i32.eq (call $take (i32.const 70600) (i32.const 2)) (i32.const -1)))
            (call $check (i32.eq (call $scan (i32.const 0) (i32.const 70000) (i32.const 64)) (i32.const 4)))
            ;; ascending: both taken
            (i32.store (i32.const 70600) (i32.const 0))
            (i32.store (i32.const 70604) (i32.const 2))
            (call $check (i32.eq (call $take (i32.const 70600) (i32.const 2)) (i32.const 2)))
            ;; what is left is the second and fourth of the queue, in order
            (call $check (i32.eq (call $scan (i32.const 0) (i32.const 70000) (i32.const 64)) (i32.const 2)))
            (call $check (i32.eq (i32.load (i32.const 70004)) (i32.add (local.get $len) (i32.const 2))))
            (call $check (i32.eq (i32.load (i32.const 70012)) (i32.add (local.get $len) (i32.const 4))))))
        (global.set $n (i32.add (global.get $n) (i32.const 1)))
        (i32.const 0))
    (func (export "concast_done") (param i32) (result i32) (i32.const 0))
    (func (export "concast_build") (param i32) (result i32) (i32.const 0)))"#;

#[test]
fn a_scan_names_the_queue_and_a_take_list_takes_exactly_its_datagrams() {
    let mut engine = engine();
    let flow = add(&mut engine, &wat(SCANNER), 1, "");
    let batch: Vec<Vec<u8>> =
        (0..5u8).map(|i| datagram(std::net::Ipv4Addr::new(10, 0, 1, i), 1, 64, &vec![i; 10 + usize::from(i)])).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 0, &mut out).unwrap();
    let stats = engine.stats(flow).unwrap();
    assert!(stats.quarantine.is_none(), "{:?}", stats.quarantine);
    assert_eq!(stats.counters.received, 5);
    assert_eq!(stats.counters.taken, 2, "the second and fourth datagrams were taken");
    // `merged` counts taken ones too: 3 merge calls + 2 taken; a taken datagram merged again
    // would make it 7.
    assert_eq!(stats.counters.merged, 5, "each datagram merged once");
}

#[test]
fn take_list_outside_a_state_call_quarantines() {
    // pending_take_list in concast_get_tag (no current state) is an ABI violation.
    let spec = SCANNER.replace(
        "(func (export \"concast_get_tag\") (param i32) (result i64) (i64.const 1))",
        "(func (export \"concast_get_tag\") (param i32) (result i64) (drop (call $take (i32.const 70600) (i32.const 0))) (i64.const 1))",
    );
    let mut engine = engine();
    let flow = add(&mut engine, &wat(&spec), 1, "");
    engine.ingest(flow, &[contribution(1, 1, 5, 1)], 0, &mut Outputs::new()).unwrap();
    let q = engine.stats(flow).unwrap().quarantine.expect("quarantined");
    assert!(q.to_string().contains("pending_take_list"), "{q}");
}
