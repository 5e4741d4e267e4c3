//! Speed of the bundled `multiplex` spec (`cargo bench -p concast-engine --bench multiplex`):
//! small datagrams bundled per second through one flow on one core, the `.wasm` module
//! against the same Rust run natively in the same engine, batched as the module is (ABI v2's
//! run loop with the fused tag-and-merge step, `SpecRef::native_batched`). Targets (shared/DESIGN.md): at
//! least 1,000,000 pkt/s; Wasm at most 5x slower than native. Prints a table, then `csv,...` lines like the
//! engine bench. Needs build/mergespecs/multiplex.wasm (`make specs`).
//!
//! Then the share of ACKs combined on a bursty trace (tests/bursty) at MaxLocalDelay 1, 5,
//! 10, 20 and 50 ms, for the module under test and, if `MPLEX_BEFORE_WASM` names another
//! module (an older build, say), for that one too: the before/after figure of a rule change.
//! `MPLEX_WASM` replaces build/mergespecs/multiplex.wasm.
//!
//! The input is what senders' hosts send: one-record MplexPkts (IPv4 + Concast ID option,
//! 28 + 16 + 8 + 20 = 72 bytes, a TCP ACK inside) from 4,096 senders in turn, in batches of
//! 64, toward one receiver over a 1500-byte path, so bundles fill to 52 records.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

use concast_engine::{Engine, EngineConfig, FlowConfig, FlowId, Outputs, SpecRef};
use concast_spec_multiplex::Multiplex;

#[path = "../tests/bursty/mod.rs"]
mod bursty;

const R: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);
const BATCH: usize = 64;
const SENDERS: usize = 4_096;

/// A sender's one-record MplexPkt carrying a 20-byte TCP header.
fn one_record(sender: usize, delays: (u32, u32)) -> Vec<u8> {
    bursty::mplex_input::one_record(sender, R, 1, delays, &[0x50; 20])
}

/// Datagrams bundled per second, and records per forwarded bundle.
fn throughput(
    spec: impl FnOnce(&mut Engine) -> SpecRef,
    delays: (u32, u32),
    datagrams: usize,
) -> (f64, f64) {
    let mut engine = Engine::new(EngineConfig {
        node: Ipv4Addr::new(10, 0, 0, 254),
        ..EngineConfig::default()
    })
    .unwrap();
    let spec = spec(&mut engine);
    let flow = engine
        .add_flow(FlowConfig::new(FlowId::new(R, 1), spec), 0)
        .unwrap();
    let input: Vec<Vec<u8>> = (0..SENDERS).map(|s| one_record(s, delays)).collect();
    let batches: Vec<&[Vec<u8>]> = input.chunks(BATCH).collect();
    let mut out = Outputs::new();
    let mut now = 0;
    let mut run = |engine: &mut Engine, rounds: usize| {
        for i in 0..rounds {
            now += 10;
            engine
                .ingest(flow, batches[i % batches.len()], now, &mut out)
                .unwrap();
            black_box(out.len());
            out.clear();
        }
    };
    run(&mut engine, 200); // warm-up
    let before = engine.stats(flow).unwrap().counters;
    let rounds = datagrams / BATCH;
    let started = Instant::now();
    run(&mut engine, rounds);
    let secs = started.elapsed().as_secs_f64();
    let stats = engine.stats(flow).unwrap();
    assert!(stats.quarantine.is_none(), "{:?}", stats.quarantine);
    let c = stats.counters;
    assert_eq!(
        c.merged - before.merged,
        (rounds * BATCH) as u64,
        "every datagram bundled"
    );
    let per_bundle = (c.merged - before.merged) as f64 / (c.out - before.out).max(1) as f64;
    ((rounds * BATCH) as f64 / secs, per_bundle)
}

