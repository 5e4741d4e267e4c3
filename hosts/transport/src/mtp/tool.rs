//! What `mtping` and `concast-perf --mode mtp` run: a file-serving stateless server, a
//! ping of size-only transactions, and timed object fetches hash-checked with SHA-256.
//! Each returns one JSON object.
use std::fs::File;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::client::{Abort, Client, ClientConfig, ClientStats, Output, RequestOpts, TraceEvent};
use super::server::{generated_size, Answer, Objects, Query, Responder};
use super::udp::{serve_idle, Endpoint};

/// Files of one directory by name (no paths), and the generated `size:N` objects.
pub struct Files {
    pub dir: Option<PathBuf>,
}

impl Responder for Files {
    fn respond(&mut self, q: &Query) -> Answer {
        let Some(dir) = &self.dir else { return Objects::default().respond(q) };
        if generated_size(q.name).is_some() {
            return Objects::default().respond(q);
        }
        let Ok(name) = std::str::from_utf8(q.name) else { return Answer::Refuse("name is not UTF-8".into()) };
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Answer::Refuse(format!("{name:?} is not a plain file name"));
        }
        let Ok(f) = File::open(dir.join(name)) else { return Answer::Refuse(format!("no object named {name:?}")) };
        let Ok(len) = f.metadata().map(|m| m.len()) else { return Answer::Refuse("unreadable".into()) };
        let Ok(total) = u32::try_from(len) else { return Answer::Refuse("object larger than 4 GiB".into()) };
        if !q.want_payload {
            return Answer::Size(total);
        }
        let n = (total as u64).saturating_sub(q.offset as u64).min(q.len as u64) as usize;
        let mut data = vec![0; n];
        match f.read_exact_at(&mut data, q.offset as u64) {
            Ok(()) => Answer::Bytes { total: Some(total), data },
            Err(e) => Answer::Refuse(format!("read failed: {e}")),
        }
    }
}

/// Serves until `secs` pass (forever when None); returns the server's counters.
pub fn run_server(listen: &str, dir: Option<PathBuf>, secs: Option<f64>) -> io::Result<Value> {
    run_server_idle(listen, dir, secs, None)
}

/// `run_server`, over also once `idle` passes without a request after the first.
pub fn run_server_idle(listen: &str, dir: Option<PathBuf>, secs: Option<f64>, idle: Option<Duration>) -> io::Result<Value> {
    let sock = UdpSocket::bind(listen)?;
    let stop = AtomicBool::new(false);
    let s = std::thread::scope(|sc| {
        if let Some(secs) = secs {
            let stop = &stop;
            sc.spawn(move || {
                std::thread::sleep(Duration::from_secs_f64(secs));
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            });
        }
        serve_idle(&sock, Files { dir }, &stop, idle)
    })?;
    let st = s.stats;
    Ok(json!({"role": "server", "requests": st.requests, "replies": st.replies, "refused": st.refused, "malformed": st.malformed}))
}

/// A client's counters as JSON (also `ffi_mtp`'s stats).
pub fn stats_json(s: &ClientStats) -> Value {
    json!({"requests": s.requests, "repeats": s.repeats, "replies": s.replies, "fast_repeats": s.fast_repeats,
           "timeouts": s.timeouts, "silent": s.silent, "duplicates": s.duplicates, "reordered": s.reordered,
           "stale": s.stale, "forged": s.forged, "truncated": s.truncated, "malformed": s.malformed,
           "size_cuts": s.size_cuts, "size_grows": s.size_grows, "window_grows": s.window_grows,
           "window_cuts": s.window_cuts, "overflow_cuts": s.overflow_cuts, "server_limited": s.server_limited,
           "channel_errors": s.channel_errors})
}

/// `count` size-only transactions one after another, `interval` apart; round trips in µs.
pub fn ping(server: SocketAddr, count: usize, interval: Duration, cfg: ClientConfig) -> io::Result<Value> {
    let mut ep = Endpoint::new(Client::new(cfg).map_err(io::Error::other)?, server)?;
    let (mut rtts, mut lost) = (Vec::new(), 0);
    for i in 0..count {
        let t0 = Instant::now();
        let opts = RequestOpts { size_only: true, expire_us: Some(2_000_000), ..Default::default() };
        let now = ep.now();
        ep.client.request(now, b"size:0", opts).map_err(io::Error::other)?;
        let mut ok = false;
        ep.run(Duration::from_secs(3), |_, _, o| {
            ok = matches!(o, Output::Done { .. });
            true
        })?;
        if ok {
            rtts.push(t0.elapsed().as_secs_f64() * 1e6);
        } else {
            lost += 1;
        }
        if i + 1 < count {
            std::thread::sleep(interval);
        }
    }
    let mut sorted = rtts.clone();
    sorted.sort_by(f64::total_cmp);
    let pick = |q: f64| sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize).copied();
    Ok(json!({"role": "ping", "sent": count, "answered": rtts.len(), "lost": lost,
              "min_us": pick(0.0), "median_us": pick(0.5), "p99_us": pick(0.99), "max_us": pick(1.0),
              "rtts_us": rtts, "stats": stats_json(&ep.client.stats())}))
}

