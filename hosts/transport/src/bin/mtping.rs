//! mtping: an MTP server and client for trying the protocol between two hosts. `serve`
//! answers requests statelessly (files of a directory, or generated `size:N` objects), `ping`
//! times size-only transactions, `get` fetches objects and reports goodput and SHA-256.
//! Each prints one JSON line.
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use concast_transport::mtp::tool;
use concast_transport::mtp::ClientConfig;

#[derive(Parser)]
#[command(name = "mtping", about = "MTP transactions: a stateless server, a ping and a fetcher")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct ClientOpts {
    /// Window algorithm: mtp (MTP's own), mtp-halve (its earlier halving rule) or one of the crate's congestion controls.
    #[arg(long, default_value = "mtp")]
    cc: String,
    /// Largest reply payload asked for, bytes.
    #[arg(long, default_value_t = 1400)]
    size: usize,
    /// Expire timer per transaction, seconds.
    #[arg(long, default_value_t = 30.0)]
    expire: f64,
}

impl ClientOpts {
    fn config(&self) -> ClientConfig {
        ClientConfig {
            cc: self.cc.clone(),
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
