//! The concast merge engine.
//!
//! Concast datagrams of a flow (R, G) are merged by the receiver's merge spec, a WebAssembly
//! module (ABI: `docs/mergespec-abi.md`) run in one wasmtime sandbox per flow:
//!
//! ```text
//! for each datagram m of flow f:  tag = getTag(m)
//!                                 s = state[tag] or a new one
//!                                 merge(s, m);  if done(s): buildMsg(s) -> emit, free or keep s
//! ```
//!
//! The caller owns the clock: [`Engine::ingest`] and [`Engine::advance`] take `now` in
//! microseconds (real time in routerd, virtual time in tests and `concast-spec run`), and
//! timers armed by `done` fire when the caller's clock passes them. Outputs go into an
//! [`Outputs`] buffer: merged datagrams with a header the engine writes (source = this node,
//! destination = R, Concast ID option with G) and unmerged ones byte for byte.
//!
//! A spec that traps or hits a limit quarantines only its own flow: every datagram it held
//! comes back as a fail-open "unmerged" output and the flow forwards unmerged from then on.
//!
//! ```no_run
//! use concast_engine::{Engine, EngineConfig, FlowConfig, FlowId, Outputs};
//! let mut engine = Engine::new(EngineConfig::default()).unwrap();
//! let spec = engine.load_spec(&std::fs::read("build/mergespecs/sum.wasm").unwrap()).unwrap();
//! let key = FlowId::new("10.0.0.9".parse().unwrap(), 7);
//! let flow = engine.add_flow(FlowConfig::new(key, spec), 0).unwrap();
//! let mut out = Outputs::new();
//! # let batch: Vec<Vec<u8>> = Vec::new();
//! engine.ingest(flow, &batch, 1_000, &mut out).unwrap();
//! for o in out.iter() { /* send o.datagram */ }
//! ```

mod budget;
mod call_clock;
mod config;
mod cpu;
mod engine;
mod epoch;
mod fallback;
mod fault;
mod gate;
mod flow;
mod host;
pub mod ipv4;
mod linker;
mod native;
pub mod offline;
mod output;
pub mod params_section;
mod pending;
mod sandbox;
mod spec;
mod states;
mod timers;

pub use config::{Allocator, CpuLimit, EngineConfig, Limits, DAEMON_POOL_SLOTS, POOL_MIN_GUARD_BYTES, POOL_SLOT_SPAN};
pub use engine::{Engine, EngineError, FlowConfig, FlowError, FlowSlot, PoolStats};
pub use fault::{Fault, Quarantine};
pub use gate::EgressGate;
pub use flow::{FlowCounters, FlowStats};
pub use host::LogLine;
pub use ipv4::FlowId;
pub use output::{Output, OutputKind, Outputs, Unmerged};
pub use spec::{sha256, SpecError, SpecInfo, SpecRef};

/// The SDK this engine implements the host side of (ABI numbers, `MergeSpec`, `Host`).
pub use concast_sdk as sdk;
