//! The bounded pool the daemons use (`Allocator::Bounded`): slots sized to the flow memory
//! limit, a known address-space reservation, and flows beyond the pool's slots run on demand,
//! counted, merging and sandboxed exactly as pooled ones.

mod common;

use common::*;
use std::sync::{Mutex, MutexGuard};
use concast_engine::{
    Allocator, Engine, EngineConfig, Fault, FlowSlot, Limits, OutputKind, Outputs, Unmerged,
    POOL_SLOT_SPAN,
};

/// The tests of this file run one at a time: one measures the process's address space around
/// a pool's creation, which another test's engine starting or dropping beside it would skew
/// (a CI run saw two 4 GiB slots go missing that way).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn bounded(slots: u32) -> Engine {
    Engine::new(EngineConfig {
        node: NODE,
        allocator: Allocator::Bounded { slots },
        ..EngineConfig::default()
    })
    .expect("engine starts")
}

/// A v1 spec that merges nothing and runs `merge` in `concast_merge`.
fn spec_merging(merge: &str) -> Vec<u8> {
    wat(&format!(
        r#"(module
             (memory (export "memory") 2)
             (func (export "concast_abi_version") (result i32) (i32.const 1))
             (func (export "concast_init") (result i32) (i32.const 0))
             (func (export "concast_get_tag") (param i32) (result i64) (i64.const 1))
             (func (export "concast_state_new") (param i32 i64))
             (func (export "concast_merge") (param i32 i32) (result i32) {merge})
             (func (export "concast_done") (param i32) (result i32) (i32.const 0))
             (func (export "concast_build") (param i32) (result i32) (i32.const 0)))"#
    ))
}

/// Two contributions to key 5 of `group` merge into one datagram carrying their sum.
fn merges(engine: &mut Engine, flow: FlowSlot, group: u32, now: u64) {
    let mut out = Outputs::new();
    let batch = [contribution(1, group, 5, 40), contribution(2, group, 5, 2)];
    engine.ingest(flow, &batch, now, &mut out).unwrap();
    let m = merged(&out);
    assert_eq!(m.len(), 1, "flow {group} merges its two contributions");
    assert_eq!(read_contribution(&m[0]).value, 42);
}

#[test]
fn flows_beyond_the_slots_run_on_demand_and_are_counted() {
    let _serial = serial();
    let mut engine = bounded(2);
    let sum = spec_bytes("sum");
    let pooled: Vec<FlowSlot> = (1..=2).map(|g| add(&mut engine, &sum, g, "fanin=2")).collect();
    assert_eq!(engine.pool_fallbacks(), 0, "two flows fit two slots");
    let overflow: Vec<FlowSlot> = (3..=5).map(|g| add(&mut engine, &sum, g, "fanin=2")).collect();
    assert_eq!(engine.pool_fallbacks(), 3, "each flow past the pool is counted");
    for (g, &flow) in (1..).zip(pooled.iter().chain(&overflow)) {
        merges(&mut engine, flow, g, 10);
    }
    // A freed slot is taken again by the next flow: no fallback.
    engine.remove_flow(pooled[0], 20, &mut Outputs::new()).unwrap();
    let again = add(&mut engine, &sum, 6, "fanin=2");
    assert_eq!(engine.pool_fallbacks(), 3);
    merges(&mut engine, again, 6, 30);
    // A spec uploaded while the pool is full still loads (its ABI probe runs on demand).
    let other = spec_merging("(i32.const 0)");
    engine.load_spec(&other).expect("a new spec loads with the pool full");
    assert_eq!(engine.pool_fallbacks(), 4);
}

#[test]
fn a_plain_engine_counts_no_fallbacks() {
    let _serial = serial();
    let mut engine = engine();
    let sum = spec_bytes("sum");
    for g in 1..=3 {
        add(&mut engine, &sum, g, "fanin=2");
    }
    assert_eq!(engine.pool_fallbacks(), 0);
}

/// A looping spec is stopped by its CPU limit and quarantined both in a pool slot and in an
/// on-demand sandbox past the pool (the epoch ticker drives both engines).
#[test]
fn a_looping_spec_is_stopped_in_the_pool_and_past_it() {
    let _serial = serial();
    let mut engine = bounded(1);
    let looping = spec_merging("(loop $forever (br $forever)) (i32.const 0)");
    let in_pool = add(&mut engine, &looping, 1, "");
    let past_pool = add(&mut engine, &looping, 2, "");
    assert_eq!(engine.pool_fallbacks(), 1);
    for (g, flow) in [(1, in_pool), (2, past_pool)] {
        let mut out = Outputs::new();
        engine.ingest(flow, &[contribution(1, g, 5, 1)], 0, &mut out).unwrap();
        let q = engine.stats(flow).unwrap().quarantine.expect("quarantined");
        assert!(matches!(q.fault, Fault::CpuLimit(_)), "flow {g}: {q}");
        assert_eq!(out.get(0).unwrap().kind, OutputKind::Unmerged(Unmerged::FailOpen));
    }
}

/// A slot reserves only the memory limit: an access past the flow's memory but inside the
/// slot's reservation traps, pooled or not.
#[test]
fn an_access_past_memory_inside_the_reservation_traps() {
    let _serial = serial();
    let mut engine = bounded(1);
    // Memory is two pages; 1 MiB is inside the 16 MiB reservation but not accessible.
    let reader = spec_merging("(drop (i64.load (i32.const 1048576))) (i32.const 0)");
    let in_pool = add(&mut engine, &reader, 1, "");
    let past_pool = add(&mut engine, &reader, 2, "");
    assert_eq!(engine.pool_fallbacks(), 1);
    for (g, flow) in [(1, in_pool), (2, past_pool)] {
        engine.ingest(flow, &[contribution(1, g, 5, 1)], 0, &mut Outputs::new()).unwrap();
        let q = engine.stats(flow).unwrap().quarantine.expect("quarantined");
        assert!(matches!(&q.fault, Fault::Trap(t) if t.contains("out of bounds")), "flow {g}: {q}");
    }
}

