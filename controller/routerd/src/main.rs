//! concast-routerd: the per-router concast daemon (docs/architecture.md).
//!
//! Reads diverted frames from the router's CPU port, runs CSP and the merge engine, writes
//! merged, forwarded and signalling datagrams back, and answers `concast router ...` on a
//! Unix socket. Stops cleanly on SIGTERM or SIGINT, removing the diversions it installed.

//! This file turns the flags and `--config` into the daemon's settings; the loop is
//! `daemon.rs` in the library.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use concast_routerd::config::{self, Dataplane, RouterConfig};
use concast_routerd::cpu_port::{parse_mac, RxMode};
use concast_routerd::daemon::{self, Settings, StaticFlow};
use concast_routerd::egress;
use concast_routerd::linkgate;
use concast_routerd::log::{emit, Level};

#[derive(Parser, Debug)]
#[command(name = "concast-routerd", version, about = "The per-router concast daemon: CSP and merging behind a data plane's CPU port")]
struct Args {
    /// Router description written by the control plane (JSON: addr, cpu_iface, bridge on OVS, router_mac, cpu_mac, run_dir, ...); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// routerd's end of the CPU port (opened with AF_PACKET).
    #[arg(long)]
    cpu_iface: Option<String>,
    /// This router's address: source of its CSP messages and merged datagrams.
    #[arg(long)]
    addr: Option<Ipv4Addr>,
    /// MAC of the router (destination of frames routerd writes).
    #[arg(long, value_parser = parse_mac)]
    router_mac: Option<[u8; 6]>,
    /// OVS bridge whose flow selectors routerd manages; without it diversion is static.
    #[arg(long)]
    bridge: Option<String>,
    /// Program that installs and removes diversions (`PROGRAM divert R G PROTO DPORT`,
    /// `undivert R G`, `clear`; split on whitespace); overrides --bridge. From --config:
    /// `dataplane_cmd`, or on `dataplane: "bmv2"` `python3 -m concast.controller.p4 --switch <p4_switch>`.
    #[arg(long)]
    dataplane_cmd: Option<String>,
    /// OpenFlow port number of the CPU port on the bridge.
    #[arg(long, default_value_t = 1000)]
    cpu_ofport: u32,
    /// Management socket path (default: <run_dir>/routers/<router>.sock, or /run/concast/routerd-<addr>.sock).
    #[arg(long)]
    mgmt: Option<PathBuf>,
    /// Hold time (seconds) asked of upstream nodes and granted to children asking for 0.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u16).range(1..))]
    hold: u16,
    /// How long (ms) a child that sent LEAVE still counts, so data it sent just before the
    /// LEAVE and that arrives after it is still merged (0 = prune at once).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    leave_delay_ms: u64,
    /// A flow merged from the start without CSP: RECEIVER,GROUP,SPEC.wasm[,PROTO[,DPORT]] (repeatable).
    #[arg(long = "flow", value_parser = parse_static_flow)]
    flows: Vec<StaticFlow>,
    /// Parameters given to every --flow spec (the receiver's text, e.g. "fanin=1" or "fanin=4,timeout_us=5000").
    #[arg(long, default_value = "")]
    flow_params: String,
    /// Where routerd sends the datagrams it writes: `ports` = straight out of the router's
    /// port toward the next hop (the config's `egress_routes`, written by the OVS control
    /// plane), falling back to the CPU port for anything without a route; `cpu` = always back
    /// through the CPU port, for the data plane to forward. Default: ports when the config
    /// has egress routes.
    #[arg(long, value_parser = ["ports", "cpu"])]
    egress: Option<String>,
    /// Merge timers fire this many µs before their deadline, so a bundle leaves just before
    /// its MaxLocalDelay/MaxTotalDelay bound despite wake-up and send latency (paper 4.2.4).
    /// A link emulator's busy transmitter counts as free when it frees within this margin.
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    timer_lead_us: u64,
    /// Bytes of datagrams all flows together may hold for merging (the node's buffer space,
    /// paper 4.2.2): beyond it the flow holding most sends its oldest bundles early.
    #[arg(long, default_value_t = 64 << 20, value_parser = clap::value_parser!(u64).range(1500..=1 << 34))]
    node_buffer_bytes: u64,
    /// CPU time (ms) one flow's merging may use per second; a flow over it is quarantined
    /// (fail-open), so one expensive spec cannot starve the others. 0 = no budget.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(0..=1000))]
    flow_cpu_ms: u64,
    /// Frames per recvmmsg/sendmmsg call on the CPU port (1 = a syscall per frame; benchmarks).
    #[arg(long, default_value_t = concast_routerd::cpu_port::BATCH, value_parser = parse_batch)]
    batch: usize,
    /// How the CPU port is read: `ring` = a memory-mapped AF_PACKET receive ring, no system
    /// call per frame (falls back to `socket` when the kernel refuses one); `socket` =
    /// recvmmsg. From --config: `cpu_io`. Default ring.
    #[arg(long, value_parser = ["ring", "socket"])]
    cpu_io: Option<String>,
    /// Merge flows whose sandboxes come from a pool reserved at start (each slot the flow
    /// memory limit plus a guard to 4 GiB + 32 MiB, so specs run without bounds checks: 64
    /// slots reserve about 262 GiB of address space, no memory); flows beyond it get
    /// on-demand sandboxes, counted (stats: engine.pool_fallbacks).
    /// 0 = on-demand only. From --config: `flow_pool_slots`. Default 64.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=4096))]
    flow_pool_slots: Option<u32>,
    /// After a turn that read frames, keep looking at the CPU port (and due merge timers)
    /// without sleeping in poll() for this many µs, so a frame arriving soon after is read
    /// without a wake-up; costs up to that much CPU per turn. 0 = off (sleep at once).
    /// Never on many routers sharing few cores (the 220-router ACK study). From --config:
    /// `busy_poll_us`. 0..=10000, default 0.
    #[arg(long, value_parser = concast_routerd::busypoll::parse_window)]
    busy_poll_us: Option<u64>,
    /// How routerd waits for frames: `sleep` = poll() as soon as the port is empty;
    /// `adaptive` = learn the gaps between arrivals and, when recent gaps agree, sleep until
    /// just before the next expected frame and spin (yielding) through its window, at most
    /// 200 µs plus a 20 µs tail per arrival (docs/routerd.md). From --config: `wait`.
    /// Default sleep.
    #[arg(long, value_parser = concast_routerd::adaptive::parse_mode)]
    wait: Option<bool>,
    /// Run specs that come without R's signature (receivers that do not sign; tests). A spec
    /// that is signed is still checked (docs/protocol.md 2.9).
    #[arg(long)]
    accept_unsigned_specs: bool,
    /// Longest hold time (s) granted to a child's JOIN; longer requests get this.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u16).range(1..))]
    max_hold: u16,
    /// A receiver's spec key known in advance, R=HEX (64 hex digits, what `concast host status`
    /// shows as spec_key; repeatable): flows to R start with it pinned (docs/protocol.md 2.9).
    #[arg(long = "receiver-key", value_parser = parse_receiver_key)]
    receiver_keys: Vec<(Ipv4Addr, [u8; 32])>,
    /// Print the OVS rules routerd would install for the selector R,PROTO,DPORT (repeatable;
    /// with --cpu-ofport) as one JSON object, and exit: how the Python side's
    /// selectors.py is checked against this, the owner of the rule.
    #[arg(long = "print-selector", value_parser = parse_selector)]
    print_selectors: Vec<(Ipv4Addr, concast_csp::Selector)>,
    /// Print the schema of --config (JSON Schema; the one definition the control plane's
    /// writer checks its files against) and exit.
    #[arg(long)]
    print_config_schema: bool,
}

