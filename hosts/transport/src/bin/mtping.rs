//! mtping: an MTP server and client for trying the protocol between two hosts. `serve`
//! answers requests statelessly (files of a directory, or generated `size:N` objects), `ping`
//! times size-only transactions, `get` fetches objects and reports goodput and SHA-256.
//! Each prints one JSON line.
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use concast_transport::mtp::tool;
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
        #[command(flatten)]
        opts: ClientOpts,
    },
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
        Cmd::Get { server, name, count, parallel, limit, opts } => addr(&server)
            .and_then(|a| tool::get(a, &name, count, parallel, opts.config(), Duration::from_secs_f64(limit))),
    };
    match r {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("mtping: {e}");
            std::process::exit(1);
        }
    }
}
