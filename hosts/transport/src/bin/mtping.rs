//! mtping: an MTP server and client for trying the protocol between two hosts. `serve`
//! answers requests statelessly (files of a directory, or generated `size:N` objects), `ping`
//! times size-only transactions, `get` fetches objects and reports goodput and SHA-256.
//! Each prints one JSON line.
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use concast_transport::mtp::tool;
use concast_transport::mtp::blackbox::{self, Model};
use concast_transport::mtp::noble::LinkType;
use concast_transport::mtp::ClientConfig;

#[derive(Parser)]
#[command(name = "mtping", about = "MTP transactions: a stateless server, a ping and a fetcher")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct ClientOpts {
    /// Window algorithm: mtp (the dissertation's, one window per transaction), or for comparison a window shared by all transactions: mtp-cubic (our rule before the dissertation), mtp-halve, or one of the crate's congestion controls.
    #[arg(long, default_value = "mtp")]
    cc: String,
    /// The UDP receive buffer the window caps assume, bytes (the dissertation's rules, ch. V).
    #[arg(long, default_value_t = 212_992)]
    rcvbuf: usize,
    /// Local link-type hint (mtp.h LINK_*): unknown, modem, isdn, isdn2, dsl, cable, ethernet, fast.
    #[arg(long, default_value = "unknown")]
    link: String,
    /// Floor of the repeat interval, milliseconds (the dissertation: 500; it expects 400 to do).
    #[arg(long, default_value_t = 500)]
    repeat_floor_ms: u64,
    /// Largest reply payload asked for, bytes.
    #[arg(long, default_value_t = 1400)]
    size: usize,
    /// Expire timer per transaction, seconds.
    #[arg(long, default_value_t = 30.0)]
    expire: f64,
    /// Every request asks for one datagram (the rule before requests fetched up to a window;
    /// comparison only: the dissertation's subrequests ask for what the window has room for).
    #[arg(long)]
    one_datagram_requests: bool,
}

impl ClientOpts {
    fn config(&self) -> ClientConfig {
        let link = LinkType::by_name(&self.link).unwrap_or_else(|| {
            eprintln!("mtping: unknown --link {:?}", self.link);
            std::process::exit(2)
        });
        ClientConfig {
            cc: self.cc.clone(),
            rcvbuf: self.rcvbuf,
            link_rate: link.rate(),
            repeat_floor_us: self.repeat_floor_ms * 1000,
            max_size: self.size,
            min_size: 256.min(self.size),
            expire_us: (self.expire * 1e6) as u64,
            seed: std::process::id() as u64 ^ 0x5EED,
            one_datagram_requests: self.one_datagram_requests,
            ..ClientConfig::default()
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Answer requests until killed (or --secs pass); prints the server's counters then.
    Serve {
        #[arg(long, default_value = "0.0.0.0:7710")]
        listen: String,
        /// Serve the files of this directory by name (besides size:N).
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long)]
        secs: Option<f64>,
    },
    /// Size-only transactions one after another: the round trip of a transaction.
    Ping {
        server: String,
        #[arg(long, short = 'c', default_value_t = 10)]
        count: usize,
        /// Milliseconds between transactions.
        #[arg(long, default_value_t = 200)]
        interval_ms: u64,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// Fetch an object (a file name, or size:N) --count times, --parallel at a time.
    Get {
        server: String,
        #[arg(long, default_value = "size:1000000")]
        name: String,
        #[arg(long, default_value_t = 1)]
        count: usize,
        #[arg(long, default_value_t = 1)]
        parallel: usize,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 120.0)]
        limit: f64,
        /// Write the client's trace here as CSV: every request, reply and loss declared, with
        /// the transaction's window and transit after it.
        #[arg(long)]
        trace: Option<PathBuf>,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// The dissertation's simulator (section 7.4) in virtual time: its black-box network and
    /// TCP model, our MTP client and server. Prints CSV: the printed runs (--printed), a loss
    /// sweep (--sweep STEP), or one model from the flags.
    Sim {
        /// The section's printed runs (LAN, two routers, WAN, WAN at 3 %), both protocols.
        #[arg(long)]
        printed: bool,
        /// Loss from 0 to --max-loss in steps of this.
        #[arg(long)]
        sweep: Option<f64>,
        #[arg(long, default_value_t = 0.6)]
        max_loss: f64,
        #[arg(long, default_value_t = 0.0)]
        loss: f64,
        /// KB per second.
        #[arg(long, default_value_t = 1250.0)]
        bw: f64,
        #[arg(long, default_value_t = 80.0)]
        rtt_ms: f64,
        #[arg(long, default_value_t = 20.0)]
        cong: f64,
        /// Buffer padding, messages.
        #[arg(long, default_value_t = concast_transport::mtp::blackbox::BUFFER_PADDING)]
        buffer: f64,
        /// Messages (KB) to receive.
        #[arg(long, default_value_t = 1024)]
        messages: u64,
        /// Repeat-interval floors to run MTP with, ms (the dissertation's 500, its simulator's 50).
        #[arg(long, value_delimiter = ',', default_value = "500,50")]
        repeat_floor_ms: Vec<u64>,
        /// Seeds 1..=N.
        #[arg(long, default_value_t = 1)]
        seeds: u64,
        /// Protocols: mtp, tcp (comma separated); mtp-1k: mtp with the payload fixed at 1 KB (no size adaptation); mtp-listing: mtp-1k with Appendix F's loss and growth rules; mtp-cubic: the comparison window.
        #[arg(long, value_delimiter = ',', default_value = "mtp,tcp")]
        proto: Vec<String>,
    },
}