/// Datagrams bundled per second by each spec, measured interleaved: each flow in turn
/// ingests `CHUNK` batches, so a shared machine's drift slows all alike and ratios hold.
fn paired(specs: &[&dyn Fn(&mut Engine) -> SpecRef], delays: (u32, u32), datagrams: usize) -> Vec<f64> {
    const CHUNK: usize = 16;
    let input: Vec<Vec<u8>> = (0..SENDERS).map(|s| one_record(s, delays)).collect();
    let batches: Vec<&[Vec<u8>]> = input.chunks(BATCH).collect();
    let mut runs: Vec<(Engine, concast_engine::FlowSlot)> = specs
        .iter()
        .map(|spec| {
            let mut engine = Engine::new(EngineConfig { node: Ipv4Addr::new(10, 0, 0, 254), ..EngineConfig::default() }).unwrap();
            let spec = spec(&mut engine);
            let flow = engine.add_flow(FlowConfig::new(FlowId::new(R, 1), spec), 0).unwrap();
            (engine, flow)
        })
        .collect();
    let mut out = Outputs::new();
    let mut spent = vec![std::time::Duration::ZERO; runs.len()];
    let rounds = datagrams / BATCH / CHUNK;
    let mut now = 0;
    for (warm_up, n) in [(true, 20), (false, rounds)] {
        for r in 0..n {
            now += 10 * CHUNK as u64;
            for ((engine, flow), spent) in runs.iter_mut().zip(spent.iter_mut()) {
                let started = Instant::now();
                for c in 0..CHUNK {
                    let at = now + 10 * c as u64; // 10 µs per batch, as `throughput`
                    engine.ingest(*flow, batches[(r * CHUNK + c) % batches.len()], at, &mut out).unwrap();
                    black_box(out.len());
                    out.clear();
                }
                if !warm_up {
                    *spent += started.elapsed();
                }
            }
        }
    }
    for (engine, flow) in &runs {
        assert!(engine.stats(*flow).unwrap().quarantine.is_none());
    }
    spent.iter().map(|d| (rounds * CHUNK * BATCH) as f64 / d.as_secs_f64()).collect()
}

