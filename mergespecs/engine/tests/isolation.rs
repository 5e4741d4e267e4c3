//! Flows of one spec share its compiled code and its copy-on-write memory image, never their
//! memory: what one flow writes (into the image's pages, into zero pages, into pages it grew)
//! is invisible to a flow of the same spec created after it, with either allocator. With the
//! pooling allocator and one slot, the second flow runs in the very slot the first one used.

mod common;

use common::*;
use concast_engine::{Allocator, Engine, EngineConfig, FlowConfig, FlowSlot, Outputs};

/// At init the spec logs the 8 bytes at 4096 (its data segment: "original") and at 8192 (a
/// zero page outside the image), then overwrites both with "secret!!", grows memory by a page
/// and writes there too, and logs 4096 again (so the test sees the write happened).
const SPY: &str = r#"(module
    (import "concast" "log" (func $log (param i32 i32 i32)))
    (memory (export "memory") 2)
    (data (i32.const 4096) "original")
    (func (export "concast_abi_version") (result i32) (i32.const 1))
    (func (export "concast_init") (result i32)
        (call $log (i32.const 2) (i32.const 4096) (i32.const 8))
        (call $log (i32.const 2) (i32.const 8192) (i32.const 8))
        (i64.store (i32.const 4096) (i64.const 0x2121746572636573))
        (i64.store (i32.const 8192) (i64.const 0x2121746572636573))
        (drop (memory.grow (i32.const 1)))
        (i64.store (i32.const 131072) (i64.const 0x2121746572636573))
        (call $log (i32.const 2) (i32.const 4096) (i32.const 8))
        (i32.const 65536))
    (func (export "concast_get_tag") (param i32) (result i64) (i64.const 1))
    (func (export "concast_state_new") (param i32 i64))
    (func (export "concast_merge") (param i32 i32) (result i32) (i32.const 0))
    (func (export "concast_done") (param i32) (result i32) (i32.const 0))
    (func (export "concast_build") (param i32) (result i32) (i32.const 0)))"#;

const INITIAL_BYTES: usize = 2 * 65_536;

fn engine_with(allocator: Allocator) -> Engine {
    Engine::new(EngineConfig {
        node: NODE,
        allocator,
        ..EngineConfig::default()
    })
    .expect("engine starts")
}

fn spy_flow(engine: &mut Engine, group: u32) -> FlowSlot {
    let spec = engine.load_spec(&wat(SPY)).expect("spec loads");
    engine
        .add_flow(FlowConfig::new(key(group), spec), 0)
        .expect("flow starts")
}

fn logs(engine: &Engine, flow: FlowSlot) -> Vec<String> {
    engine.logs(flow).into_iter().map(|l| l.text).collect()
}

/// What a flow saw at init must be the pristine module: the image's bytes and zeros.
fn assert_pristine(engine: &Engine, flow: FlowSlot) {
    let seen = logs(engine, flow);
    assert_eq!(seen[0], "original", "the image page as the module has it");
    assert_eq!(seen[1], "\0".repeat(8), "a page outside the image is zero");
    assert_eq!(seen[2], "secret!!", "this flow's own write is visible to itself");
    let stats = engine.stats(flow).expect("flow");
    assert_eq!(stats.memory_bytes, INITIAL_BYTES + 65_536, "grown by one page at init");
}

#[test]
fn a_removed_flows_writes_do_not_reach_the_next_flow_in_its_pooled_slot() {
    // One slot: the second flow must reuse the first one's memory slot.
    let mut engine = engine_with(Allocator::Pooling { flows: 1 });
    let first = spy_flow(&mut engine, 1);
    assert_pristine(&engine, first);
    // While the first flow lives, the one slot is taken.
    let spec = engine.load_spec(&wat(SPY)).unwrap();
    assert!(engine.add_flow(FlowConfig::new(key(2), spec), 0).is_err());
    engine.remove_flow(first, 0, &mut Outputs::new()).unwrap();
    for group in 2..5 {
        let next = spy_flow(&mut engine, group);
        assert_pristine(&engine, next);
        engine.remove_flow(next, 0, &mut Outputs::new()).unwrap();
    }
}

#[test]
fn flows_alive_together_do_not_see_each_others_writes() {
    for allocator in [Allocator::OnDemand, Allocator::Pooling { flows: 4 }] {
        let mut engine = engine_with(allocator);
        let flows: Vec<_> = (1..4).map(|g| spy_flow(&mut engine, g)).collect();
        for &flow in &flows {
            assert_pristine(&engine, flow);
        }
    }
}

#[test]
fn a_flow_removed_on_demand_leaves_nothing_to_the_next() {
    let mut engine = engine_with(Allocator::OnDemand);
    let first = spy_flow(&mut engine, 1);
    engine.remove_flow(first, 0, &mut Outputs::new()).unwrap();
    let next = spy_flow(&mut engine, 1);
    assert_pristine(&engine, next);
}
