//! concast-perf over this crate's transport.
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use concast_transport::micro::rtxaudit;
use concast_transport::session::Stats;
use concast_transport::udp::{self, Conn, IoStats, Server};
use concast_transport::{cc, Bytes, Composite, Config, Output};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::report::{self, Tally};
use crate::trace::Trace;
use crate::{ClientArgs, Common, Mode};

/// The largest `--window-segs`: 1 << 20 segments is 1.4 GB of payload in flight.
const MAX_WINDOW_SEGS: u32 = 1 << 20;

/// Bytes a bulk sender hands the session between pumps.
const TURN_BYTES: usize = 256 << 10;

/// The most flows one `--parallel` client drives (the table's largest count is 64).
pub const MAX_PARALLEL: usize = 256;

/// The longest time between two turns of a bulk sender's loop (a turn waits at most 1 ms): a
/// sender held elsewhere (the send path, the scheduler) reads no ACKs meanwhile; and of that
/// turn, how long the thread was runnable but not run, and in all (schedstat).
struct Turns {
    last: Instant,
    max_gap: Duration,
    max_gap_delay_ns: u64,
    run_delay: report::RunDelay,
    delay0: Option<u64>,
    last_delay: Option<u64>,
}

impl Turns {
    fn new() -> Turns {
        let run_delay = report::RunDelay::open();
        let delay0 = run_delay.ns();
        Turns { last: Instant::now(), max_gap: Duration::ZERO, max_gap_delay_ns: 0, run_delay, delay0, last_delay: delay0 }
    }

    /// Called at the start of every turn.
    fn turn(&mut self) {
        let gap = self.last.elapsed();
        let delay = self.run_delay.ns();
        if gap > self.max_gap {
            self.max_gap = gap;
            self.max_gap_delay_ns = delay.zip(self.last_delay).map_or(0, |(d, l)| d.saturating_sub(l));
        }
        self.last_delay = delay;
        self.last = Instant::now();
    }

    fn json(&self) -> Value {
        json!({"max_turn_gap_us": self.max_gap.as_micros() as u64, "max_turn_gap_run_delay_us": self.max_gap_delay_ns / 1000,
            "run_delay_s": self.run_delay.ns().zip(self.delay0).map(|(d, d0)| d.saturating_sub(d0) as f64 / 1e9)})
    }
}

/// Up to TURN_BYTES (a few GSO batches) handed to the session, so the datagrams they make go
/// out before more are cut; false when the session took nothing (its buffer is full).
fn fill(conn: &mut Conn, buf: &Bytes, sent: &mut u64) -> Result<bool, String> {
    let mut took = 0;
    while took < TURN_BYTES {
        if !conn.send_shared(buf.clone()).map_err(|e| e.to_string())? {
            break;
        }
        took += buf.len();
        *sent += buf.len() as u64;
    }
    Ok(took > 0)
}

fn config(c: &Common, rate: f64) -> Result<Config, String> {
    let comp = Composite::parse(&c.composite).map_err(|r| format!("composite: {r}"))?;
    cc::by_name(&c.cc, rate)?;
    let mut cfg = Config::new(comp);
    cfg.cc = c.cc.clone();
    cfg.cc_rate_bps = rate;
    if let Some(secs) = c.pmtu_raise {
        if !(secs.is_finite() && secs > 0.0) {
            return Err(format!("--pmtu-raise must be a positive number of seconds, got {secs}"));
        }
        cfg.pmtu_raise_us = (secs * 1e6) as u64;
    }
    for (name, v, to) in [("--min-rto-ms", c.min_rto_ms, &mut cfg.min_rto_us), ("--rto-g-ms", c.rto_g_ms, &mut cfg.rto_g_us)] {
        if let Some(ms) = v {
            if !(ms.is_finite() && ms > 0.0 && ms <= 60_000.0) {
                return Err(format!("{name} must be a number of milliseconds in (0, 60000], got {ms}"));
            }
            *to = (ms * 1e3) as u64;
        }
    }
    if let Some(w) = c.window_segs {
        if !(64..=MAX_WINDOW_SEGS).contains(&w) {
            return Err(format!("--window-segs must be between 64 and {MAX_WINDOW_SEGS} segments, got {w}"));
        }
        cfg.recv_wnd_segs = w;
        cfg.send_buf_segs = w as usize;
    }
    Ok(cfg)
}

