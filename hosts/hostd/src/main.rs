//! concast-hostd: the per-host concast agent (docs/hostd.md).
//!
//! Runs inside one host's network namespace: the CSP endpoint (raw sockets), sender-side
//! merging and the receiver's final merge (the merge engine), and the concast API for
//! applications on a Unix socket. Stops cleanly on SIGTERM or SIGINT, leaving its flows.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use concast_hostd::daemon::{self, Settings};
use concast_daemon::log::{emit, Level};

#[derive(Parser, Debug)]
#[command(name = "concast-hostd", version, about = "The per-host concast agent: concast API, CSP endpoint, sender-side and final merging")]
struct Args {
    /// Host description written by the topology (JSON: host, addr, socket, run_dir, ...); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// This host's address (source of its CSP and data; R for the groups it serves).
    /// Default: from --config, else the namespace's only non-loopback IPv4 address.
    #[arg(long)]
    addr: Option<Ipv4Addr>,
    /// API socket path (default: from --config, else /run/concast/hostd.sock).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Hold time (seconds) asked of upstream nodes and granted to children asking for 0;
    /// refreshes go out every hold/3.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u16).range(1..))]
    hold: u16,
    /// First JOIN retransmission delay in milliseconds (doubles on every try, 5 tries).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    join_retry_ms: u64,
    /// How long (ms) a child that sent LEAVE still counts, so data it sent just before the
    /// LEAVE and that arrives after it is still merged (0 = prune at once).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    leave_delay_ms: u64,
    /// Merge timers (sender-side merging) fire this many µs before their deadline, for
    /// wake-up and send latency, as routerd's flag of the same name.
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    timer_lead_us: u64,
    /// Send every captured datagram toward R as its own one-record MplexPkt instead of
    /// bundling them here first (to measure routers' bundling alone, as before hosts bundled).
    #[arg(long)]
    no_sender_bundling: bool,
    /// File holding the Ed25519 key this host signs the specs it serves with (64 hex digits),
    /// created on first start. Default: <run_dir>/hosts/<host>.key from --config, else
    /// /var/lib/concast/hostd-<addr>.key.
    #[arg(long)]
    spec_key: Option<PathBuf>,
    /// Serve specs unsigned (tests of routers that accept them; docs/protocol.md 2.9).
    #[arg(long)]
    unsigned_specs: bool,
    /// As a sender, run specs that come unsigned (from a receiver that does not sign).
    #[arg(long)]
    accept_unsigned_specs: bool,
    /// Merge flows whose sandboxes come from a pool reserved when the first flow starts
    /// (as routerd's flag of the same name); flows beyond it run on demand, counted
    /// (stats: engine.pool_fallbacks). 0 = on-demand only.
    #[arg(long, default_value_t = concast_engine::DAEMON_POOL_SLOTS, value_parser = clap::value_parser!(u32).range(0..=4096))]
    flow_pool_slots: u32,
}

/// Every IPv4 address of this namespace but loopback ones.
fn own_addresses() -> Vec<Ipv4Addr> {
    let mut found = Vec::new();
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    if unsafe { libc::getifaddrs(&mut ifap) } != 0 {
        return found;
    }
    let mut p = ifap;
    while !p.is_null() {
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() && unsafe { (*ifa.ifa_addr).sa_family } as i32 == libc::AF_INET {
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            let a = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            if !a.is_loopback() {
                found.push(a);
            }
        }
        p = ifa.ifa_next;
    }
    unsafe { libc::freeifaddrs(ifap) };
    found
}

fn settings(a: &Args) -> Result<Settings, String> {
    let cfg = concast_daemon::read_config(a.config.as_deref())?;
    let s = |k: &str| cfg.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let addr = match (a.addr, s("addr")) {
        (Some(x), _) => x,
        (None, Some(text)) => text.parse().map_err(|_| format!("addr {text:?} in --config is not an IPv4 address"))?,
        (None, None) => match own_addresses().as_slice() {
            [one] => *one,
            [] => return Err("this namespace has no IPv4 address: give --addr".into()),
            many => return Err(format!("this namespace has several addresses ({many:?}): give --addr")),
        },
    };
    let socket = a.socket.clone().or_else(|| s("socket").map(PathBuf::from)).unwrap_or_else(|| PathBuf::from("/run/concast/hostd.sock"));
    let csp = concast_csp::Config { hold_s: a.hold, join_retry_us: a.join_retry_ms * 1000,
                                     leave_delay_us: a.leave_delay_ms * 1000,
                                     verify_specs: !a.accept_unsigned_specs, ..Default::default() };
    let spec_key = if a.unsigned_specs {
        None
    } else {
        let path = match (a.spec_key.clone(), s("run_dir"), s("host")) {
            (Some(p), _, _) => p,
            (None, Some(dir), Some(host)) => PathBuf::from(dir).join("hosts").join(format!("{host}.key")),
            _ => PathBuf::from(format!("/var/lib/concast/hostd-{addr}.key")),
        };
        Some(concast_hostd::speckey::load_or_create(&path)?)
    };
    Ok(Settings { addr, socket, csp, timer_lead_us: a.timer_lead_us, sender_bundling: !a.no_sender_bundling, spec_key, flow_pool_slots: a.flow_pool_slots })
}

fn main() -> ExitCode {
    let args = Args::parse();
    let s = match settings(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("concast-hostd: {e}");
            return ExitCode::from(2);
        }
    };
    match daemon::run(s) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            emit(Level::Error, "fatal", &[("error", &e)]);
            ExitCode::FAILURE
        }
    }
}
