//! Host calls of the Rust SDK's `.wasm` specs (docs/benchmarks.md, session 15): within one
//! export call the SDK asks the engine for the flow's clock and path MTU once, so a
//! `concast_run` over many datagrams does not make an import call per datagram for them;
//! and it asks again in the next call, so a clock that moved or a path MTU that changed
//! between calls is seen exactly as the native spec (which reads them directly) sees it.

mod bundled;
mod mplex_input;

use std::path::PathBuf;

use bundled::*;
use concast_engine::OutputKind;
use concast_spec_multiplex::Multiplex;

const BATCH: usize = 64;

fn v1_multiplex() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/mergespecs/v1/multiplex.wasm");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}. Build the specs first: `make specs`", path.display()))
}

/// The benchmark's input (benches/multiplex.rs): one-record MplexPkts of distinct senders,
/// each allowed 2 ms here, in batches of 64.
fn batches(n: usize) -> Vec<Vec<Vec<u8>>> {
    (0..n)
        .map(|b| {
            (0..BATCH)
                .map(|i| mplex_input::one_record(b * BATCH + i, R, G, (20_000, 2_000), &[0x50; 20]))
                .collect()
        })
        .collect()
}

/// Host calls per datagram merged by `spec` over 16 batches 10 µs apart, as the benchmark
/// feeds them.
fn host_calls_per_datagram(spec: &[u8]) -> f64 {
    let mut run = Run::new(&Setup::params(""), |e| e.load_spec(spec).expect("spec loads"));
    for (k, batch) in batches(16).iter().enumerate() {
        run.at(10 * k as u64, batch);
    }
    let stats = run.stats();
    assert_eq!(stats.quarantine, None);
    assert_eq!(stats.counters.merged, 16 * BATCH as u64);
    stats.host_calls as f64 / stats.counters.merged as f64
}

#[test]
fn a_v2_run_asks_for_the_clock_and_path_mtu_once_not_per_datagram() {
    // ABI v1: every export call is a new SDK host, so each datagram's get_tag (MTU),
    // merge (MTU, clock) and done (clock) ask again: the counter counts.
    let v1 = host_calls_per_datagram(&v1_multiplex());
    // ABI v2: a run over up to 64 datagrams asks each once (and sets a bundle's timer
    // once); the SDK asked per datagram before session 15 (4 per datagram).
    let v2 = host_calls_per_datagram(&wasm("multiplex"));
    println!("multiplex host calls per datagram: v1 {v1:.2}, v2 {v2:.2}");
    assert!(v1 >= 3.0, "v1: {v1}");
    assert!(v2 < 0.5, "v2: {v2}");
}

#[test]
fn a_path_mtu_changed_between_batches_is_seen_by_the_next_run() {
    // Bundles of 52 records at MTU 1500; from the third batch on the path takes 576 bytes,
    // so bundles shrink at once. A value kept past its call would go on filling 1500.
    let input = batches(6);
    let run = both::<Multiplex>("multiplex", &Setup::params(""), |run| {
        for (k, batch) in input.iter().enumerate() {
            if k == 2 {
                run.engine.set_path_mtu(run.flow, 576).unwrap();
            }
            run.at(1_000 * k as u64, batch);
        }
        run.until(1_000_000);
    });
    let sizes: Vec<usize> = run.of_kind(OutputKind::Merged).iter().map(|(_, d)| d.len()).collect();
    assert!(sizes.iter().any(|&s| s > 576), "bundles before the change fill 1500: {sizes:?}");
    let last = sizes.iter().rev().take(4);
    assert!(last.clone().all(|&s| s <= 576), "bundles after it fit 576: {sizes:?}");
}

#[test]
fn the_clock_is_asked_again_in_every_call() {
    // Batches 300 µs apart and bundles that wait 2 ms: each bundle's deadline and the
    // DelayedSoFar it carries come from the clock of the run that opened it and of the
    // build; `both` checks the .wasm forwards the same bytes at the same times as native.
    let input = batches(12);
    let run = both::<Multiplex>("multiplex", &Setup::params(""), |run| {
        for (k, batch) in input.iter().enumerate() {
            run.at(300 * k as u64, &batch[..20]);
        }
        run.until(1_000_000);
    });
    let times: Vec<u64> = run.of_kind(OutputKind::Merged).iter().map(|(at, _)| *at).collect();
    assert!(times.windows(2).any(|w| w[0] != w[1]), "bundles leave at different times: {times:?}");
}
