//! `concast-spec`: check a merge spec, or run one offline over recorded datagrams.
//! The Python `concast spec ...` command executes this binary; see `usage()`.

use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use concast_engine::offline::{self, input, pcap, RunOptions, RunReport};
use concast_engine::{
    Engine, EngineConfig, FlowConfig, FlowId, FlowStats, Limits, OutputKind, SpecInfo,
};
use concast_wire::hex;
use serde_json::{json, Value};

const USAGE: &str = "\
usage:
  concast-spec check SPEC.wasm [--param KEY=VALUE]... [--params-hex HEX] [--json]
  concast-spec run SPEC.wasm --input FILE [--output FILE] [--param KEY=VALUE]...
                   [--params-hex HEX] [--children N] [--mtu N] [--node ADDR]
                   [--drain-us N] [--no-flush] [--json]
  concast-spec embed SPEC.wasm [--param KEY=VALUE]... [--params-hex HEX] --output OUT.wasm
  concast-spec help

check  validates SPEC.wasm against the concast merge-spec ABI (docs/mergespec-abi.md) and
       starts one flow with the given parameters; prints ABI version, exports, imports,
       limits and SHA-256.
run    feeds the datagrams of FILE (JSON lines or pcap; see mergespecs/README.md) through
       the engine in virtual time and prints the forwarded datagrams and per-flow counters.
       --output writes the forwarded datagrams to a file instead (.pcap: raw-IP pcap,
       otherwise JSON lines). Records with the same t_us arrive as one batch.
embed  writes OUT.wasm: SPEC.wasm with the given parameters embedded (custom section
       `concast.params`, replacing any there; none given = removed). Every node that runs
       the spec uses them for flows given no parameters of their own: this is how a
       receiver's parameters reach the routers.

options:
  --param KEY=VALUE   flow parameter (repeatable; joined as text lines)
  --params-hex HEX    flow parameters as raw bytes (instead of --param)
  --children N        downstream children the flows report (default 0 = unknown)
  --mtu N             path MTU the flows report (default 1500)
  --node ADDR         source address of merged datagrams (default 192.0.2.1)
  --drain-us N        virtual time run after the last input so timers fire (default 60000000)
  --no-flush          leave states still open at the end unbuilt
  --json              machine-readable output (one JSON object per line)

exit status: 0 ok; 1 spec or input rejected; 2 bad command line; 3 run: a flow was quarantined";

/// A command-line mistake: reported with the usage, exit status 2.
struct BadCommandLine(String);

/// Why a command stopped before its end.
enum Failure {
    /// Reported on stderr; exit status 1.
    Msg(String),
    /// The reader of stdout went away (`concast-spec check X | head -1`): nothing more is
    /// wanted, so the command stops writing, quietly, with the status it would have had.
    StdoutClosed,
}

impl From<String> for Failure {
    fn from(msg: String) -> Failure {
        Failure::Msg(msg)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::StdoutClosed
        } else {
            Failure::Msg(format!("cannot write to stdout: {e}"))
        }
    }
}

/// `println!` that reports a closed stdout instead of panicking (as `println!` does).
macro_rules! say {
    ($($arg:tt)*) => {
        writeln!(io::stdout(), $($arg)*).map_err(Failure::from)?
    };
}

struct Args {
    command: String,
    spec: PathBuf,
    input: Option<PathBuf>,
    output: Option<PathBuf>,
    params: Vec<String>,
    params_hex: Option<Vec<u8>>,
    children: u32,
    mtu: u32,
    node: Ipv4Addr,
    drain_us: u64,
    flush: bool,
    json: bool,
}