fn parse_selector(s: &str) -> Result<(Ipv4Addr, concast_csp::Selector), String> {
    let usage = "expected R,PROTO,DPORT, e.g. 10.1.1.2,17,5000";
    let [r, p, d] = s.split(',').collect::<Vec<_>>()[..] else { return Err(usage.into()) };
    let r = r.parse().map_err(|_| format!("{r:?} is not an IPv4 address; {usage}"))?;
    let proto = p.parse().map_err(|_| format!("protocol must be 0..255; {usage}"))?;
    let dport = d.parse().map_err(|_| format!("port must be 0..65535; {usage}"))?;
    Ok((r, concast_csp::Selector { proto, dport }))
}

/// `--print-selector`: the rules, their removal and the class-wide removal, as JSON.
fn print_selectors(sels: &[(Ipv4Addr, concast_csp::Selector)], cpu_ofport: u32) {
    use concast_routerd::dataplane::{selector_cookie, selector_del, selector_rule, selectors_del_all};
    let rules: Vec<serde_json::Value> = sels
        .iter()
        .map(|&(r, sel)| {
            serde_json::json!({
                "receiver": r.to_string(), "proto": sel.proto, "dport": sel.dport,
                "cookie": selector_cookie(r, sel),
                "add_flow": selector_rule(r, sel, cpu_ofport),
                "del_flows": selector_del(r, sel),
            })
        })
        .collect();
    println!("{}", serde_json::json!({ "selectors": rules, "del_all": selectors_del_all() }));
}

