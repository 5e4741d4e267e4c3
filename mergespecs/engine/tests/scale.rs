//! 10,000 concurrent flows fit in one engine: each gets its own sandbox, merges, and the
//! process RSS is printed (the figure is in the benchmark; no time is asserted).

mod common;

use common::*;
use concast_engine::{FlowConfig, FlowId, Outputs};

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
        * 1024
}

#[test]
fn ten_thousand_flows_fit_and_merge() {
    const FLOWS: u32 = 10_000;
    let mut engine = engine();
    let spec = engine.load_spec(&spec_bytes("sum")).unwrap();
    let before = rss_bytes();
    let ids: Vec<_> = (0..FLOWS)
        .map(|g| {
            engine
                .add_flow(FlowConfig::new(FlowId::new(R, g), spec.clone()), 0)
                .unwrap()
        })
        .collect();
    let idle = rss_bytes();
    let mut out = Outputs::new();
    for (g, &id) in ids.iter().enumerate() {
        let g = g as u32;
        engine
            .ingest(
                id,
                &[contribution(1, g, 1, 20), contribution(2, g, 1, 22)],
                1,
                &mut out,
            )
            .unwrap();
    }
    assert_eq!(out.len(), FLOWS as usize, "one merged datagram per flow");
    assert!(out
        .iter()
        .all(|o| read_contribution(o.datagram).value == 42));
    println!(
        "{FLOWS} flows: RSS {} MiB idle ({:.1} KiB per idle flow), {} MiB after merging in each",
        idle >> 20,
        idle.saturating_sub(before) as f64 / f64::from(FLOWS) / 1024.0,
        rss_bytes() >> 20
    );
}
