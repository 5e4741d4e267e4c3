//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::path::PathBuf;

use concast_aggregate::payload::Contribution;
use concast_engine::ipv4::{self, FlowId};
use concast_engine::{Engine, EngineConfig, FlowConfig, FlowSlot, OutputKind, Outputs};

pub const NODE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);
pub const R: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

/// A bundled spec built by `mergespecs/build.sh` (the Makefile's `make specs`).
pub fn spec_bytes(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../build/mergespecs")
        .join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{}: {e}. Build the specs first: run `make specs` (or `bash mergespecs/build.sh`) at the repo root", path.display())
    })
}

pub fn wat(text: &str) -> Vec<u8> {
    wat::parse_str(text).expect("test WAT parses")
}

pub fn engine() -> Engine {
    Engine::new(EngineConfig {
        node: NODE,
        ..EngineConfig::default()
    })
    .expect("engine starts")
}

pub fn key(group: u32) -> FlowId {
    FlowId::new(R, group)
}

/// A concast datagram from `src` to R carrying `payload` as UDP.
pub fn datagram(src: Ipv4Addr, group: u32, ttl: u8, payload: &[u8]) -> Vec<u8> {
    let header = ipv4::Header {
        src,
        flow: key(group),
        protocol: 17,
        ttl,
        dont_fragment: false,
        ident: 1,
    };
    let mut out = Vec::new();
    ipv4::write_datagram(&mut out, &header, payload);
    out
}

/// An aggregate contribution (sum/count/min/max payload format).
pub fn contribution(sender: u8, group: u32, key: u32, value: i64) -> Vec<u8> {
    let c = Contribution {
        sport: 4000,
        dport: 5000,
        key,
        count: 1,
        value,
    };
    datagram(Ipv4Addr::new(10, 0, 1, sender), group, 64, &c.encode())
}

/// The contribution a merged output carries.
pub fn read_contribution(datagram: &[u8]) -> Contribution {
    let header_len = usize::from(datagram[0] & 0x0F) * 4;
    Contribution::parse(&datagram[header_len..]).expect("an aggregate payload")
}

pub fn merged(out: &Outputs) -> Vec<Vec<u8>> {
    out.iter()
        .filter(|o| o.kind == OutputKind::Merged)
        .map(|o| o.datagram.to_vec())
        .collect()
}

pub fn add(engine: &mut Engine, spec: &[u8], group: u32, params: &str) -> FlowSlot {
    let spec = engine.load_spec(spec).expect("spec loads");
    let mut cfg = FlowConfig::new(key(group), spec);
    cfg.params = params.as_bytes().to_vec();
    engine.add_flow(cfg, 0).expect("flow starts")
}