fn parse_receiver_key(s: &str) -> Result<(Ipv4Addr, [u8; 32]), String> {
    let (r, hex) = s.split_once('=').ok_or("expected R=HEX")?;
    let r: Ipv4Addr = r.parse().map_err(|_| format!("{r:?} is not an IPv4 address"))?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the key must be 64 hex digits (an Ed25519 public key)".into());
    }
    let mut key = [0u8; 32];
    for (i, k) in key.iter_mut().enumerate() {
        *k = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("checked hex");
    }
    Ok((r, key))
}

fn parse_batch(s: &str) -> Result<usize, String> {
    let max = concast_routerd::cpu_port::BATCH;
    match s.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("batch must be 1..={max}")),
    }
}

fn parse_static_flow(s: &str) -> Result<StaticFlow, String> {
    let usage = "expected RECEIVER,GROUP,SPEC.wasm[,PROTO[,DPORT]], e.g. 10.1.1.2,7,build/mergespecs/sum.wasm,17,5000";
    let parts: Vec<&str> = s.split(',').collect();
    if !(3..=5).contains(&parts.len()) {
        return Err(usage.into());
    }
    let receiver = parts[0].parse().map_err(|_| format!("{:?} is not an IPv4 address; {usage}", parts[0]))?;
    let group = parts[1].parse().map_err(|_| format!("{:?} is not a group number; {usage}", parts[1]))?;
    let proto = parts.get(3).map_or(Ok(0), |p| p.parse()).map_err(|_| format!("protocol must be 0..255; {usage}"))?;
    let dport = parts.get(4).map_or(Ok(0), |p| p.parse()).map_err(|_| format!("port must be 0..65535; {usage}"))?;
    Ok(StaticFlow {
        flow: concast_csp::FlowId { receiver, group },
        selector: concast_csp::Selector { proto, dport },
        spec: PathBuf::from(parts[2]),
    })
}