fn main() {
    let datagrams: usize = std::env::var("CONCAST_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000_000);
    let default = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../build/mergespecs/multiplex.wasm");
    let path = std::env::var_os("MPLEX_WASM").map_or(default, Into::into);
    let wasm = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `make specs` first)", path.display()));

    // MPLEX_PAIRED=1: the native peer, this module and MPLEX_BEFORE_WASM (if given)
    // interleaved, both modes, five times. The peer runs batched as the module does (ABI
    // v2's run loop, fused tag-and-merge: `SpecRef::native_batched`); with a before module
    // the two-step native of sessions 12-15 (ABI v1 path, `SpecRef::native`) runs too, the
    // peer the before figures were measured against.
    if std::env::var_os("MPLEX_PAIRED").is_some() {
        let before = std::env::var_os("MPLEX_BEFORE_WASM").map(|p| std::fs::read(p).unwrap());
        let native = |_: &mut Engine| SpecRef::native_batched::<Multiplex>();
        let two_step = |_: &mut Engine| SpecRef::native::<Multiplex>();
        let now = |e: &mut Engine| e.load_spec(&wasm).unwrap();
        let old = |e: &mut Engine| e.load_spec(before.as_deref().unwrap()).unwrap();
        let mut specs: Vec<&dyn Fn(&mut Engine) -> SpecRef> = vec![&native, &now];
        if before.is_some() {
            specs.push(&old);
            specs.push(&two_step);
        }
        for _ in 0..5 {
            for (mode, delays) in [("2 ms local delay", (20_000, 2_000)), ("zero delay", (0, 0))] {
                let r = paired(&specs, delays, datagrams);
                let before_text = match r.get(2..4) {
                    Some(&[b, n1]) => format!(
                        ", before {b:.0} pkt/s ({:.3}x the two-step native {n1:.0} pkt/s)",
                        n1 / b
                    ),
                    _ => String::new(),
                };
                println!("paired multiplex, {mode}: native {:.0} pkt/s, wasm {:.0} pkt/s ({:.3}x){before_text}", r[0], r[1], r[0] / r[1]);
            }
        }
        return;
    }
    // For `perf record`: MPLEX_ONLY=native|native-v1|wasm runs only that path, both modes,
    // then exits (native: the batched peer; native-v1: the two-step native of sessions 12-15).
    if let Ok(only) = std::env::var("MPLEX_ONLY") {
        let pick = std::env::var("MPLEX_MODE").unwrap_or_default();
        for (mode, delays) in [("2 ms local delay", (20_000, 2_000)), ("zero delay", (0, 0))] {
            if !pick.is_empty() && !mode.starts_with(pick.as_str()) {
                continue; // MPLEX_MODE=2 or MPLEX_MODE=zero picks one
            }
            let (rate, _) = match only.as_str() {
                "native" => throughput(|_| SpecRef::native_batched::<Multiplex>(), delays, datagrams),
                "native-v1" => throughput(|_| SpecRef::native::<Multiplex>(), delays, datagrams),
                _ => throughput(
                    |e| {
                        let spec = e.load_spec(&wasm).unwrap();
                        write_perf_map(&spec);
                        spec
                    },
                    delays,
                    datagrams,
                ),
            };
            println!("multiplex {only}, {mode}: {rate:.0} pkt/s");
        }
        return;
    }
    println!(
        "\nmultiplex spec ({datagrams} one-record MplexPkts per run, batches of {BATCH}, MTU 1500)"
    );
    println!(
        "{:<46} {:>12} {:<6} {:>12} vs peer",
        "what", "figure", "unit", "recs/bundle"
    );
    let mut csv = Vec::new();
    // Bundles that fill to the MTU while waiting (2 ms local delay), and zero-delay mode where
    // each batch is bundled at once from the pending queue.
    for (mode, delays) in [
        ("2 ms local delay", (20_000, 2_000)),
        ("zero delay", (0, 0)),
    ] {
        // The peer runs batched as the module does (ABI v2's run loop, fused tag-and-merge).
        let (native, native_per) =
            throughput(|_| SpecRef::native_batched::<Multiplex>(), delays, datagrams);
        let (wasm_rate, wasm_per) = throughput(|e| e.load_spec(&wasm).unwrap(), delays, datagrams);
        let ratio = native / wasm_rate;
        let v1_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../build/mergespecs/v1/multiplex.wasm");
        if let Ok(v1) = std::fs::read(v1_path) {
            let (v1_rate, v1_per) = throughput(|e| e.load_spec(&v1).unwrap(), delays, datagrams);
            println!(
                "{:<46} {:>12.0} {:<6} {:>12.1} {:.2}x slower than native",
                format!("multiplex.wasm ABI v1 build, {mode}"),
                v1_rate,
                "pkt/s",
                v1_per,
                native / v1_rate
            );
            csv.push(format!(
                "csv,multiplex.wasm v1 {mode},{v1_rate:.3},pkt/s,native,{native:.3},{:.3}",
                native / v1_rate
            ));
        }
        println!(
            "{:<46} {:>12.0} {:<6} {:>12.1}",
            format!("multiplex, native Rust (peer), {mode}"),
            native,
            "pkt/s",
            native_per
        );
        // The peer of sessions 12-15 (one engine call per step and datagram, ABI v1's path),
        // for comparison with earlier figures.
        let (two_step, two_step_per) =
            throughput(|_| SpecRef::native::<Multiplex>(), delays, datagrams);
        println!(
            "{:<46} {:>12.0} {:<6} {:>12.1}",
            format!("multiplex, native two-step, {mode}"),
            two_step,
            "pkt/s",
            two_step_per
        );
        csv.push(format!("csv,multiplex native two-step {mode},{two_step:.3},pkt/s,,,"));
        println!(
            "{:<46} {:>12.0} {:<6} {:>12.1} {ratio:.2}x slower than native",
            format!("multiplex.wasm, {mode}"),
            wasm_rate,
            "pkt/s",
            wasm_per
        );
        println!(
            "  targets: >= 1,000,000 pkt/s: {}; wasm <= 5x native: {}; goal wasm <= 1.3x native (issue #26): {ratio:.2}x: {}",
            if wasm_rate >= 1e6 { "met" } else { "NOT met" },
            if ratio <= 5.0 { "met" } else { "NOT met" },
            if ratio <= 1.3 { "met" } else { "not met" }
        );
        csv.push(format!("csv,multiplex native {mode},{native:.3},pkt/s,,,"));
        csv.push(format!(
            "csv,multiplex.wasm {mode},{wasm_rate:.3},pkt/s,native,{native:.3},{ratio:.3}"
        ));
    }
    combined_figure(&wasm, &mut csv);
    println!("\ncsv,what,value,unit,peer,peer_value,ratio");
    for line in csv {
        println!("{line}");
    }
}

