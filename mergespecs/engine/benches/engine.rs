//! Speed of the merge engine (`cargo bench -p concast-engine`), each figure next to its peer
//! measured in the same run. Targets (shared/DESIGN.md): sum spec >= 2,000,000 msg/s on one
//! core; Wasm <= 5x native; idle flow <= 1 MiB; 10,000 concurrent flows.
//! Prints a table, then the same figures as `csv,...` lines. Needs build/mergespecs/*.wasm
//! (`make specs`).

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use concast_aggregate::payload::Contribution;
use concast_aggregate::{Aggregate, Sum};
use concast_engine::ipv4::{self, FlowId};
use concast_engine::{
    Allocator, CpuLimit, Engine, EngineConfig, FlowConfig, Limits, Outputs, SpecRef,
};

const R: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);
const BATCH: usize = 64;
const FANIN: u32 = 8;

struct Row {
    what: String,
    value: f64,
    unit: &'static str,
    peer: Option<(String, f64)>,
}

fn spec_bytes(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../build/mergespecs")
        .join(format!("{name}.wasm"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}: run `make specs` first", path.display()))
}

/// The ABI v1 build of a bundled spec (`make specs` writes build/mergespecs/v1/), if there.
fn v1_spec_bytes(name: &str) -> Option<Vec<u8>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../build/mergespecs/v1")
        .join(format!("{name}.wasm"));
    std::fs::read(path).ok()
}

/// Issue #26: the engine within 1.3x of its native peer; a flow instantiated in 5 µs.
const GOAL_RATIO: f64 = 1.3;
const GOAL_INSTANTIATION_US: f64 = 5.0;

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "not met"
    }
}

fn engine(limits: Limits, allocator: Allocator) -> Engine {
    Engine::new(EngineConfig {
        node: Ipv4Addr::new(10, 0, 0, 254),
        limits,
        allocator,
        ..EngineConfig::default()
    })
    .unwrap()
}

/// Contributions cycling over 256 keys, so each state merges FANIN of them and builds.
fn datagrams(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let c = Contribution {
                sport: 1,
                dport: 2,
                key: (i / FANIN as usize % 256) as u32,
                count: 1,
                value: i as i64,
            };
            let header = ipv4::Header {
                src: Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8),
                flow: FlowId::new(R, 7),
                protocol: 17,
                ttl: 64,
                dont_fragment: false,
                ident: 0,
            };
            let mut d = Vec::new();
            ipv4::write_datagram(&mut d, &header, &c.encode());
            d
        })
        .collect()
}

/// Messages merged per second through one flow of `spec`.
fn throughput(engine: &mut Engine, spec: SpecRef, messages: usize) -> f64 {
    let mut cfg = FlowConfig::new(FlowId::new(R, 7), spec);
    cfg.params = format!("fanin={FANIN} timeout_us=1000000").into_bytes();
    let flow = engine.add_flow(cfg, 0).unwrap();
    let input = datagrams(BATCH * 256);
    let batches: Vec<&[Vec<u8>]> = input.chunks(BATCH).collect();
    let mut out = Outputs::new();
    let mut now = 0;
    // warm-up
    for b in batches.iter().take(100) {
        engine.ingest(flow, b, now, &mut out).unwrap();
        out.clear();
    }
    let rounds = messages / BATCH;
    let started = Instant::now();
    for i in 0..rounds {
        now += 10;
        engine
            .ingest(flow, batches[i % batches.len()], now, &mut out)
            .unwrap();
        black_box(out.len());
        out.clear();
    }
    let secs = started.elapsed().as_secs_f64();
    let stats = engine.stats(flow).unwrap();
    assert!(stats.quarantine.is_none(), "{:?}", stats.quarantine);
    assert!(stats.counters.out as usize >= rounds * BATCH / FANIN as usize - 256);
    (rounds * BATCH) as f64 / secs
}