fn parse_args(mut argv: impl Iterator<Item = String>) -> Result<Args, BadCommandLine> {
    let bad = |msg: String| BadCommandLine(msg);
    let command = argv
        .next()
        .ok_or_else(|| bad("no command given (check or run)".into()))?;
    if !matches!(command.as_str(), "check" | "run" | "embed") {
        return Err(bad(format!(
            "unknown command `{command}` (expected check, run or embed)"
        )));
    }
    let defaults = RunOptions::default();
    let mut args = Args {
        command,
        spec: PathBuf::new(),
        input: None,
        output: None,
        params: Vec::new(),
        params_hex: None,
        children: defaults.children,
        mtu: defaults.path_mtu,
        node: defaults.node,
        drain_us: defaults.drain_us,
        flush: true,
        json: false,
    };
    let mut spec = None;
    let run = args.command == "run";
    let embed = args.command == "embed";
    while let Some(arg) = argv.next() {
        let mut value = |name: &str| {
            argv.next()
                .ok_or_else(|| bad(format!("{name} needs a value")))
        };
        fn number<T: std::str::FromStr>(name: &str, text: String) -> Result<T, BadCommandLine> {
            text.parse()
                .map_err(|_| BadCommandLine(format!("{name}: `{text}` is not a valid number")))
        }
        match arg.as_str() {
            "--json" => args.json = true,
            "--param" => {
                let p = value("--param")?;
                if !p.contains('=') {
                    return Err(bad(format!("--param `{p}` is not KEY=VALUE")));
                }
                args.params.push(p);
            }
            "--params-hex" => {
                let hex = value("--params-hex")?;
                args.params_hex =
                    Some(input::parse_hex(&hex).map_err(|e| bad(format!("--params-hex: {e}")))?);
            }
            "--input" if run => args.input = Some(value("--input")?.into()),
            "--output" if run || embed => args.output = Some(value("--output")?.into()),
            "--children" if run => args.children = number("--children", value("--children")?)?,
            "--mtu" if run => args.mtu = number("--mtu", value("--mtu")?)?,
            "--node" if run => {
                let text = value("--node")?;
                args.node = text
                    .parse()
                    .map_err(|_| bad(format!("--node: `{text}` is not an IPv4 address")))?;
            }
            "--drain-us" if run => args.drain_us = number("--drain-us", value("--drain-us")?)?,
            "--no-flush" if run => args.flush = false,
            other if other.starts_with('-') => {
                return Err(bad(format!(
                    "unknown option `{other}` for {}",
                    args.command
                )));
            }
            path if spec.is_none() => spec = Some(PathBuf::from(path)),
            extra => return Err(bad(format!("unexpected argument `{extra}`"))),
        }
    }
    args.spec = spec.ok_or_else(|| bad(format!("{} needs a SPEC.wasm file", args.command)))?;
    if embed && args.output.is_none() {
        return Err(bad("embed needs --output OUT.wasm".into()));
    }
    if run && args.input.is_none() {
        return Err(bad("run needs --input FILE".into()));
    }
    if args.params_hex.is_some() && !args.params.is_empty() {
        return Err(bad("use either --param or --params-hex, not both".into()));
    }
    Ok(args)
}

impl Args {
    fn params(&self) -> Vec<u8> {
        self.params_hex
            .clone()
            .unwrap_or_else(|| self.params.join("\n").into_bytes())
    }
}

fn params_text(params: &[u8]) -> String {
    if params.is_empty() {
        "none embedded".into()
    } else {
        format!("{:?} (embedded)", String::from_utf8_lossy(params))
    }
}

/// `embed`: the module with the parameters embedded, checked by loading it before writing.
fn embed(args: &Args) -> Result<(), Failure> {
    let bytes = read_file(&args.spec, "spec")?;
    let out = concast_engine::params_section::with_params(&bytes, &args.params())
        .map_err(|e| format!("{}: {e}", args.spec.display()))?;
    let mut engine = Engine::new(EngineConfig::default()).map_err(|e| e.to_string())?;
    let spec = engine.load_spec(&out).map_err(|e| format!("the result would not load: {e}"))?;
    let path = args.output.as_ref().expect("checked in parse_args");
    std::fs::write(path, &out).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    say!("{}: sha256 {}, params {}", path.display(), spec.info().sha256_hex(), params_text(&spec.info().params));
    Ok(())
}

fn read_file(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
}

fn limits_text(l: &Limits) -> String {
    format!(
        "cpu {}; linear memory {} bytes per flow; module {} bytes; {} open states and {} held bytes per flow; output {} bytes, {} emits per build",
        l.cpu.describe(),
        l.memory_bytes,
        l.module_bytes,
        l.states,
        l.held_bytes,
        l.output_bytes,
        l.emits_per_build
    )
}