/// With CONCAST_PERF_MAP set, appends the spec's compiled functions to /tmp/perf-PID.map,
/// so `perf report` names the guest code.
fn write_perf_map(spec: &SpecRef) {
    use std::io::Write;
    if std::env::var_os("CONCAST_PERF_MAP").is_none() {
        return;
    }
    let path = format!("/tmp/perf-{}.map", std::process::id());
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    for line in spec.perf_map() {
        writeln!(f, "{line}").unwrap();
    }
}

/// The share of ACKs combined on the bursty trace, per MaxLocalDelay (MaxTotalDelay twice
/// that), for this module and the optional "before" module.
fn combined_figure(wasm: &[u8], csv: &mut Vec<String>) {
    let acks = bursty::trace(16, 2_000_000);
    let before = std::env::var_os("MPLEX_BEFORE_WASM").map(|p| {
        std::fs::read(&p).unwrap_or_else(|e| panic!("MPLEX_BEFORE_WASM {p:?}: {e}"))
    });
    println!(
        "\nACKs combined on a bursty trace ({} ACKs of 16 senders in trains of 2-6, 2 s)",
        acks.len()
    );
    println!(
        "{:<18} {:>22} {:>22}",
        "MaxLocalDelay", "this module: % (recs)", "before: % (recs)"
    );
    for ms in [1u32, 5, 10, 20, 50] {
        let run = |bytes: &[u8]| {
            bursty::run(|e| e.load_spec(bytes).unwrap(), &acks, ms * 1_000, ms * 2_000)
        };
        let now = run(wasm);
        let old = before.as_deref().map(run);
        let old_text = old.as_ref().map_or("-".to_string(), |c| {
            format!("{:.1} ({:.2})", c.percent(), c.mean_bundle())
        });
        println!(
            "{:<18} {:>22} {:>22}",
            format!("{ms} ms"),
            format!("{:.1} ({:.2})", now.percent(), now.mean_bundle()),
            old_text
        );
        csv.push(format!("csv,multiplex combined {ms} ms,{:.3},%,,,", now.percent()));
        if let Some(c) = old {
            csv.push(format!("csv,multiplex combined {ms} ms before,{:.3},%,,,", c.percent()));
        }
    }
    // The paper's 0 ms row: nothing waits on purpose, but with queue access a bundle waits
    // for the busy output link (10 Mbit/s, with 1500-byte cross traffic every 1.5 ms).
    for (what, gate) in [("0 ms, no queue access", false), ("0 ms, queue access", true)] {
        let link = bursty::Link::new(10_000_000);
        let c = bursty::run_over(|e| e.load_spec(wasm).unwrap(), &acks, 0, 100_000, Some(link), gate);
        println!("{:<18} {:>22}", what, format!("{:.1} ({:.2})", c.percent(), c.mean_bundle()));
        csv.push(format!("csv,multiplex combined {what},{:.3},%,,,", c.percent()));
    }
}