pub fn stats_json(s: &Stats) -> Value {
    json!({
        "segs_sent": s.segs_sent, "segs_received": s.segs_received, "retransmits": s.retransmits,
        "timeouts": s.timeouts, "spurious_timeouts": s.spurious_timeouts, "malformed": s.malformed, "duplicates": s.duplicates,
        "late": s.late, "fec_recovered": s.fec_recovered, "msgs_incomplete": s.msgs_incomplete,
        "rack_losses": s.rack_losses,
        "rtx_by_cause": by_cause(&s.rtx_by_cause), "rtx_early": by_cause(&s.rtx_early),
    })
}

/// Counts per loss detector, by name (`micro::rtxaudit`).
fn by_cause(n: &[u64; rtxaudit::CAUSES]) -> Value {
    rtxaudit::CAUSE_NAMES.iter().zip(n).map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>().into()
}

/// Which I/O path ran (GSO/GRO or the plain fallback, and why) and its system calls: the
/// socket is shared by all of a server's flows, so a server's figures are for all of them.
pub fn io_json(s: &IoStats) -> Value {
    let mb = |b: u64| (b as f64 / 1e6).max(1e-9);
    json!({
        "gso": s.gso, "gro": s.gro, "fallback": s.fallback,
        "df": s.df, "too_big": s.too_big, "ptb_reports": s.ptb_reports,
        "send_calls": s.send_calls, "datagrams_sent": s.datagrams_sent, "bytes_sent": s.bytes_sent,
        "recv_calls": s.recv_calls, "datagrams_received": s.datagrams_received, "bytes_received": s.bytes_received,
        "send_full": s.send_full, "send_wait_us": s.send_wait_us, "send_wait_max_us": s.send_wait_max_us,
        "reads_cut": s.reads_cut,
        "poll_late_max_us": s.poll_late_max_us, "polls_late_10ms": s.polls_late_10ms,
        "polls": s.polls, "poll_late_mean_us": s.poll_late_us as f64 / s.polls.max(1) as f64,
        "send_calls_per_mb": s.send_calls as f64 / mb(s.bytes_sent),
        "recv_calls_per_mb": s.recv_calls as f64 / mb(s.bytes_received),
    })
}

/// The sender's congestion state when it finished, to read a run by.
fn state_json(s: &concast_transport::session::Shared) -> Value {
    let cwnd = if s.cwnd.is_finite() { json!(s.cwnd) } else { Value::Null };
    json!({"cwnd": cwnd, "srtt_us": s.srtt_us, "min_rtt_us": s.min_rtt_us, "rto_us": s.rto(), "peer_wnd": s.peer_wnd})
}

fn labels(c: &Common, comp: Composite) -> Value {
    json!({"proto": "ctp", "composite": comp.to_string(), "cc": c.cc, "mode": format!("{:?}", c.mode).to_lowercase()})
}