/// Messages merged per second through one flow in each of `engines`, measured interleaved:
/// each engine in turn ingests `CHUNK` batches, so a machine whose speed drifts (shared
/// cores, frequency) slows every engine alike and the ratios stay comparable.
fn paired_throughput(engines: &mut [(Engine, SpecRef)], messages: usize) -> Vec<f64> {
    const CHUNK: usize = 16;
    let input = datagrams(BATCH * 256);
    let batches: Vec<&[Vec<u8>]> = input.chunks(BATCH).collect();
    let flows: Vec<_> = engines
        .iter_mut()
        .map(|(e, spec)| {
            let mut cfg = FlowConfig::new(FlowId::new(R, 7), spec.clone());
            cfg.params = format!("fanin={FANIN} timeout_us=1000000").into_bytes();
            e.add_flow(cfg, 0).unwrap()
        })
        .collect();
    let mut out = Outputs::new();
    let mut spent = vec![Duration::ZERO; engines.len()];
    let rounds = messages / BATCH / CHUNK;
    let mut now = 0;
    for warm_up in [true, false] {
        for r in 0..if warm_up { 10 } else { rounds } {
            now += 10;
            for ((e, _), (&flow, spent)) in engines.iter_mut().zip(flows.iter().zip(spent.iter_mut())) {
                let started = Instant::now();
                for c in 0..CHUNK {
                    e.ingest(flow, batches[(r * CHUNK + c) % batches.len()], now, &mut out).unwrap();
                    black_box(out.len());
                    out.clear();
                }
                if !warm_up {
                    *spent += started.elapsed();
                }
            }
        }
    }
    for ((e, _), &flow) in engines.iter().zip(&flows) {
        assert!(e.stats(flow).unwrap().quarantine.is_none());
    }
    spent.iter().map(|d| (rounds * CHUNK * BATCH) as f64 / d.as_secs_f64()).collect()
}

/// Mean microseconds to add one flow, over `flows` flows.
fn instantiation_us(engine: &mut Engine, spec: &SpecRef, flows: u32) -> f64 {
    let started = Instant::now();
    for g in 0..flows {
        engine
            .add_flow(
                FlowConfig::new(FlowId::new(R, 1_000_000 + g), spec.clone()),
                0,
            )
            .unwrap();
    }
    started.elapsed().as_secs_f64() * 1e6 / f64::from(flows)
}

/// Mean microseconds to add a flow to a fresh engine (cold: every sandbox's memory is new),
/// and to add one again after all were removed (warm, best of `WARM_ROUNDS`: a pooling
/// allocator reuses the slots).
const WARM_ROUNDS: usize = 3;

/// Microseconds per flow added: wall time and the thread's CPU time.
#[derive(Clone, Copy)]
struct Instantiation {
    wall: f64,
    cpu: f64,
}

fn churn_us(allocator: Allocator, spec_wasm: &[u8], flows: u32) -> (Instantiation, Instantiation) {
    churn_us_with(Limits::default(), allocator, spec_wasm, flows)
}

/// The limits routerd runs its engine with (`daemon.rs`: a CPU budget per flow).
fn routerd_limits() -> Limits {
    Limits { cpu_per_second: Some(Duration::from_millis(500)), ..Limits::default() }
}

/// Flow instantiation in routerd's engine: its limits, 64 flows (its pool's slots), with
/// the allocator it used before (on-demand) and now (the bounded pool).
fn routerd_instantiation(spec_wasm: &[u8]) -> (Instantiation, Instantiation) {
    let slots = concast_engine::DAEMON_POOL_SLOTS;
    let (_, on_demand) = churn_us_with(routerd_limits(), Allocator::OnDemand, spec_wasm, slots);
    let (_, pooled) = churn_us_with(routerd_limits(), Allocator::for_daemon(slots), spec_wasm, slots);
    (on_demand, pooled)
}

/// Repetitions of routerd's instantiation figure in the full run.
const ROUTERD_REPETITIONS: usize = 5;