/// Fetches `name` `count` times, `parallel` transactions at a time, and reports goodput and
/// the SHA-256 of the first copy (and whether every copy had the same).
pub fn get(server: SocketAddr, name: &str, count: usize, parallel: usize, cfg: ClientConfig, limit: Duration) -> io::Result<Value> {
    get_traced(server, name, count, parallel, cfg, limit, None)
}

/// `get`, writing the client's trace (`ClientConfig::trace`: every request, reply and loss
/// with the window and transit after it) as CSV to `trace` when given.
pub fn get_traced(server: SocketAddr, name: &str, count: usize, parallel: usize, mut cfg: ClientConfig, limit: Duration, trace: Option<&std::path::Path>) -> io::Result<Value> {
    cfg.trace |= trace.is_some();
    let mut ep = Endpoint::new(Client::new(cfg).map_err(io::Error::other)?, server)?;
    let (mut started, mut done, mut failed, mut bytes) = (0usize, 0usize, Vec::new(), 0u64);
    let (mut hash, mut same) = (None::<String>, true);
    let t0 = Instant::now();
    while started < count.min(parallel.max(1)) {
        let now = ep.now();
        ep.client.request(now, name.as_bytes(), RequestOpts::default()).map_err(io::Error::other)?;
        started += 1;
    }
    let finished = ep.run(limit, |c, now, o| {
        match o {
            Output::Done { object, .. } => {
                bytes += object.len() as u64;
                let h = format!("{:x}", Sha256::digest(&object));
                same &= hash.as_ref().is_none_or(|f| *f == h);
                hash.get_or_insert(h);
                done += 1;
            }
            Output::Failed { reason, .. } => failed.push(reason),
            Output::Expired { tx } => failed.push(format!("transaction {tx:#010x} expired")),
            _ => {}
        }
        if started < count && failed.is_empty() {
            match c.request(now, name.as_bytes(), RequestOpts::default()) {
                Ok(_) => started += 1,
                Err(e) => failed.push(e),
            }
        }
        done + failed.len() >= count || !failed.is_empty()
    })?;
    let secs = t0.elapsed().as_secs_f64();
    // at the limit: stop what is still running and count its contiguous prefix apart
    let mut partial = 0u64;
    let now = ep.now();
    for id in ep.client.transactions() {
        partial += ep.client.received_prefix(id).map_or(0, |p| p.len() as u64);
        let _ = ep.client.abort(now, id, Abort::Destroy);
    }
    let (mean_window, mean_in_flight) = ep.client.occupancy();
    if let Some(path) = trace {
        write_trace(path, &ep.client.take_trace())?;
    }
    Ok(json!({"role": "get", "name": name, "objects": done, "wanted": count, "complete": finished && failed.is_empty(),
              "failed": failed, "bytes": bytes, "partial_bytes": partial, "secs": secs, "kbytes_per_s": bytes as f64 / 1e3 / secs,
              "mbit_s": bytes as f64 * 8.0 / 1e6 / secs, "sha256": hash, "all_same": same,
              "window": ep.client.window(), "mean_window": mean_window,
              "mean_in_flight": mean_in_flight, "flowtimeout_us": ep.client.flowtimeout_us(),
              "datagram_size": ep.client.datagram_size(), "stats": stats_json(&ep.client.stats()),
              "kernel_rcvbuf": ep.kernel_rcvbuf, "rcvbuf_drops": ep.overflow_drops(), "watch_cuts": ep.watch_cuts}))
}

/// A client's trace as CSV, one line per event.
pub fn write_trace(path: &std::path::Path, events: &[TraceEvent]) -> io::Result<()> {
    use std::io::Write;
    let mut w = io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(w, "t_us,kind,tx,offset,bytes,window,transit")?;
    for e in events {
        writeln!(w, "{},{},{},{},{},{},{}", e.at_us, e.kind, e.tx, e.offset, e.bytes, e.window, e.transit)?;
    }
    w.flush()
}