/// `set_rate`: (bits/s for all senders together, seconds after the first delivery).
pub fn server(listen: &str, flows: usize, idle: f64, hash: bool, set_rate: Option<(f64, f64)>, c: &Common)
              -> Result<(), String> {
    if let Some((bps, after)) = set_rate {
        if !(bps.is_finite() && bps >= 1.0 && after.is_finite() && after >= 0.0) {
            return Err(format!("--set-rate must be >= 1 bit/s and --rate-after >= 0 s, got {bps} and {after}"));
        }
    }
    let mut first_delivery: Option<Instant> = None;
    let mut rate_sent = false;
    // the server's own sending (echoes, stream replies) is paced, if at all, at 1 Gbit/s
    let cfg = config(c, 1e9)?;
    let comp = cfg.composite;
    let mut srv = Server::bind(listen, cfg, Some(comp)).map_err(|e| format!("bind {listen}: {e}"))?;
    let mut tallies: HashMap<SocketAddr, Tally> = HashMap::new();
    let (mut done, mut refused_seen) = (0, 0);
    let idle_us = (idle * 1e6) as u64;
    let mut trace = Trace::from_env("server");
    let finish = |srv: &mut Server, t: &mut HashMap<SocketAddr, Tally>, a: SocketAddr, why: &str| {
        let tally = t.remove(&a).unwrap_or_default();
        let stats = srv.sessions.remove(&a).map(|s| stats_json(&s.stats()));
        let mut extra = labels(c, comp);
        let io = io_json(&srv.io_stats());
        report::merge(&mut extra, json!({"peer": a.to_string(), "end": why, "stats": stats, "io": io}));
        report::print(&tally.json(extra));
    };
    while done < flows {
        for (a, o) in srv.pump(Duration::from_millis(5)).map_err(|e| e.to_string())? {
            match o {
                Output::Deliver(m) => {
                    let t = tallies.entry(a).or_insert_with(|| Tally {
                        hash: hash.then(Sha256::new),
                        ..Tally::default()
                    });
                    t.add(&m, c.mode == Mode::Stream);
                    first_delivery.get_or_insert_with(Instant::now);
                    if c.mode == Mode::Pingpong {
                        srv.send(a, &m);
                    }
                }
                Output::Closed(why) => {
                    finish(&mut srv, &mut tallies, a, &why);
                    done += 1;
                }
                _ => {}
            }
        }
        for (a, why) in &srv.refused[refused_seen..] {
            eprintln!("concast-perf: refused {a}: {why}");
        }
        refused_seen = srv.refused.len();
        if let (Some((bps, after)), Some(t0), false) = (set_rate, first_delivery, rate_sent) {
            if t0.elapsed().as_secs_f64() >= after && !srv.sessions.is_empty() {
                let (now, share) = (srv.now(), (bps / srv.sessions.len() as f64) as u64);
                for s in srv.sessions.values_mut() {
                    s.send_cc_msg(&cc::group::rate_msg(share.max(1)), now);
                }
                eprintln!("concast-perf: asked {} sender(s) for {share} bit/s each", srv.sessions.len());
                rate_sent = true;
            }
        }
        trace.pumped(srv.now(), srv.sessions.iter().map(|(a, s)| (a.to_string(), s)));
        // a flow is over when its session has heard nothing for `idle` (keep-alives count),
        // not when it has delivered nothing: a starved flow is still a flow
        let now = srv.now();
        let quiet: Vec<SocketAddr> = srv
            .sessions
            .iter()
            .filter(|(_, s)| now.saturating_sub(s.shared().last_recv_us) > idle_us)
            .map(|(a, _)| *a)
            .collect();
        for a in quiet {
            finish(&mut srv, &mut tallies, a, "idle");
            done += 1;
        }
    }
    Ok(())
}

fn open(a: &ClientArgs) -> Result<(Conn, Composite), String> {
    let (mut conns, comp) = open_all(a, 1)?;
    Ok((conns.pop().expect("one session opened"), comp))
}

/// Pump until the session closes (or `limit` passes); true when it closed.
fn drain_close(conn: &mut Conn, limit: Duration, trace: &mut Trace) -> Result<bool, String> {
    Ok(drain_close_all(std::slice::from_mut(conn), limit, trace)?[0])
}

/// One line per session to the trace (if it is on): "client" alone, "client<i>" of several.
fn trace_pumped(trace: &mut Trace, conns: &[Conn]) {
    let name = |i: usize| if conns.len() == 1 { "client".to_string() } else { format!("client{i}") };
    trace.pumped(conns[0].now(), conns.iter().enumerate().map(|(i, c)| (name(i), &c.session)));
}

/// A client's closing figures for one session: its share of the process's CPU, its session's
/// counters and end state, and its socket's I/O.
fn conn_json(c: &Conn, cpu_secs: f64) -> Value {
    json!({"role": "client", "cpu_secs": cpu_secs, "stats": stats_json(&c.session.stats()), "io": io_json(&c.io_stats()),
        "state": state_json(c.session.shared()), "mss": c.session.mss()})
}