/// The median instantiation of several repetitions (wall and CPU each their own median).
fn median_of(reps: impl Iterator<Item = Instantiation>) -> Instantiation {
    let (mut wall, mut cpu): (Vec<f64>, Vec<f64>) = reps.map(|r| (r.wall, r.cpu)).unzip();
    let mid = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Instantiation { wall: mid(&mut wall), cpu: mid(&mut cpu) }
}

fn churn_us_with(limits: Limits, allocator: Allocator, spec_wasm: &[u8], flows: u32) -> (Instantiation, Instantiation) {
    let mut e = engine(limits, allocator);
    let spec = e.load_spec(spec_wasm).unwrap();
    // Thread CPU time beside wall time: on a shared machine the wall figure includes
    // preemption.
    let timed = |e: &mut Engine| {
        let cpu = thread_cpu();
        let wall = instantiation_us(e, &spec, flows);
        let cpu = (thread_cpu() - cpu).as_secs_f64() * 1e6 / f64::from(flows);
        Instantiation { wall, cpu }
    };
    let cold = timed(&mut e);
    let mut out = Outputs::new();
    let mut warm = Instantiation {
        wall: f64::INFINITY,
        cpu: f64::INFINITY,
    };
    for _ in 0..WARM_ROUNDS {
        for id in e.flow_slots() {
            e.remove_flow(id, 0, &mut out).unwrap();
        }
        let round = timed(&mut e);
        warm.wall = warm.wall.min(round.wall);
        warm.cpu = warm.cpu.min(round.cpu);
    }
    (cold, warm)
}

