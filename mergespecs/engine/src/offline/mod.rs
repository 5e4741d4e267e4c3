//! The offline runner behind `concast-spec run`: a recorded or hand-written list of concast
//! datagrams goes through the engine in virtual time, and out come the merged datagrams and
//! every flow's counters. Deterministic: the same input always gives the same output.

pub mod input;
pub mod pcap;

use std::net::Ipv4Addr;

use crate::config::{EngineConfig, Limits};
use crate::engine::{Engine, FlowConfig};
use crate::flow::FlowStats;
use crate::ipv4::{self, FlowId};
use crate::output::{OutputKind, Outputs};
use crate::spec::{SpecError, SpecInfo};

pub use input::Record;

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Flow parameters handed to every flow.
    pub params: Vec<u8>,
    pub children: u32,
    pub path_mtu: u32,
    /// Source address of merged datagrams.
    pub node: Ipv4Addr,
    /// After the last input, virtual time runs on this long so pending timers fire.
    pub drain_us: u64,
    /// Then build whatever is still open.
    pub flush: bool,
    pub limits: Limits,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            params: Vec::new(),
            children: 0,
            path_mtu: 1500,
            node: Ipv4Addr::new(192, 0, 2, 1),
            drain_us: 60_000_000,
            flush: true,
            limits: Limits::default(),
        }
    }
}

/// One datagram the engine forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    pub t_us: u64,
    pub flow: FlowId,
    pub kind: OutputKind,
    pub datagram: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct RunReport {
    pub spec: SpecInfo,
    pub outputs: Vec<RunOutput>,
    pub flows: Vec<FlowStats>,
    /// Inputs that are not concast datagrams: (origin, protocol error name).
    pub not_concast: Vec<(String, String)>,
    /// Flows the spec refused to start: (flow, reason).
    pub refused: Vec<(FlowId, String)>,
    /// Virtual time at the end of the run.
    pub end_us: u64,
}

impl RunReport {
    pub fn quarantined(&self) -> usize {
        self.flows.iter().filter(|f| f.quarantine.is_some()).count()
    }
}

#[derive(Debug)]
pub enum RunError {
    Spec(SpecError),
    Engine(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spec(e) => write!(f, "not a valid merge spec: {e}"),
            RunError::Engine(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for RunError {}

fn collect(out: &mut Outputs, into: &mut Vec<RunOutput>) {
    into.extend(out.iter().map(|o| RunOutput {
        t_us: o.at_us,
        flow: o.flow,
        kind: o.kind,
        datagram: o.datagram.to_vec(),
    }));
    out.clear();
}

/// Runs `records` through `spec`. Records with the same time arrive as one batch (so a spec
/// sees the later ones in its pending queue); flows are created on their first datagram.
pub fn run(spec: &[u8], records: &[Record], opts: &RunOptions) -> Result<RunReport, RunError> {
    let config = EngineConfig {
        node: opts.node,
        limits: opts.limits.clone(),
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(config).map_err(|e| RunError::Engine(e.to_string()))?;
    let spec = engine.load_spec(spec).map_err(RunError::Spec)?;
    let mut order: Vec<&Record> = records.iter().collect();
    order.sort_by_key(|r| r.t_us); // stable: equal times keep file order

    let mut report = RunReport {
        spec: spec.info().clone(),
        outputs: Vec::new(),
        flows: Vec::new(),
        not_concast: Vec::new(),
        refused: Vec::new(),
        end_us: 0,
    };
    let mut out = Outputs::new();
    let mut flows = Vec::new();
    for batch in order.chunk_by(|a, b| a.t_us == b.t_us) {
        let now = batch[0].t_us;
        for record in batch {
            match ipv4::flow_key(&record.datagram) {
                Err(e) => report
                    .not_concast
                    .push((record.origin.clone(), e.name().to_string())),
                Ok(key)
                    if engine.flow_slot(key).is_none()
                        && !report.refused.iter().any(|(k, _)| *k == key) =>
                {
                    let cfg = FlowConfig {
                        key,
                        spec: spec.clone(),
                        path_mtu: opts.path_mtu,
                        children: opts.children,
                        params: opts.params.clone(),
                    };
                    match engine.add_flow(cfg, now) {
                        Ok(id) => flows.push(id),
                        Err(e) => report.refused.push((key, e.to_string())),
                    }
                }
                Ok(_) => {}
            }
        }
        engine.advance_until(now, &mut out);
        let datagrams: Vec<&[u8]> = batch.iter().map(|r| r.datagram.as_slice()).collect();
        engine.ingest_mixed(&datagrams, now, &mut out);
        collect(&mut out, &mut report.outputs);
    }
    let end = order
        .last()
        .map_or(0, |r| r.t_us)
        .saturating_add(opts.drain_us);
    engine.advance_until(end, &mut out);
    if opts.flush {
        for &id in &flows {
            engine
                .flush_flow(id, end, &mut out)
                .expect("flows of this run exist");
        }
    }
    collect(&mut out, &mut report.outputs);
    report.flows = flows.iter().filter_map(|&id| engine.stats(id)).collect();
    report.end_us = end;
    Ok(report)
}