pub fn client(a: &ClientArgs) -> Result<(), String> {
    let cpu0 = report::cpu_secs();
    let (mut conn, comp) = open(a)?;
    let mut out = labels(&a.c, comp);
    let t0 = Instant::now();
    match a.c.mode {
        Mode::Bulk if a.bytes > 0 => {
            let (mut pat, mut hash) = (report::Pattern::new(a.bytes), Sha256::new());
            let mut buf = vec![0; a.c.size];
            let mut sent = 0u64;
            let mut pending = false;
            while sent < a.bytes {
                if !pending {
                    buf.truncate(a.c.size.min((a.bytes - sent) as usize));
                    pat.fill(&mut buf);
                    pending = true;
                }
                if conn.send(&buf).map_err(|e| e.to_string())? {
                    hash.update(&buf);
                    sent += buf.len() as u64;
                    pending = false;
                    conn.pump(Duration::ZERO).map_err(|e| e.to_string())?;
                } else {
                    conn.pump(Duration::from_millis(1)).map_err(|e| e.to_string())?;
                }
            }
            let closed = drain_close(&mut conn, Duration::from_secs(120), &mut Trace::none())?;
            let secs = t0.elapsed().as_secs_f64();
            report::merge(&mut out, json!({"bytes": sent, "secs": secs, "mbps": sent as f64 * 8.0 / secs / 1e6,
                "closed": closed, "sha256": report::hex(&hash.finalize())}));
        }
        Mode::Bulk => {
            // handed over as Bytes: the session slices it, and copies it only into datagrams
            let buf = Bytes::from(vec![0x5a; a.c.size]);
            let mut sent = 0u64;
            let mut trace = Trace::from_env("client");
            let mut turns = Turns::new();
            while t0.elapsed().as_secs_f64() < a.secs {
                turns.turn();
                // wait for the network only when the session takes no more
                let took = fill(&mut conn, &buf, &mut sent)?;
                let wait = if took { Duration::ZERO } else { Duration::from_millis(1) };
                conn.pump(wait).map_err(|e| e.to_string())?;
                trace_pumped(&mut trace, std::slice::from_ref(&conn));
            }
            let closed = drain_close(&mut conn, Duration::from_secs(60), &mut trace)?;
            let secs = t0.elapsed().as_secs_f64();
            report::merge(&mut out, json!({"bytes": sent, "secs": secs, "mbps": sent as f64 * 8.0 / secs / 1e6, "closed": closed}));
            report::merge(&mut out, turns.json());
        }
        Mode::Pingpong => {
            let msg = vec![0x50; a.c.size];
            // One untimed round trip first: kernel TCP's handshake gives it an RTT sample before
            // its first timed round trip, and without one a lost first ping waits the initial
            // RTO of 1 s (RFC 6298 §2.1): one run in ten at 5 % loss (issue #23, Table II).
            let warm = Instant::now();
            let warmed = round_trip(&mut conn, &msg, Duration::from_secs(10))?;
            let warmup_us = warm.elapsed().as_secs_f64() * 1e6;
            let (mut rtts, mut lost) = (Vec::new(), 0);
            for _ in 0..a.count {
                let t = Instant::now();
                if round_trip(&mut conn, &msg, Duration::from_secs(1))? { rtts.push(t.elapsed()) } else { lost += 1 }
            }
            drain_close(&mut conn, Duration::from_secs(5), &mut Trace::none())?;
            report::merge(&mut out, json!({"size": a.c.size, "lost": lost, "rtt": report::rtt_summary(rtts),
                "warmup_us": warmup_us, "warmup_back": warmed}));
        }
        Mode::Stream => {
            let period = Duration::from_secs_f64(a.c.size as f64 * 8.0 / a.rate);
            let mut seq = 0u32;
            while t0.elapsed().as_secs_f64() < a.secs {
                let due = t0 + period * seq;
                if Instant::now() >= due {
                    conn.send(&report::stream_msg(seq, a.c.size)).map_err(|e| e.to_string())?;
                    seq += 1;
                }
                let wait = due.saturating_duration_since(Instant::now()).min(Duration::from_millis(5));
                conn.pump(wait).map_err(|e| e.to_string())?;
            }
            drain_close(&mut conn, Duration::from_secs(10), &mut Trace::none())?;
            report::merge(&mut out, json!({"sent": seq, "size": a.c.size, "rate": a.rate}));
        }
        Mode::Mtp => unreachable!("--mode mtp is handled in main"),
    }
    report::merge(&mut out, conn_json(&conn, report::cpu_secs() - cpu0));
    report::print(&out);
    Ok(())
}

