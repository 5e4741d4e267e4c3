//! The control protocol: one JSON object per line in, one per line out (docs/linkemu.md).
//! Every reply has "ok"; failures carry "error" and change nothing. Requests are served by the
//! control thread; what touches a link runs as a job on the shard that holds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use concast_daemon::linkstate::StateFile;
use concast_daemon::log::{emit, Level};
use concast_linkemu::hist::Hist;
use concast_linkemu::model::Direction;
use concast_linkemu::params::{tap_queue_for, Params};
use concast_linkemu::rng::seed_of;
use serde_json::{json, Value};

use crate::emu::{End, Emu, Link};
use crate::shard::Shard;
use crate::tap::{self, Netns, RxMode};

/// CPU time (user + system) the daemon's threads have used, ms: with the frames moved, the
/// emulator's cost per frame (docs/benchmarks.md). The kernel's NAPI threads are not in it.
pub fn process_cpu_ms() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Every link of the daemon, over its shards.
pub struct Links {
    pub shards: Vec<Shard>,
    /// Which shard holds each link.
    by_id: HashMap<String, usize>,
    /// Each link's two TAPs (namespace, name), for the kernel's counters of them.
    taps: HashMap<String, [(Netns, String); 2]>,
    pub state: Option<Arc<Mutex<StateFile>>>,
    pub late_bound_ns: u64,
    /// The receive mode asked of every new TAP.
    pub rx_mode: RxMode,
}

impl Links {
    pub fn new(shards: Vec<Shard>, state: Option<Arc<Mutex<StateFile>>>, late_bound_ns: u64, rx_mode: RxMode) -> Links {
        assert!(!shards.is_empty());
        Links { shards, by_id: HashMap::new(), taps: HashMap::new(), state, late_bound_ns, rx_mode }
    }

    fn shard_of(&self, id: &str) -> Result<&Shard, String> {
        self.by_id.get(id).map(|&s| &self.shards[s]).ok_or_else(|| format!("no link {id:?}"))
    }

    /// The shard with the fewest links takes the next one.
    fn emptiest(&self) -> usize {
        let mut n = vec![0usize; self.shards.len()];
        self.by_id.values().for_each(|&s| n[s] += 1);
        (0..n.len()).min_by_key(|&s| n[s]).unwrap_or(0)
    }

    /// (frames delivered, write errors) over every link, for the daemon's last log line.
    pub fn totals(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(d, w), s| {
            let (d1, w1) = s.call(|emu| (emu.links().map(|l| l.dirs[0].counters.delivered + l.dirs[1].counters.delivered).sum::<u64>(), emu.write_errors));
            (d + d1, w + w1)
        })
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Puts each end's `tx_dropped` (frames its TAP's full queue dropped before we read them)
    /// into a link's stats; null where the kernel's counter cannot be read.
    fn add_tap_drops(&self, st: &mut Value) {
        let Some(ends) = st.get("id").and_then(Value::as_str).and_then(|id| self.taps.get(id)) else { return };
        for ((ns, name), key) in ends.iter().zip(["a", "b"]) {
            st[key]["tx_dropped"] = tap::tx_dropped(ns, name).map_or(Value::Null, |n| json!(n));
        }
    }

    /// How each shard moves frames (`--io`, or `syscalls` where io_uring was not available),
    /// comma-separated, for the daemon's log.
    pub fn io_names(&self) -> String {
        self.shards.iter().map(|s| s.call(|emu| emu.io().name())).collect::<Vec<_>>().join(",")
    }
}

/// What one shard contributes to a daemon-wide `stats`.
struct ShardStats {
    io: Vec<&'static str>,
    links: Vec<Value>,
    write_errors: u64,
    hists: [Hist; 4],
}

pub fn handle(links: &mut Links, line: &str) -> Value {
    let reply = serde_json::from_str::<Value>(line)
        .map_err(|e| format!("not a JSON object: {e}"))
        .and_then(|req| dispatch(links, &req));
    match reply {
        Ok(mut v) => {
            v["ok"] = json!(true);
            v
        }
        Err(e) => json!({"ok": false, "error": e}),
    }
}

