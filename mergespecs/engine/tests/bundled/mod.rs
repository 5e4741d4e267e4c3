//! Helpers for the tests of the bundled `multiplex`, `nak-suppress` and `gather` specs. Every
//! scenario runs twice, once with the spec's `.wasm` (build/mergespecs) and once with the same
//! Rust natively; both runs must forward the same bytes at the same times.
#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::path::PathBuf;

use concast_engine::sdk::MergeSpec;
use concast_engine::{
    Engine, EngineConfig, FlowConfig, FlowSlot, FlowId, FlowStats, Limits, LogLine, OutputKind,
    Outputs, SpecRef,
};

pub const NODE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);
pub const R: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);
/// The flow's group: the well-known multiplex group, also used for the other specs.
pub const G: u32 = 1;

/// What a run forwarded: (time, kind, datagram).
pub type Forwarded = Vec<(u64, OutputKind, Vec<u8>)>;

/// A bundled spec built by `mergespecs/build.sh` (`make specs`).
pub fn wasm(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../build/mergespecs")
        .join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}. Build the specs first: `make specs` (or `bash mergespecs/build.sh`)",
            path.display()
        )
    })
}

/// How a flow is set up.
#[derive(Clone)]
pub struct Setup {
    pub params: String,
    pub mtu: u32,
    pub children: u32,
    pub limits: Limits,
}

impl Setup {
    pub fn params(params: &str) -> Setup {
        Setup {
            params: params.into(),
            mtu: 1500,
            children: 0,
            limits: Limits::default(),
        }
    }
    pub fn mtu(mut self, mtu: u32) -> Setup {
        self.mtu = mtu;
        self
    }
    pub fn children(mut self, children: u32) -> Setup {
        self.children = children;
        self
    }
}

/// One engine with one flow (R, G) of the spec under test, fed in virtual time.
pub struct Run {
    pub engine: Engine,
    pub flow: FlowSlot,
    out: Outputs,
}

impl Run {
    pub fn new(setup: &Setup, spec: impl FnOnce(&mut Engine) -> SpecRef) -> Run {
        let mut engine = Engine::new(EngineConfig {
            node: NODE,
            limits: setup.limits.clone(),
            ..EngineConfig::default()
        })
        .expect("engine starts");
        let mut cfg = FlowConfig::new(FlowId::new(R, G), spec(&mut engine));
        cfg.params = setup.params.as_bytes().to_vec();
        cfg.path_mtu = setup.mtu;
        cfg.children = setup.children;
        let flow = engine.add_flow(cfg, 0).expect("flow starts");
        Run {
            engine,
            flow,
            out: Outputs::new(),
        }
    }

    /// A batch arriving at `now` (due timers fire first).
    pub fn at(&mut self, now: u64, batch: &[Vec<u8>]) {
        self.engine
            .ingest(self.flow, batch, now, &mut self.out)
            .expect("flow exists");
    }

    /// Virtual time runs to `until`, timers firing at their deadlines.
    pub fn until(&mut self, until: u64) {
        self.engine.advance_until(until, &mut self.out);
    }

    pub fn forwarded(&self) -> Forwarded {
        self.out
            .iter()
            .map(|o| (o.at_us, o.kind, o.datagram.to_vec()))
            .collect()
    }

    /// Forwarded datagrams of one kind.
    pub fn of_kind(&self, kind: OutputKind) -> Vec<(u64, Vec<u8>)> {
        self.out
            .iter()
            .filter(|o| o.kind == kind)
            .map(|o| (o.at_us, o.datagram.to_vec()))
            .collect()
    }

    pub fn stats(&self) -> FlowStats {
        self.engine.stats(self.flow).expect("flow exists")
    }

    pub fn logs(&self) -> Vec<LogLine> {
        self.engine.logs(self.flow)
    }
}

/// Runs `scenario` with spec `S` natively and with `name`.wasm, checks that both forwarded
/// the same and that neither was quarantined, and returns the Wasm run. The native run is
/// made twice: one call per step and datagram (ABI v1: `get_tag`, then `merge`) and batched
/// as the `.wasm` build runs (ABI v2's run loop with the fused `tag_and_merge`); all three
/// must forward the same bytes at the same times.
pub fn both<S>(name: &str, setup: &Setup, scenario: impl Fn(&mut Run)) -> Run
where
    S: MergeSpec + Send + 'static,
    S::State: Send,
{
    let mut native = Run::new(setup, |_| SpecRef::native::<S>());
    scenario(&mut native);
    let mut batched = Run::new(setup, |_| SpecRef::native_batched::<S>());
    scenario(&mut batched);
    let mut wasm_run = Run::new(setup, |e| e.load_spec(&wasm(name)).expect("spec loads"));
    scenario(&mut wasm_run);
    for run in [&native, &batched, &wasm_run] {
        assert_eq!(run.stats().quarantine, None, "logs: {:?}", run.logs());
    }
    assert_eq!(
        native.forwarded(),
        batched.forwarded(),
        "native two-step (get_tag, merge) and native batched (tag_and_merge) forward the same"
    );
    assert_eq!(native.stats().counters, batched.stats().counters);
    assert_eq!(
        native.forwarded(),
        wasm_run.forwarded(),
        "native and Wasm forward the same"
    );
    assert_eq!(native.stats().counters, wasm_run.stats().counters);
    wasm_run
}

/// Checks the IPv4 header the engine wrote on a merged datagram: from this node to R with
/// the Concast ID option of G, a correct checksum, within the path MTU.
pub fn check_merged_header(datagram: &[u8], mtu: u32) {
    let ip = concast_engine::sdk::wire::ipv4::Packet::new_checked(datagram).expect("valid IPv4");
    assert_eq!((ip.src_addr(), ip.dst_addr()), (NODE, R));
    assert_eq!(
        ip.options(),
        concast_engine::sdk::wire::options::concast_area(G)
    );
    assert!(ip.verify_checksum());
    assert!(
        datagram.len() <= mtu as usize,
        "{} bytes on a {mtu}-byte path",
        datagram.len()
    );
}