fn check(args: &Args) -> Result<(), Failure> {
    let bytes = read_file(&args.spec, "spec")?;
    let name = args.spec.display();
    let mut engine = Engine::new(EngineConfig::default()).map_err(|e| e.to_string())?;
    let spec = engine
        .load_spec(&bytes)
        .map_err(|e| format!("{name} is not a valid merge spec: {e}"))?;
    let key = FlowId::new(Ipv4Addr::new(10, 0, 0, 1), 1);
    let mut cfg = FlowConfig::new(key, spec.clone());
    cfg.params = args.params();
    engine
        .add_flow(cfg, 0)
        .map_err(|e| format!("{name} does not start a flow with these parameters: {e}"))?;
    let info: &SpecInfo = spec.info();
    let limits = &engine.config().limits;
    if args.json {
        let v = json!({
            "valid": true, "file": name.to_string(), "sha256": info.sha256_hex(), "size": info.size,
            "abi_version": info.abi_version, "exports": info.exports, "imports": info.imports,
            "memory_min_bytes": info.memory_min_bytes,
            "embedded_params": String::from_utf8_lossy(&info.params),
            "limits": {
                "cpu": limits.cpu.describe(), "memory_bytes": limits.memory_bytes, "module_bytes": limits.module_bytes,
                "states": limits.states, "held_bytes": limits.held_bytes, "output_bytes": limits.output_bytes,
                "emits_per_build": limits.emits_per_build,
            },
        });
        say!("{v}");
    } else {
        say!("{name}: a valid concast merge spec");
        say!("  sha256       {}", info.sha256_hex());
        say!("  size         {} bytes", info.size);
        say!("  abi version  {}", info.abi_version);
        say!("  exports      {}", info.exports.join("\n               "));
        let imports = if info.imports.is_empty() {
            "(none)".to_string()
        } else {
            info.imports.join("\n               ")
        };
        say!("  imports      {imports}");
        say!("  memory       {} bytes initially", info.memory_min_bytes);
        say!("  params       {}", params_text(&info.params));
        say!("  limits       {}", limits_text(limits));
        say!(
            "  init         ok with parameters {:?}",
            String::from_utf8_lossy(&args.params())
        );
    }
    Ok(())
}

fn output_json(o: &offline::RunOutput) -> Value {
    let d = &o.datagram;
    let ip = |at: usize| {
        d.get(at..at + 4)
            .map(|b| Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string())
    };
    json!({
        "t_us": o.t_us, "kind": o.kind.name(), "receiver": o.flow.receiver.to_string(), "group": o.flow.group,
        "src": ip(12), "dst": ip(16), "protocol": d.get(9), "ttl": d.get(8), "len": d.len(), "hex": hex(d),
    })
}

fn output_line(o: &offline::RunOutput) -> String {
    let d = &o.datagram;
    let (src, dst, proto, ttl) = if d.len() >= 20 {
        (
            Ipv4Addr::new(d[12], d[13], d[14], d[15]).to_string(),
            Ipv4Addr::new(d[16], d[17], d[18], d[19]).to_string(),
            d[9].to_string(),
            d[8].to_string(),
        )
    } else {
        ("?".into(), "?".into(), "?".into(), "?".into())
    };
    let header_len = d
        .first()
        .map_or(0, |b| usize::from(b & 0x0F) * 4)
        .min(d.len());
    let payload = &d[header_len..];
    let shown =
        hex(&payload[..payload.len().min(32)]) + if payload.len() > 32 { "…" } else { "" };
    format!(
        "{:>10}  {:<9}  {:<18}  {:>15} > {:<15}  {:>3}  {:>3}  {:>5}  {}",
        o.t_us,
        o.kind.name(),
        o.flow.to_string(),
        src,
        dst,
        proto,
        ttl,
        d.len(),
        shown
    )
}

fn flow_json(f: &FlowStats) -> Value {
    let c = &f.counters;
    json!({
        "receiver": f.key.receiver.to_string(), "group": f.key.group,
        "received": c.received, "merged": c.merged, "taken": c.taken, "dropped": c.dropped,
        "passed": c.passed, "malformed": c.malformed, "fail_open": c.fail_open,
        "unmerged_forwarded": c.unmerged_forwarded, "out": c.out, "out_bytes": c.out_bytes,
        "builds": c.builds, "built_from": c.built_from, "states_created": c.states_created,
        "timer_fires": c.timer_fires, "traps": c.traps, "open_states": f.open_states, "held_bytes": f.held_bytes,
        "quarantine": f.quarantine.as_ref().map(|q| json!({
            "call": q.call, "kind": q.fault.kind(), "reason": q.to_string(), "at_us": q.at_us,
        })),
    })
}

fn flow_text(f: &FlowStats) -> String {
    let c = &f.counters;
    let mut s = format!(
        "flow {}: received {}, merged {} (taken {}), out {} merged datagrams, unmerged {} (passed {}, malformed {}, fail-open {}), dropped {}, builds {}, timers fired {}, open states {}",
        f.key, c.received, c.merged, c.taken, c.out, c.unmerged_forwarded, c.passed, c.malformed, c.fail_open, c.dropped, c.builds, c.timer_fires, f.open_states
    );
    if let Some(q) = &f.quarantine {
        s += &format!("\n  QUARANTINED at {} us: {q}", q.at_us);
    }
    s
}