/// `--parallel N` bulk: N sessions on N sockets (N flows at the server), driven by one loop
/// that gives each in turn its TURN_BYTES and a pump, starting one further on each turn, and
/// sleeps on all sockets at once when none takes more. So a stall of the process (the
/// scheduler) holds every flow alike, rather than one sender process of N at a time, which
/// is how UDT/CCC ran its parallel CTCP flows: in one application (§4.2, footnote 4). Each
/// flow's line carries an equal share of the process's CPU and the loop's turn gaps.
pub fn parallel_bulk(a: &ClientArgs) -> Result<(), String> {
    let cpu0 = report::cpu_secs();
    let (mut conns, comp) = open_all(a, a.parallel)?;
    let n = conns.len();
    let buf = Bytes::from(vec![0x5a; a.c.size]);
    let mut sent = vec![0u64; n];
    let mut trace = Trace::from_env("client");
    let mut turns = Turns::new();
    let t0 = Instant::now();
    let mut first = 0;
    while t0.elapsed().as_secs_f64() < a.secs {
        turns.turn();
        let mut took = false;
        for k in 0..n {
            let i = (first + k) % n;
            took |= fill(&mut conns[i], &buf, &mut sent[i])?;
            conns[i].pump(Duration::ZERO).map_err(|e| e.to_string())?;
        }
        first = (first + 1) % n;
        if !took {
            udp::wait_any(&mut conns, Duration::from_millis(1)).map_err(|e| e.to_string())?;
        }
        trace_pumped(&mut trace, &conns);
    }
    let closed = drain_close_all(&mut conns, Duration::from_secs(60), &mut trace)?;
    let secs = t0.elapsed().as_secs_f64();
    let cpu = (report::cpu_secs() - cpu0) / n as f64;
    let turned = turns.json();
    for (i, c) in conns.iter().enumerate() {
        let mut out = labels(&a.c, comp);
        report::merge(&mut out, turned.clone());
        report::merge(&mut out, json!({"bytes": sent[i], "secs": secs, "mbps": sent[i] as f64 * 8.0 / secs / 1e6,
            "closed": closed[i], "parallel": n}));
        report::merge(&mut out, conn_json(c, cpu));
        report::print(&out);
    }
    Ok(())
}

/// Opens `n` sessions at once (each handshake overlapping the others'), pumping all of them
/// until every one is open.
fn open_all(a: &ClientArgs, n: usize) -> Result<(Vec<Conn>, Composite), String> {
    let cfg = config(&a.c, a.rate)?;
    let comp = cfg.composite;
    let mut conns = (0..n)
        .map(|_| Conn::connect(a.to.as_str(), cfg.clone()).map_err(|e| format!("{}: {e}", a.to)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut open = vec![false; conns.len()];
    let deadline = Instant::now() + Duration::from_secs(10);
    while open.iter().any(|o| !o) {
        if Instant::now() >= deadline {
            return Err(format!("open timed out: {} of {} flows open", open.iter().filter(|o| **o).count(), open.len()));
        }
        for (c, o) in conns.iter_mut().zip(open.iter_mut()) {
            for out in c.pump(Duration::ZERO).map_err(|e| e.to_string())? {
                match out {
                    Output::Opened => *o = true,
                    Output::Refused(why) => return Err(format!("refused: {why}")),
                    Output::Closed(why) => return Err(why),
                    _ => {}
                }
            }
        }
        udp::wait_any(&mut conns, Duration::from_millis(10)).map_err(|e| e.to_string())?;
    }
    Ok((conns, comp))
}

/// Closes every session and pumps them all until each has closed (or `limit` passes); whether
/// each closed.
fn drain_close_all(conns: &mut [Conn], limit: Duration, trace: &mut Trace) -> Result<Vec<bool>, String> {
    for c in conns.iter_mut() {
        let now = c.now();
        c.session.close(now);
    }
    let deadline = Instant::now() + limit;
    let mut closed = vec![false; conns.len()];
    while Instant::now() < deadline {
        // the closed ones are pumped too, so their timers do not keep the wait below at zero
        for (c, done) in conns.iter_mut().zip(closed.iter_mut()) {
            let outs = c.pump(Duration::ZERO).map_err(|e| e.to_string())?;
            *done |= outs.iter().any(|o| matches!(o, Output::Closed(_))) || c.session.is_closed();
        }
        trace_pumped(trace, conns);
        // no wait once the last one has closed: a bulk --bytes run's time ends here
        if closed.iter().all(|c| *c) {
            break;
        }
        udp::wait_any(conns, Duration::from_millis(10)).map_err(|e| e.to_string())?;
    }
    Ok(closed)
}

/// Sends `msg` and pumps until a message comes back or `limit` passes; whether one came.
fn round_trip(conn: &mut Conn, msg: &[u8], limit: Duration) -> Result<bool, String> {
    let t = Instant::now();
    conn.send(msg).map_err(|e| e.to_string())?;
    while t.elapsed() < limit {
        if conn.pump(Duration::from_millis(100)).map_err(|e| e.to_string())?
            .iter().any(|o| matches!(o, Output::Deliver(_))) {
            return Ok(true);
        }
    }
    Ok(false)
}