fn proc_status(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// RSS growth per idle flow with `flows` flows of `spec`, and total RSS with them.
fn idle_memory(allocator: Allocator, spec_wasm: &[u8], flows: u32) -> (f64, u64, f64) {
    let before = proc_status("VmRSS:");
    let mut e = engine(Limits::default(), allocator);
    let spec = e.load_spec(spec_wasm).unwrap();
    let per_flow_us = instantiation_us(&mut e, &spec, flows);
    let after = proc_status("VmRSS:");
    assert_eq!(e.flow_count(), flows as usize);
    let per_flow = (after.saturating_sub(before)) as f64 / f64::from(flows);
    drop(e);
    (per_flow, after, per_flow_us)
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Wall time (median, worst) and thread CPU time (worst) an endless loop runs before it is
/// stopped, over five flows.
fn loop_stop(cpu: CpuLimit) -> (Duration, Duration, Duration) {
    let mut e = engine(
        Limits {
            cpu,
            ..Limits::default()
        },
        Allocator::OnDemand,
    );
    let spec = e
        .load_spec(
            &wat::parse_str(
                r#"(module (memory (export "memory") 2)
                (func (export "concast_abi_version") (result i32) (i32.const 1))
                (func (export "concast_init") (result i32) (i32.const 0))
                (func (export "concast_get_tag") (param i32) (result i64) (i64.const 0))
                (func (export "concast_state_new") (param i32 i64))
                (func (export "concast_merge") (param i32 i32) (result i32) (loop $l (br $l)) (i32.const 0))
                (func (export "concast_done") (param i32) (result i32) (i32.const 0))
                (func (export "concast_build") (param i32) (result i32) (i32.const 0)))"#,
            )
            .unwrap(),
        )
        .unwrap();
    let mut out = Outputs::new();
    let mut wall = Vec::new();
    let mut cpu_worst = Duration::ZERO;
    // Five fresh flows (a quarantined flow no longer runs its spec).
    for group in 0..5 {
        let flow = e
            .add_flow(FlowConfig::new(FlowId::new(R, group), spec.clone()), 0)
            .unwrap();
        let d = datagrams(1);
        let (started, cpu_start) = (Instant::now(), thread_cpu());
        e.ingest(flow, &d, 0, &mut out).unwrap();
        wall.push(started.elapsed());
        cpu_worst = cpu_worst.max(thread_cpu() - cpu_start);
        assert!(e.stats(flow).unwrap().quarantine.is_some());
    }
    wall.sort();
    (wall[2], wall[4], cpu_worst)
}

fn e_abi_version(bytes: &[u8]) -> u32 {
    let mut e = engine(Limits::default(), Allocator::OnDemand);
    e.load_spec(bytes).unwrap().info().abi_version
}

fn main() {
    let messages: usize = std::env::var("CONCAST_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000_000);
    let sum_wasm = spec_bytes("sum");
    let mut rows = Vec::new();
    // For `perf record`: only the sum throughput of one path (native, v1, v2), or only flow
    // instantiation ("instantiate"; CONCAST_BENCH_ALLOCATOR=on-demand|pooling picks one), then exit.
    if let Ok(only) = std::env::var("CONCAST_BENCH_ONLY") {
        // "instantiate": flow instantiation only, cold (fresh engine) and warm (flows
        // removed and added again), for each allocator; for `perf record`.
        if only == "instantiate" {
            for _ in 0..5 {
                for (name, allocator) in [
                    ("on-demand", Allocator::OnDemand),
                    ("pooling", Allocator::Pooling { flows: 1_000 }),
                ] {
                    if std::env::var("CONCAST_BENCH_ALLOCATOR").is_ok_and(|a| a != name) {
                        continue;
                    }
                    let (cold, warm) = churn_us(allocator, &sum_wasm, 1_000);
                    println!(
                        "flow instantiation, {name}: cold {:.2} us/flow ({:.2} CPU), warm {:.2} us/flow ({:.2} CPU)",
                        cold.wall, cold.cpu, warm.wall, warm.cpu
                    );
                }
            }
            return;
        }
        // "routerd": flow instantiation and sum.wasm throughput with routerd's engine
        // settings, on-demand (before) and the bounded pool (now).
        if only == "routerd" {
            for _ in 0..5 {
                let (on_demand, pooled) = routerd_instantiation(&sum_wasm);
                // Throughput without the CPU budget: its clock is virtual here.
                let mut od = engine(Limits::default(), Allocator::OnDemand);
                let mut bp = engine(Limits::default(), Allocator::for_daemon(concast_engine::DAEMON_POOL_SLOTS));
                let (s1, s2) = (od.load_spec(&sum_wasm).unwrap(), bp.load_spec(&sum_wasm).unwrap());
                let native = throughput(&mut engine(Limits::default(), Allocator::OnDemand), SpecRef::native::<Aggregate<Sum>>(), messages);
                let (od_rate, bp_rate) = (throughput(&mut od, s1, messages), throughput(&mut bp, s2, messages));
                println!(
                    "routerd engine: flow instantiation on-demand {:.2} us ({:.2} CPU), bounded pool {:.2} us ({:.2} CPU); sum.wasm on-demand {od_rate:.0} msg/s, bounded pool {bp_rate:.0} msg/s; native {native:.0} msg/s (ratios {:.2}, {:.2})",
                    on_demand.wall, on_demand.cpu, pooled.wall, pooled.cpu,
                    native / od_rate, native / bp_rate
                );
            }
            return;
        }
        // "paired": sum throughput of native, an on-demand engine and a bounded-pool engine
        // (routerd's allocator), interleaved in one loop (see `paired_throughput`).
        if only == "paired" {
            for _ in 0..5 {
                let mut engines: Vec<(Engine, SpecRef)> = [
                    Allocator::OnDemand,
                    Allocator::OnDemand,
                    Allocator::for_daemon(concast_engine::DAEMON_POOL_SLOTS),
                ]
                .into_iter()
                .enumerate()
                .map(|(i, a)| {
                    let mut e = engine(Limits::default(), a);
                    let spec = if i == 0 { SpecRef::native::<Aggregate<Sum>>() } else { e.load_spec(&sum_wasm).unwrap() };
                    (e, spec)
                })
                .collect();
                let r = paired_throughput(&mut engines, messages);
                println!(
                    "paired sum: native {:.0} msg/s, on-demand {:.0} msg/s ({:.3}x), bounded pool {:.0} msg/s ({:.3}x)",
                    r[0], r[1], r[0] / r[1], r[2], r[0] / r[2]
                );
            }
            return;
        }
        // "pool_slots": what a bounded pool of each size costs: engine start and drop, address
        // space and resident memory added, and flow instantiation with every slot in use
        // (cold, then reused), with routerd's limits.
        if only == "pool_slots" {
            for slots in [8u32, 16, 64, 256, 1024, 4096] {
                let (vm, rss) = (proc_status("VmSize:"), proc_status("VmRSS:"));
                let started = Instant::now();
                let mut e = engine(routerd_limits(), Allocator::Bounded { slots });
                let start_us = started.elapsed().as_secs_f64() * 1e6;
                let spec = e.load_spec(&sum_wasm).unwrap();
                let cold = instantiation_us(&mut e, &spec, slots);
                let mut out = Outputs::new();
                for id in e.flow_slots() {
                    e.remove_flow(id, 0, &mut out).unwrap();
                }
                let warm = instantiation_us(&mut e, &spec, slots);
                let vm_added = proc_status("VmSize:").saturating_sub(vm);
                let rss_added = proc_status("VmRSS:").saturating_sub(rss);
                assert_eq!(e.pool_fallbacks(), 0);
                let started = Instant::now();
                drop(e);
                let drop_us = started.elapsed().as_secs_f64() * 1e6;
                println!(
                    "pool of {slots} slots: engine start {start_us:.0} us, drop {drop_us:.0} us; VmSize +{} GiB, VmRSS +{} MiB with every slot in use; instantiation cold {cold:.2} us, reused {warm:.2} us",
                    vm_added >> 30,
                    rss_added >> 20
                );
            }
            return;
        }
        let mut e = engine(Limits::default(), Allocator::OnDemand);
        let spec = match only.as_str() {
            "native" => SpecRef::native::<Aggregate<Sum>>(),
            "v1" => e.load_spec(&v1_spec_bytes("sum").expect("build/mergespecs/v1/sum.wasm")).unwrap(),
            _ => e.load_spec(&sum_wasm).unwrap(),
        };
        println!("sum {only}: {:.0} msg/s", throughput(&mut e, spec, messages));
        return;
    }

    // 1. Throughput: the sum spec, Wasm against the same Rust natively, same engine code.
    let native = throughput(
        &mut engine(Limits::default(), Allocator::OnDemand),
        SpecRef::native::<Aggregate<Sum>>(),
        messages,
    );
    let mut e = engine(Limits::default(), Allocator::OnDemand);
    let spec = e.load_spec(&sum_wasm).unwrap();
    let wasm = throughput(&mut e, spec, messages);
    let mut e = engine(
        Limits {
            cpu: CpuLimit::Fuel(10_000_000),
            ..Limits::default()
        },
        Allocator::OnDemand,
    );
    let spec = e.load_spec(&sum_wasm).unwrap();
    let wasm_fuel = throughput(&mut e, spec, messages);
    let mut e = engine(Limits::default(), Allocator::OnDemand);
    let spec = e.load_spec(&spec_bytes("sum-wat")).unwrap();
    let wat = throughput(&mut e, spec, messages);
    let wasm_v1 = v1_spec_bytes("sum").map(|bytes| {
        let mut e = engine(Limits::default(), Allocator::OnDemand);
        let spec = e.load_spec(&bytes).unwrap();
        throughput(&mut e, spec, messages)
    });
    rows.push(Row {
        what: "sum, native Rust (peer)".into(),
        value: native,
        unit: "msg/s",
        peer: None,
    });
    rows.push(Row {
        what: "sum.wasm, epoch limit".into(),
        value: wasm,
        unit: "msg/s",
        peer: Some(("native".into(), native)),
    });
    if let Some(v1) = wasm_v1 {
        rows.push(Row {
            what: "sum.wasm ABI v1 build, epoch limit".into(),
            value: v1,
            unit: "msg/s",
            peer: Some(("native".into(), native)),
        });
    }
    rows.push(Row {
        what: "sum.wasm, fuel limit".into(),
        value: wasm_fuel,
        unit: "msg/s",
        peer: Some(("native".into(), native)),
    });
    rows.push(Row {
        what: "sum-wat.wasm (hand-written WAT)".into(),
        value: wat,
        unit: "msg/s",
        peer: Some(("native".into(), native)),
    });

    // 2. Flow instantiation and idle memory, on-demand allocator vs pooling.
    // Best of three runs each: instantiation is mostly page faults and mmap, noisy under load.
    let best = |allocator: Allocator| {
        let runs: Vec<(f64, u64, f64)> = (0..3)
            .map(|_| idle_memory(allocator, &sum_wasm, 1_000))
            .collect();
        (
            runs[0].0,
            runs.iter().map(|r| r.2).fold(f64::INFINITY, f64::min),
        )
    };
    let (on_demand_mem, on_demand_us) = best(Allocator::OnDemand);
    let (pool_mem, pool_us) = best(Allocator::Pooling { flows: 1_000 });
    // A pooled slot reused by a new flow of the same spec (flows removed and added again).
    let (_, pool_warm) = churn_us(Allocator::Pooling { flows: 1_000 }, &sum_wasm, 1_000);
    // Medians of five repetitions: one process's repetitions spread over 4.5-7 µs
    // (docs/benchmarks.md, session 15), so a single one says little about the goal.
    let reps: Vec<(Instantiation, Instantiation)> =
        (0..ROUTERD_REPETITIONS).map(|_| routerd_instantiation(&sum_wasm)).collect();
    let (routerd_before, routerd_now) = (median_of(reps.iter().map(|r| r.0)), median_of(reps.iter().map(|r| r.1)));
    let pool_walls: Vec<String> = reps.iter().map(|r| format!("{:.2}", r.1.wall)).collect();
    let mut e = engine(Limits::default(), Allocator::OnDemand);
    let native_us = instantiation_us(&mut e, &SpecRef::native::<Aggregate<Sum>>(), 1_000);
    drop(e);
    rows.push(Row {
        what: "flow instantiation, native (peer)".into(),
        value: native_us,
        unit: "us/flow",
        peer: None,
    });
    rows.push(Row {
        what: "flow instantiation, wasm on-demand".into(),
        value: on_demand_us,
        unit: "us/flow",
        peer: Some(("native".into(), native_us)),
    });
    rows.push(Row {
        what: "flow instantiation, wasm pooling".into(),
        value: pool_us,
        unit: "us/flow",
        peer: Some(("native".into(), native_us)),
    });
    rows.push(Row {
        what: "flow instantiation, wasm pooling, reused slot".into(),
        value: pool_warm.wall,
        unit: "us/flow",
        peer: Some(("native".into(), native_us)),
    });
    rows.push(Row {
        what: "flow instantiation, wasm pooling, reused slot, CPU".into(),
        value: pool_warm.cpu,
        unit: "us/flow",
        peer: None,
    });
    rows.push(Row {
        what: "flow instantiation, routerd's engine, on-demand (before)".into(),
        value: routerd_before.wall,
        unit: "us/flow",
        peer: Some(("native".into(), native_us)),
    });
    rows.push(Row {
        what: "flow instantiation, routerd's engine, bounded pool".into(),
        value: routerd_now.wall,
        unit: "us/flow",
        peer: Some(("native".into(), native_us)),
    });
    rows.push(Row {
        what: "idle flow RSS, wasm on-demand".into(),
        value: on_demand_mem / 1024.0,
        unit: "KiB/flow",
        peer: None,
    });
    rows.push(Row {
        what: "idle flow RSS, wasm pooling".into(),
        value: pool_mem / 1024.0,
        unit: "KiB/flow",
        peer: None,
    });

    // 3. 10,000 concurrent flows in one engine.
    let (per_flow, rss, us) = idle_memory(Allocator::OnDemand, &sum_wasm, 10_000);
    rows.push(Row {
        what: "10,000 flows: process RSS".into(),
        value: rss as f64 / (1 << 20) as f64,
        unit: "MiB",
        peer: None,
    });
    rows.push(Row {
        what: "10,000 flows: RSS per flow".into(),
        value: per_flow / 1024.0,
        unit: "KiB/flow",
        peer: None,
    });
    rows.push(Row {
        what: "10,000 flows: instantiation".into(),
        value: us,
        unit: "us/flow",
        peer: None,
    });

    // 4. How fast an endless loop is stopped.
    for (name, cpu) in [
        ("epoch, 1 ms CPU budget", Limits::default().cpu),
        ("fuel 10M", CpuLimit::Fuel(10_000_000)),
    ] {
        let (median, worst, cpu_time) = loop_stop(cpu);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        rows.push(Row {
            what: format!("endless loop stopped ({name}): median"),
            value: ms(median),
            unit: "ms",
            peer: None,
        });
        rows.push(Row {
            what: format!("endless loop stopped ({name}): worst"),
            value: ms(worst),
            unit: "ms",
            peer: None,
        });
        rows.push(Row {
            what: format!("endless loop stopped ({name}): CPU"),
            value: ms(cpu_time),
            unit: "ms CPU",
            peer: None,
        });
    }

    println!("\nconcast merge engine ({messages} messages per throughput run, batches of {BATCH}, fanin {FANIN})");
    println!("{:<52} {:>14} {:<9} vs peer", "what", "figure", "unit");
    for r in &rows {
        let ratio = r.peer.as_ref().map(|(name, p)| {
            let x = if r.unit == "msg/s" {
                p / r.value
            } else {
                r.value / p
            };
            if r.unit == "msg/s" {
                format!("{x:.2}x slower than {name}")
            } else {
                format!("{x:.1}x {name}")
            }
        });
        println!(
            "{:<52} {:>14.1} {:<9} {}",
            r.what,
            r.value,
            r.unit,
            ratio.unwrap_or_default()
        );
    }
    println!("\ntargets: sum >= 2,000,000 msg/s: {}; wasm <= 5x native: {:.2}x; idle flow <= 1 MiB: {:.0} KiB",
        if wasm >= 2e6 { "met" } else { "NOT met" }, native / wasm, on_demand_mem / 1024.0);
    let abi = e_abi_version(&sum_wasm);
    println!(
        "goal: sum.wasm (ABI v{abi}) within {GOAL_RATIO}x of native: {:.2}x: {}",
        native / wasm,
        met(native / wasm <= GOAL_RATIO)
    );
    println!(
        "goal: flow instantiation <= {GOAL_INSTANTIATION_US} us: on-demand {on_demand_us:.1} us: {}; pooling {pool_us:.1} us: {}; pooling, reused slot {:.1} us: {}",
        met(on_demand_us <= GOAL_INSTANTIATION_US),
        met(pool_us <= GOAL_INSTANTIATION_US),
        pool_warm.wall,
        met(pool_warm.wall <= GOAL_INSTANTIATION_US)
    );
    println!(
        "goal: flow instantiation <= {GOAL_INSTANTIATION_US} us in routerd's engine (bounded pool, {} slots, reused slot; median of {ROUTERD_REPETITIONS}: {} us): {:.1} us: {} (on-demand, as before: {:.1} us)",
        concast_engine::DAEMON_POOL_SLOTS,
        pool_walls.join(", "),
        routerd_now.wall,
        met(routerd_now.wall <= GOAL_INSTANTIATION_US),
        routerd_before.wall
    );
    println!("\ncsv,what,value,unit,peer,peer_value,ratio");
    for r in &rows {
        let (peer, pv, ratio) = match &r.peer {
            Some((n, p)) => (
                n.clone(),
                format!("{p:.3}"),
                format!(
                    "{:.3}",
                    if r.unit == "msg/s" {
                        p / r.value
                    } else {
                        r.value / p
                    }
                ),
            ),
            None => (String::new(), String::new(), String::new()),
        };
        println!(
            "csv,{},{:.3},{},{},{},{}",
            r.what.replace(',', ""),
            r.value,
            r.unit,
            peer,
            pv,
            ratio
        );
    }
}