fn print_report(args: &Args, report: &RunReport) -> Result<(), Failure> {
    let outputs_to_stdout = args.output.is_none();
    if let Some(path) = &args.output {
        let data = if path.extension().is_some_and(|e| e == "pcap") {
            pcap::write(report.outputs.iter().map(|o| (o.t_us, o.datagram.clone())))
        } else {
            report
                .outputs
                .iter()
                .map(|o| output_json(o).to_string() + "\n")
                .collect::<String>()
                .into_bytes()
        };
        std::fs::write(path, data).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let merged = report
        .outputs
        .iter()
        .filter(|o| o.kind == OutputKind::Merged)
        .count();
    if args.json {
        if outputs_to_stdout {
            for o in &report.outputs {
                say!("{}", output_json(o));
            }
        }
        let summary = json!({"summary": {
            "spec_sha256": report.spec.sha256_hex(), "outputs": report.outputs.len(), "merged_outputs": merged,
            "end_us": report.end_us, "flows": report.flows.iter().map(flow_json).collect::<Vec<_>>(),
            "not_concast": report.not_concast.iter().map(|(o, e)| json!({"origin": o, "error": e})).collect::<Vec<_>>(),
            "refused": report.refused.iter().map(|(k, e)| json!({"receiver": k.receiver.to_string(), "group": k.group, "reason": e})).collect::<Vec<_>>(),
        }});
        say!("{summary}");
    } else {
        if outputs_to_stdout {
            say!(
                "{:>10}  {:<9}  {:<18}  {:>15} > {:<15}  {:>3}  {:>3}  {:>5}  payload",
                "t_us", "kind", "flow", "src", "dst", "pro", "ttl", "len"
            );
            for o in &report.outputs {
                say!("{}", output_line(o));
            }
        }
        say!("spec sha256 {}: {} datagrams forwarded, {merged} of them merged; virtual time ended at {} us", report.spec.sha256_hex(), report.outputs.len(), report.end_us);
        for f in &report.flows {
            say!("{}", flow_text(f));
        }
        for (origin, error) in &report.not_concast {
            say!("not a concast datagram: {origin} ({error}); forwarded unchanged");
        }
        for (key, why) in &report.refused {
            say!("flow {key} refused: {why}");
        }
    }
    Ok(())
}

fn run(args: &Args) -> Result<ExitCode, Failure> {
    let spec = read_file(&args.spec, "spec")?;
    let input_path = args.input.as_ref().expect("checked by parse_args");
    let (records, notes) = input::read(&read_file(input_path, "input")?)
        .map_err(|e| format!("{}: {e}", input_path.display()))?;
    for note in notes {
        eprintln!("concast-spec: {}: {note}", input_path.display());
    }
    let opts = RunOptions {
        params: args.params(),
        children: args.children,
        path_mtu: args.mtu,
        node: args.node,
        drain_us: args.drain_us,
        flush: args.flush,
        limits: Limits::default(),
    };
    let report = offline::run(&spec, &records, &opts)
        .map_err(|e| format!("{}: {e}", args.spec.display()))?;
    match print_report(args, &report) {
        Ok(()) | Err(Failure::StdoutClosed) => {}
        Err(e) => return Err(e),
    }
    Ok(if report.quarantined() > 0 {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1).peekable();
    // `help`, or -h/--help anywhere (`concast-spec run --help`), prints the usage.
    let wants_help = matches!(argv.peek().map(String::as_str), Some("help"))
        || std::env::args().skip(1).any(|a| a == "--help" || a == "-h");
    if wants_help {
        let _ = writeln!(io::stdout(), "{USAGE}"); // a closed stdout is no error here
        return ExitCode::SUCCESS;
    }
    let args = match parse_args(argv) {
        Ok(args) => args,
        Err(BadCommandLine(msg)) => {
            eprintln!("concast-spec: bad command line: {msg}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = if args.command == "check" {
        check(&args).map(|()| ExitCode::SUCCESS)
    } else if args.command == "embed" {
        embed(&args).map(|()| ExitCode::SUCCESS)
    } else {
        run(&args)
    };
    match result {
        Ok(code) => code,
        // check and embed print only after their work succeeded
        Err(Failure::StdoutClosed) => ExitCode::SUCCESS,
        Err(Failure::Msg(msg)) => {
            eprintln!("concast-spec: {msg}");
            ExitCode::from(1)
        }
    }
}