fn dispatch(links: &mut Links, req: &Value) -> Result<Value, String> {
    let cmd = req.get("cmd").and_then(Value::as_str).ok_or("missing \"cmd\" (add, set, down, up, del, stats, ping)")?;
    match cmd {
        "ping" => Ok(json!({"links": links.len()})),
        "add" => add(links, req),
        "set" => {
            let id = link_id(req)?.to_string();
            let req = req.clone();
            links.shard_of(&id)?.call(move |emu| set(emu, &id, &req))
        }
        "down" | "up" => {
            let (id, up) = (link_id(req)?.to_string(), cmd == "up");
            links.shard_of(&id)?.call(move |emu| carrier(emu, &id, up))
        }
        "del" => {
            let id = link_id(req)?.to_string();
            let shard = links.shard_of(&id)?;
            let reply = shard.call({
                let id = id.clone();
                move |emu| {
                    let link = emu.remove(&id).ok_or_else(|| format!("no link {id:?}"))?;
                    emit(Level::Info, "link_del", &[("link", &id), ("delivered_ab", &link.dirs[0].counters.delivered), ("delivered_ba", &link.dirs[1].counters.delivered)]);
                    Ok(json!({"stats": link_stats(&link)}))
                }
            });
            links.by_id.remove(&id);
            links.taps.remove(&id);
            reply
        }
        "stats" => match req.get("id") {
            Some(_) => {
                let id = link_id(req)?.to_string();
                let mut st = links.shard_of(&id)?.call({
                    let id = id.clone();
                    move |emu| Ok::<_, String>(link_stats(emu.get(&id).ok_or_else(|| format!("no link {id:?}"))?))
                })?;
                links.add_tap_drops(&mut st);
                Ok(json!({"stats": st}))
            }
            None => {
                let reset = req.get("reset_lateness").and_then(Value::as_bool) == Some(true);
                let parts: Vec<ShardStats> = links.shards.iter().map(|s| s.call(move |emu| shard_stats(emu, reset))).collect();
                let mut all = ShardStats { io: Vec::new(), links: Vec::new(), write_errors: 0, hists: Default::default() };
                for p in parts {
                    all.io.extend(p.io);
                    all.links.extend(p.links);
                    all.write_errors += p.write_errors;
                    for (h, o) in all.hists.iter_mut().zip(p.hists.iter()) {
                        h.merge(o);
                    }
                }
                // (a thread into each TAP's namespace: only when asked, not for every poll)
                if req.get("taps").and_then(Value::as_bool) == Some(true) {
                    all.links.iter_mut().for_each(|l| links.add_tap_drops(l));
                }
                let [lateness, write_time, wake_late, busy] = &all.hists;
                Ok(json!({
                    "io": all.io,
                    "links": all.links,
                    "write_errors": all.write_errors,
                    "late_p50_us": lateness.quantile_us(0.5),
                    "late_p99_us": lateness.quantile_us(0.99),
                    "late_max_us": lateness.quantile_us(1.0),
                    "late_bound_us": links.late_bound_ns / 1000,
                    "write_p50_us": write_time.quantile_us(0.5),
                    "write_p99_us": write_time.quantile_us(0.99),
                    "write_max_us": write_time.quantile_us(1.0),
                    "wake_late_p99_us": wake_late.quantile_us(0.99),
                    "wake_late_max_us": wake_late.quantile_us(1.0),
                    "busy_p99_us": busy.quantile_us(0.99),
                    "busy_max_us": busy.quantile_us(1.0),
                    "cpu_ms": process_cpu_ms(),
                }))
            }
        },
        other => Err(format!("unknown cmd {other:?} (add, set, down, up, del, stats, ping)")),
    }
}

/// One shard's links and loop histograms (then reset, if asked).
fn shard_stats(emu: &mut Emu, reset: bool) -> ShardStats {
    let out = ShardStats {
        io: vec![emu.io().name()],
        links: emu.links().map(link_stats).collect(),
        write_errors: emu.write_errors,
        hists: [emu.lateness.clone(), emu.write_time.clone(), emu.wake_late.clone(), emu.busy.clone()],
    };
    if reset {
        emu.lateness = Default::default();
        emu.write_time = Default::default();
        emu.wake_late = Default::default();
        emu.busy = Default::default();
    }
    out
}

