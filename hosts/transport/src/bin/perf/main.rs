//! concast-perf: bulk throughput, ping-pong latency and streaming between two hosts, over
//! this crate's transport (any composite and congestion control), kernel TCP (any of the
//! kernel's congestion controls) or plain UDP. Each run prints one JSON object per line.
mod ctp;
mod kernel;
mod report;
mod trace;

/// `--mode mtp`: the MTP tool's server and fetcher, one JSON line each.
mod mtp_mode {
    use concast_transport::mtp::{tool, ClientConfig};
    use std::time::Duration;

    /// Serves until `idle` seconds pass without a request (after the first), as the other
    /// modes' servers end a flow.
    pub fn server(listen: &str, idle: f64) -> Result<(), String> {
        tool::run_server_idle(listen, None, None, Some(Duration::from_secs_f64(idle)))
            .map(|v| println!("{v}"))
            .map_err(|e| e.to_string())
    }

    pub fn client(to: &str, bytes: u64, size: usize, secs: f64) -> Result<(), String> {
        let addr = std::net::ToSocketAddrs::to_socket_addrs(to).map_err(|e| e.to_string())?.next().ok_or("no address")?;
        let (name, count, limit) =
            if bytes > 0 { (format!("size:{bytes}"), 1, 600.0) } else { (format!("size:{size}"), usize::MAX, secs) };
        let v = tool::get(addr, &name, count, 1, ClientConfig::default(), Duration::from_secs_f64(limit))
            .map_err(|e| e.to_string())?;
        println!("{v}");
        Ok(())
    }
}

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "concast-perf", about = "iperf-like measurements of the host transport")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
pub enum Proto {
    Ctp,
    Tcp,
    Udp,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
pub enum Mode {
    Bulk,
    Pingpong,
    Stream,
    /// MTP transactions (crate::mtp, as mtping): the server answers statelessly; the client
    /// fetches one --bytes object, or --size objects for --secs. Window: MTP's own.
    Mtp,
}

#[derive(clap::Args, Clone, Debug)]
pub struct Common {
    #[arg(long, value_enum, default_value = "ctp")]
    pub proto: Proto,
    #[arg(long, value_enum, default_value = "bulk")]
    pub mode: Mode,
    /// Composite: a preset (Minimal, LossyFIFO, Video, Audio, Bulk) or micro+micro+...
    #[arg(long, default_value = "Bulk")]
    pub composite: String,
    /// Congestion control: for ctp one of the crate's algorithms, for tcp a kernel module.
    #[arg(long, default_value = "newreno")]
    pub cc: String,
    /// Message size in bytes (bulk: per send call; ping-pong: per message; stream: per packet).
    #[arg(long, default_value_t = 65536)]
    pub size: usize,
    /// Resize: seconds after the path MTU is settled before probing for a larger one
    /// (default 600, RFC 8899's raise timer).
    #[arg(long)]
    pub pmtu_raise: Option<f64>,
    /// ctp: the session's minimum RTO in ms (RFC 6298 §2.4; default 20). An algorithm with an
    /// RTO policy of its own (ctcp) keeps its own.
    #[arg(long)]
    pub min_rto_ms: Option<f64>,
    /// ctp: the session's margin G over SRTT in the RTO, SRTT + max(G, 4 RTTVAR), in ms
    /// (RFC 6298 §2.3; default 20).
    #[arg(long)]
    pub rto_g_ms: Option<f64>,
    /// ctp: the most segments a session keeps in flight: the receiver's advertised window
    /// (its socket's receive buffer is sized for it) and the sender's buffer of unacknowledged
    /// data (default 8192, about 11 MB; a 1 Gbit/s, 110 ms path's BDP is 9,082 frames).
    #[arg(long)]
    pub window_segs: Option<u32>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Receive (bulk, stream) or echo (pingpong); prints one JSON line per flow.
    Server {
        #[arg(long, default_value = "0.0.0.0:5201")]
        listen: String,
        /// Flows to serve before exiting.
        #[arg(long, default_value_t = 1)]
        flows: usize,
        /// Report the SHA-256 of everything each flow delivered.
        #[arg(long)]
        hash: bool,
        /// A flow with nothing received for this long is over (seconds).
        #[arg(long, default_value_t = 3.0)]
        idle: f64,
        /// ctp, the streaming merge (UDT/CCC §4): --rate-after seconds after the first
        /// delivery, ask the senders for this many bits/s in all, an equal share each, by a
        /// rate message (cc::group::rate_msg) that rate-driven algorithms (blaster) obey.
        #[arg(long)]
        set_rate: Option<f64>,
        #[arg(long, default_value_t = 2.0)]
        rate_after: f64,
        #[command(flatten)]
        common: Common,
    },
    /// Send (bulk, stream) or ping (pingpong); prints one JSON line.
    Client {
        #[arg(long)]
        to: String,
        /// Bulk and stream: seconds to send for.
        #[arg(long, default_value_t = 5.0)]
        secs: f64,
        /// Bulk: send exactly this many pseudo-random bytes (reporting their SHA-256), not --secs.
        #[arg(long, default_value_t = 0)]
        bytes: u64,
        /// Ping-pong: round trips.
        #[arg(long, default_value_t = 1000)]
        count: usize,
        /// Stream rate and the blaster's rate, bits per second.
        #[arg(long, default_value_t = 128_000.0)]
        rate: f64,
        /// ctp bulk for --secs: this many flows (a session and socket each), all driven by
        /// one loop in this process, as UDT/CCC's CTCP multiplexes its parallel flows in one
        /// application; one JSON line per flow.
        #[arg(long, default_value_t = 1)]
        parallel: usize,
        #[command(flatten)]
        common: Common,
    },
}

pub struct ClientArgs {
    pub to: String,
    pub bytes: u64,
    pub secs: f64,
    pub count: usize,
    pub rate: f64,
    pub parallel: usize,
    pub c: Common,
}

fn main() {
    // Keep freed memory in the process: glibc otherwise gives the top of the heap back after
    // each 64 KB message is freed and takes page faults for the next (11% of a receiver's
    // CPU, profiled). Same for every --proto, so the peers are measured alike.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
    }
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Server { listen, idle, common, .. } if common.mode == Mode::Mtp => mtp_mode::server(&listen, idle),
        Cmd::Client { to, secs, bytes, common, .. } if common.mode == Mode::Mtp => {
            mtp_mode::client(&to, bytes, common.size, secs)
        }
        Cmd::Server { listen, flows, idle, hash, set_rate, rate_after, common } => match common.proto {
            Proto::Ctp => ctp::server(&listen, flows, idle, hash, set_rate.map(|r| (r, rate_after)), &common),
            _ => kernel::server(&listen, flows, idle, &common),
        },
        Cmd::Client { parallel, .. } if !(1..=ctp::MAX_PARALLEL).contains(&parallel) => {
            Err(format!("--parallel must be between 1 and {} flows, got {parallel}", ctp::MAX_PARALLEL))
        }
        Cmd::Client { parallel, bytes, common, .. }
            if parallel > 1 && (common.proto != Proto::Ctp || common.mode != Mode::Bulk || bytes > 0) =>
        {
            Err("--parallel needs --proto ctp --mode bulk, timed by --secs (not --bytes)".into())
        }
        Cmd::Client { to, secs, bytes, count, rate, parallel, common } => {
            let a = ClientArgs { to, bytes, secs, count, rate, parallel, c: common };
            match a.c.proto {
                Proto::Ctp if a.parallel > 1 => ctp::parallel_bulk(&a),
                Proto::Ctp => ctp::client(&a),
                _ => kernel::client(&a),
            }
        }
    };
    if let Err(e) = r {
        eprintln!("concast-perf: {e}");
        std::process::exit(1);
    }
}