fn settings(a: &Args) -> Result<Settings, String> {
    let cfg = RouterConfig::read(a.config.as_deref())?;
    let cpu_iface = a.cpu_iface.clone().or(cfg.cpu_iface).ok_or("no CPU port: give --cpu-iface or --config")?;
    let addr = match a.addr {
        Some(x) => x,
        None => cfg
            .addr
            .ok_or("no router address: give --addr or --config")?
            .parse()
            .map_err(|_| "addr in --config is not an IPv4 address")?,
    };
    let router_mac = match a.router_mac {
        Some(m) => m,
        None => parse_mac(cfg.router_mac.as_deref().unwrap_or("02:00:00:00:00:01"))?,
    };
    let bmv2 = cfg.dataplane == Some(Dataplane::Bmv2);
    let dataplane_cmd = a.dataplane_cmd.clone().or(cfg.dataplane_cmd).or_else(|| {
        cfg.p4_switch.filter(|_| bmv2).map(|sw| format!("python3 -m concast.controller.p4 --switch {sw}"))
    });
    let bridge = a.bridge.clone().or(cfg.bridge);
    let tc = match cfg.dataplane == Some(Dataplane::Linux) {
        true => Some((
            cfg.tc_block.ok_or("--config: dataplane linux needs tc_block")?,
            cfg.tc_cpu_dev.ok_or("--config: dataplane linux needs tc_cpu_dev")?,
        )),
        false => None,
    };
    let mgmt = a.mgmt.clone().unwrap_or_else(|| match (&cfg.run_dir, &cfg.router) {
        (Some(dir), Some(r)) => PathBuf::from(dir).join("routers").join(format!("{r}.sock")),
        _ => PathBuf::from(format!("/run/concast/routerd-{addr}.sock")),
    });
    // The routes come typed from the config; the parsers check what the schema cannot
    // (prefixes, MACs).
    let routes = cfg.egress_routes.as_deref();
    let port_table = |v: &[config::Route]| egress::parse_routes(v, router_mac).map_err(|e| format!("--config: {e}"));
    let egress = match (a.egress.as_deref(), routes) {
        (Some("cpu"), _) => None,
        (Some(_), None) => return Err("--egress ports needs egress_routes in --config".into()),
        (_, Some(v)) => Some(port_table(v)?),
        (None, None) => None,
    };
    // Without direct egress (BMv2), the ports' routes still tell each link's MTU.
    let mtu_ports = match (&egress, cfg.port_routes.as_deref()) {
        (None, Some(v)) => Some(port_table(v)?),
        _ => None,
    };
    let link_state = match (cfg.link_state, routes) {
        (Some(path), Some(v)) => Some((PathBuf::from(path), linkgate::parse_link_routes(v).map_err(|e| format!("--config: {e}"))?))
            .filter(|(_, routes)| !routes.is_empty()),
        // BMv2 and Linux routers get no egress routes: no port to look up, so no gate.
        _ => None,
    };
    let cpu_io = RxMode::parse(&a.cpu_io.clone().or(cfg.cpu_io).unwrap_or_else(|| "ring".into())).map_err(|e| format!("cpu_io: {e}"))?;
    Ok(Settings {
        cpu_io,
        cpu_iface, addr, router_mac, bridge, dataplane_cmd, tc, mgmt, egress, mtu_ports, link_state,
        timer_lead_us: a.timer_lead_us,
        node_buffer_bytes: a.node_buffer_bytes as usize,
        flow_cpu_ms: a.flow_cpu_ms,
        flow_pool_slots: a.flow_pool_slots.or(cfg.flow_pool_slots).unwrap_or(concast_engine::DAEMON_POOL_SLOTS),
        cpu_ofport: a.cpu_ofport,
        batch: a.batch,
        busy_poll_us: match a.busy_poll_us.or(cfg.busy_poll_us) {
            Some(us) => concast_routerd::busypoll::parse_window(&us.to_string()).map_err(|e| format!("busy_poll_us: {e}"))?,
            None => 0,
        },
        adaptive_wait: match (a.wait, cfg.wait.as_deref()) {
            (Some(flag), _) => flag,
            (None, Some(mode)) => concast_routerd::adaptive::parse_mode(mode).map_err(|e| format!("wait: {e}"))?,
            (None, None) => false,
        },
        flows: a.flows.clone(),
        flow_params: a.flow_params.clone(),
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.print_config_schema {
        print!("{}", config::SCHEMA);
        return ExitCode::SUCCESS;
    }
    if !args.print_selectors.is_empty() {
        print_selectors(&args.print_selectors, args.cpu_ofport);
        return ExitCode::SUCCESS;
    }
    let s = match settings(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("concast-routerd: {e}");
            return ExitCode::from(2);
        }
    };
    let csp = concast_csp::Config {
        hold_s: args.hold,
        leave_delay_us: args.leave_delay_ms * 1000,
        verify_specs: !args.accept_unsigned_specs,
        max_hold_s: args.max_hold,
        receiver_keys: args.receiver_keys.iter().copied().collect(),
        ..Default::default()
    };
    match daemon::run(s, csp) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            emit(Level::Error, "fatal", &[("error", &e)]);
            ExitCode::FAILURE
        }
    }
}