fn link_id(req: &Value) -> Result<&str, String> {
    match req.get("id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => Ok(id),
        _ => Err("missing link \"id\" (a non-empty string)".into()),
    }
}

/// Parameters per direction: "params" for both, then "ab" / "ba" for one each.
fn dir_params(base: [Params; 2], req: &Value) -> Result<[Params; 2], String> {
    let mut p = base;
    if let Some(both) = req.get("params") {
        p = [p[0].updated(both)?, p[1].updated(both)?];
    }
    if let Some(ab) = req.get("ab") {
        p[0] = p[0].updated(ab)?;
    }
    if let Some(ba) = req.get("ba") {
        p[1] = p[1].updated(ba)?;
    }
    Ok(p)
}

fn end_spec(req: &Value, key: &str) -> Result<(Netns, String, Option<[u8; 6]>), String> {
    let e = req.get(key).ok_or_else(|| format!("missing end {key:?}: {{\"netns\": PID|path|name|null, \"name\": IFACE, \"mac\": MAC}}"))?;
    let ns = Netns::from_json(e.get("netns").unwrap_or(&Value::Null))?;
    let name = e.get("name").and_then(Value::as_str).ok_or_else(|| format!("end {key:?} needs an interface \"name\""))?;
    let mac = match e.get("mac") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(tap::parse_mac(s)?),
        Some(v) => return Err(format!("end {key:?}: mac {v} is not a string")),
    };
    Ok((ns, name.to_string(), mac))
}

fn add(links: &mut Links, req: &Value) -> Result<Value, String> {
    let id = link_id(req)?.to_string();
    if links.by_id.contains_key(&id) {
        return Err(format!("link {id:?} exists"));
    }
    let params = dir_params([Params::default(); 2], req)?;
    let seed = match req.get("seed") {
        None | Some(Value::Null) => seed_of(&id),
        Some(v) => v.as_u64().ok_or("seed: want a non-negative integer")?,
    };
    let (ns_a, name_a, mac_a) = end_spec(req, "a")?;
    let (ns_b, name_b, mac_b) = end_spec(req, "b")?;
    // an end's TAP queues what it sends: a's goes out on ab, b's on ba
    let tap_queue = match req.get("tap_queue") {
        None | Some(Value::Null) => [tap_queue_for(params[0].rate_bps), tap_queue_for(params[1].rate_bps)],
        Some(v) => match v.as_u64() {
            Some(n) if (1..=u32::MAX as u64).contains(&n) => [n as u32; 2],
            _ => return Err(format!("tap_queue {v}: want a number of frames >= 1")),
        },
    };
    if ns_a == ns_b && name_a == name_b {
        return Err("ends a and b are the same interface".into());
    }
    let slots = match &links.state {
        Some(st) => {
            let mut st = st.lock().unwrap_or_else(|e| e.into_inner());
            match (st.alloc(), st.alloc()) {
                (Some(x), Some(y)) => [x, y],
                (x, _) => {
                    if let Some(x) = x {
                        st.release(x);
                    }
                    return Err(format!("state file full ({} slots): start with a larger --slots", st.slot_count()));
                }
            }
        }
        None => [0, 0],
    };
    let release = |links: &Links| {
        if let Some(st) = &links.state {
            let mut st = st.lock().unwrap_or_else(|e| e.into_inner());
            st.release(slots[0]);
            st.release(slots[1]);
        }
    };
    // TAPs are made here, not on the shard, so its links never wait for an `add`. If b fails,
    // a's fd is dropped here and its TAP disappears with it.
    let mode = links.rx_mode;
    let made = tap::create(&ns_a, &name_a, mac_a, mode, tap_queue[0])
        .and_then(|a| Ok((a, tap::create(&ns_b, &name_b, mac_b, mode, tap_queue[1])?)));
    let ((fd_a, rx_a), (fd_b, rx_b)) = match made {
        Ok(x) => x,
        Err(e) => {
            release(links);
            return Err(e);
        }
    };
    let names = (name_a.clone(), name_b.clone());
    let taps = [(ns_a.clone(), name_a.clone()), (ns_b.clone(), name_b.clone())];
    let ends = [
        End { name: name_a, netns: ns_a.to_string(), fd: Some(fd_a), rx: rx_a.name(), tap_queue: tap_queue[0] },
        End { name: name_b, netns: ns_b.to_string(), fd: Some(fd_b), rx: rx_b.name(), tap_queue: tap_queue[1] },
    ];
    let dirs = [Direction::new(params[0], seed), Direction::new(params[1], seed ^ 0x5bd1_e995)];
    let shard = links.emptiest();
    let inserted = links.shards[shard].call({
        let id = id.clone();
        move |emu| emu.insert(id, ends, dirs, slots)
    });
    if let Err(e) = inserted {
        release(links);
        return Err(e);
    }
    links.by_id.insert(id.clone(), shard);
    links.taps.insert(id.clone(), taps);
    emit(Level::Info, "link_add", &[("link", &id), ("a", &names.0), ("b", &names.1), ("shard", &shard), ("rx", &format!("{},{}", rx_a.name(), rx_b.name())), ("slots", &format!("{},{}", slots[0], slots[1])), ("ab", &params[0].to_json()), ("ba", &params[1].to_json())]);
    Ok(json!({"id": id, "slots": slots}))
}