#[allow(clippy::too_many_arguments)]
fn sim(printed: bool, sweep: Option<f64>, max_loss: f64, one: Model, messages: u64, floors: &[u64], seeds: u64, protos: &[String]) -> Result<(), String> {
    if seeds == 0 || messages == 0 || one.bw <= 0.0 || one.cong < 1.0 || !(0.0..1.0).contains(&one.loss) || one.buffer < 1.0 {
        return Err("need --seeds ≥ 1, --messages ≥ 1, --bw > 0, --cong ≥ 1, 0 ≤ --loss < 1, --buffer ≥ 1".into());
    }
    if let Some(p) = protos.iter().find(|p| !["mtp", "mtp-1k", "mtp-listing", "mtp-cubic", "tcp"].contains(&p.as_str())) {
        return Err(format!("unknown protocol {p:?}: mtp, mtp-1k, mtp-listing, mtp-cubic or tcp"));
    }
    let runs: Vec<(String, Model, u64)> = if printed {
        Model::printed_runs().into_iter().map(|(n, m, k)| (n.to_string(), Model { buffer: one.buffer, ..m }, k)).collect()
    } else if let Some(step) = sweep {
        if !(step > 0.0 && step < 1.0 && (0.0..1.0).contains(&max_loss)) {
            return Err("--sweep must be in (0, 1) and --max-loss in [0, 1)".into());
        }
        let n = (max_loss / step + 1e-9).floor() as usize;
        (0..=n).map(|i| ("sweep".to_string(), Model { loss: (i as f64 * step * 1e6).round() / 1e6, ..one }, messages)).collect()
    } else {
        vec![("one".to_string(), one, messages)]
    };
    println!("{}", blackbox::CSV_HEADER);
    for (name, m, k) in &runs {
        for seed in 1..=seeds {
            for p in protos {
                if p == "tcp" {
                    let r = blackbox::run_tcp(*m, *k, seed);
                    println!("{}", blackbox::csv_row(name, "tcp", m, *k, None, seed, &r));
                    continue;
                }
                for &f in floors {
                    let r = blackbox::run_mtp(*m, *k, f * 1000, p, seed)?;
                    println!("{}", blackbox::csv_row(name, p, m, *k, Some(f * 1000), seed, &r));
                }
            }
        }
    }
    Ok(())
}

fn addr(s: &str) -> std::io::Result<SocketAddr> {
    let s = if s.contains(':') { s.to_string() } else { format!("{s}:7710") };
    s.to_socket_addrs()?.next().ok_or_else(|| std::io::Error::other(format!("{s}: no address")))
}

fn main() {
    let r = match Cli::parse().cmd {
        Cmd::Serve { listen, dir, secs } => tool::run_server(&listen, dir, secs),
        Cmd::Ping { server, count, interval_ms, opts } => {
            addr(&server).and_then(|a| tool::ping(a, count, Duration::from_millis(interval_ms), opts.config()))
        }
        Cmd::Get { server, name, count, parallel, limit, trace, opts } => addr(&server).and_then(|a| {
            tool::get_traced(a, &name, count, parallel, opts.config(), Duration::from_secs_f64(limit), trace.as_deref())
        }),
        Cmd::Sim { printed, sweep, max_loss, loss, bw, rtt_ms, cong, buffer, messages, repeat_floor_ms, seeds, proto } => {
            let one = Model { loss, bw, rtt_us: (rtt_ms * 1000.0) as u64, cong, buffer };
            match sim(printed, sweep, max_loss, one, messages, &repeat_floor_ms, seeds, &proto) {
                Ok(()) => return,
                Err(e) => {
                    eprintln!("mtping: {e}");
                    std::process::exit(2);
                }
            }
        }
    };
    match r {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("mtping: {e}");
            std::process::exit(1);
        }
    }
}