/// Without bounds checks in the compiled code, the guard pages are what stop an access: one
/// anywhere past the flow's memory in the 32-bit index range, with or without a constant
/// offset, traps and quarantines the flow (pooled or past the pool), and one whose offset is
/// too large for the guard to cover is checked explicitly and traps too, rather than
/// reaching another slot.
#[test]
fn an_access_anywhere_past_memory_traps() {
    let _serial = serial();
    let mut engine = bounded(8);
    // (index, constant offset) of an 8-byte load; memory is two pages.
    let accesses: [(u32, u32); 6] = [
        (16 << 20, 0),                   // just past the 16 MiB reservation, in the guard
        (2 << 30, 0),                    // the middle of the index range
        (u32::MAX - 7, 0),               // the last 8 bytes a 32-bit index reaches
        (u32::MAX - 7, 16 << 20),        // past 4 GiB by a constant offset the guard covers
        (u32::MAX - 7, (32 << 20) + 8),  // past the slot: checked explicitly
        (131_064, 1 << 30),              // in memory by index, past it by offset
    ];
    let sum = spec_bytes("sum");
    let good = add(&mut engine, &sum, 100, "fanin=2");
    for (g, (index, offset)) in (1..).zip(accesses) {
        let reader = spec_merging(&format!(
            "(drop (i64.load offset={offset} (i32.const {}))) (i32.const 0)",
            index as i32
        ));
        let flow = add(&mut engine, &reader, g, "");
        engine.ingest(flow, &[contribution(1, g, 5, 1)], 0, &mut Outputs::new()).unwrap();
        let q = engine.stats(flow).unwrap().quarantine.expect("quarantined");
        assert!(
            matches!(&q.fault, Fault::Trap(t) if t.contains("out of bounds")),
            "index {index:#x} offset {offset:#x}: {q}"
        );
    }
    // Past the pool (on demand, same layout) as well.
    let reader = spec_merging("(drop (i64.load (i32.const -8))) (i32.const 0)");
    let mut full = bounded(1);
    add(&mut full, &sum, 100, "fanin=2");
    let past = add(&mut full, &reader, 1, "");
    // Two: the new spec's ABI probe and its flow, both past the full pool.
    assert_eq!(full.pool_fallbacks(), 2);
    full.ingest(past, &[contribution(1, 1, 5, 1)], 0, &mut Outputs::new()).unwrap();
    let q = full.stats(past).unwrap().quarantine.expect("quarantined");
    assert!(matches!(&q.fault, Fault::Trap(t) if t.contains("out of bounds")), "{q}");
    // The other flows merge on.
    merges(&mut engine, good, 100, 10);
}

/// The memory limit holds in a pool slot and past the pool: a spec growing its memory past
/// 16 MiB is stopped at the limit and quarantined.
#[test]
fn a_memory_grow_bomb_stops_at_the_limit_in_the_pool_and_past_it() {
    let _serial = serial();
    let mut engine = bounded(1);
    let bomb = spec_merging(
        "(loop $more (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) (i32.const 0)",
    );
    let in_pool = add(&mut engine, &bomb, 1, "");
    let past_pool = add(&mut engine, &bomb, 2, "");
    assert_eq!(engine.pool_fallbacks(), 1);
    let limit = Limits::default().memory_bytes;
    for (g, flow) in [(1, in_pool), (2, past_pool)] {
        engine.ingest(flow, &[contribution(1, g, 5, 1)], 0, &mut Outputs::new()).unwrap();
        let stats = engine.stats(flow).unwrap();
        let q = stats.quarantine.expect("quarantined");
        assert!(matches!(q.fault, Fault::MemoryLimit { limit: l, .. } if l == limit), "flow {g}: {q}");
        assert!(stats.memory_bytes <= limit, "flow {g} holds {} bytes", stats.memory_bytes);
    }
}

/// The pool's reservation is what [`Allocator::reserved_bytes`] says: slots of
/// [`POOL_SLOT_SPAN`] (memory limit plus guard) and one guard before the first, reserved up
/// front as address space only: the process's resident memory barely moves.
#[test]
fn the_pool_reserves_slots_of_the_index_range() {
    let _serial = serial();
    let limits = Limits::default();
    let slots = 64;
    let expected = u64::from(slots) * POOL_SLOT_SPAN + (POOL_SLOT_SPAN - limits.memory_bytes as u64);
    assert_eq!(Allocator::Bounded { slots }.reserved_bytes(&limits), Some(expected));
    let (before, rss_before) = (vm_size(), rss());
    let engine = bounded(slots);
    let added = vm_size() - before;
    let rss_added = rss().saturating_sub(rss_before);
    println!(
        "64 slots: {} MiB of address space (pool memories {} MiB), resident +{} KiB",
        added >> 20,
        expected >> 20,
        rss_added >> 10
    );
    assert!(added >= expected, "the slots are reserved up front: {added}");
    // Instances and tables have their own (small) slabs.
    assert!(added < expected + (1 << 30), "{added} bytes added for {expected} of memories");
    assert!(rss_added < 64 << 20, "reserving committed {rss_added} bytes");
    drop(engine);
}

fn rss() -> u64 {
    status_kib("VmRSS:") << 10
}

fn vm_size() -> u64 {
    status_kib("VmSize:") << 10
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
}