fn set(emu: &mut Emu, id: &str, req: &Value) -> Result<Value, String> {
    let link = emu.get_mut(id).ok_or_else(|| format!("no link {id:?}"))?;
    let p = dir_params([link.dirs[0].params, link.dirs[1].params], req)?;
    link.dirs[0].params = p[0];
    link.dirs[1].params = p[1];
    emu.republish(id);
    emit(Level::Info, "link_set", &[("link", &id), ("ab", &p[0].to_json()), ("ba", &p[1].to_json())]);
    Ok(json!({"id": id, "ab": p[0].to_json(), "ba": p[1].to_json()}))
}

fn carrier(emu: &mut Emu, id: &str, up: bool) -> Result<Value, String> {
    let link = emu.get_mut(id).ok_or_else(|| format!("no link {id:?}"))?;
    link.dirs[0].up = up;
    link.dirs[1].up = up;
    emit(Level::Info, if up { "link_up" } else { "link_down" }, &[("link", &id)]);
    Ok(json!({"id": id, "up": up}))
}

fn dir_stats(l: &Link, d: usize) -> Value {
    let dir = &l.dirs[d];
    let c = &dir.counters;
    let (bytes, pkts) = dir.backlog();
    json!({
        "slot": l.slots[d],
        "params": dir.params.to_json(),
        "frames_in": c.frames_in, "bytes_in": c.bytes_in,
        "delivered": c.delivered, "bytes": c.bytes_delivered,
        "dropped_queue": c.dropped_queue, "dropped_loss": c.dropped_loss, "dropped_down": c.dropped_down,
        "drops": l.drops[d].to_json(),
        "late_frames": l.late[d].frames, "late_over_bound": l.late[d].over_bound,
        "late_max_us": l.late[d].max_ns / 1000,
        "backlog_pkts": pkts, "backlog_bytes": bytes, "max_backlog": c.max_backlog,
        "in_flight": dir.in_flight(),
        "qdelay_p50_us": dir.qdelay.quantile_us(0.5), "qdelay_p99_us": dir.qdelay.quantile_us(0.99),
    })
}

fn link_stats(l: &Link) -> Value {
    json!({
        "id": l.id,
        "up": l.dirs[0].up,
        "a": {"name": l.ends[0].name, "netns": l.ends[0].netns, "open": l.ends[0].fd.is_some(), "rx": l.ends[0].rx, "tap_queue": l.ends[0].tap_queue},
        "b": {"name": l.ends[1].name, "netns": l.ends[1].netns, "open": l.ends[1].fd.is_some(), "rx": l.ends[1].rx, "tap_queue": l.ends[1].tap_queue},
        "ab": dir_stats(l, 0),
        "ba": dir_stats(l, 1),
    })
}
