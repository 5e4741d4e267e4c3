//! concast-blast: traffic generator and sink for routerd benchmarks (scripts/bench_routerd.py).
//!
//! Opens an AF_PACKET socket on an interface (the same `CpuPort` routerd uses), sends concast
//! datagrams as Ethernet frames in sendmmsg batches, as fast as possible or at `--rate`, for
//! `--duration` seconds, and counts and checks what comes back: merged datagrams (source =
//! `--router-addr`) and the contributions they carry, datagrams passed back unchanged, and
//! anything else. Prints one JSON line.
//!
//! Kinds of traffic:
//! - `sum` (default): aggregate contributions (mergespecs/README.md payload) from `--senders`
//!   sources, `--keys` keys in rotation; each key gets one contribution from every sender in a
//!   row, so a spec with `fanin=<senders>` closes every round inside a batch. A contribution's
//!   value is `key + 1`, so a correctly merged datagram carries `value == count * (key + 1)`.
//! - `mplex`: MplexPkts (group 1) of one record each, a 20-byte TCP ACK from one of the
//!   senders; merged bundles are counted by their records.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use concast_routerd::cpu_port::{parse_mac, CpuPort, BATCH};
use concast_wire::build::{self, MplexBuilder};
use concast_wire::datagram::{classify, Datagram};
use concast_wire::ipv4::{protocol, Params};
use concast_wire::mplex::{HeaderRepr, RecordRepr};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Kind {
    Sum,
    Mplex,
}

#[derive(Parser, Debug)]
#[command(name = "concast-blast", about = "Send concast datagrams into an interface as fast as possible and count what comes back")]
struct Args {
    /// Interface to open with AF_PACKET (the peer of routerd's CPU port).
    #[arg(long)]
    iface: String,
    /// Seconds of sending.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Datagrams per second (0 = as fast as possible).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Frames per sendmmsg/recvmmsg call (1..=64).
    #[arg(long, default_value_t = BATCH)]
    batch: usize,
    #[arg(long, value_enum, default_value_t = Kind::Sum)]
    kind: Kind,
    /// Number of distinct sources (IPv4 source addresses 10.1.0.2, 10.1.0.3, ...).
    #[arg(long, default_value_t = 4)]
    senders: u32,
    /// Number of aggregate keys in rotation.
    #[arg(long, default_value_t = 256)]
    keys: u32,
    /// Concast group (default 7 for sum, 1 for mplex).
    #[arg(long)]
    group: Option<u32>,
    /// Receiver: IPv4 destination of every datagram.
    #[arg(long, default_value = "10.9.9.2")]
    dst: Ipv4Addr,
    /// UDP destination port (sum) / TCP destination port (mplex).
    #[arg(long, default_value_t = 5000)]
    dport: u16,
    /// routerd's address: datagrams coming back from it are merged ones.
    #[arg(long, default_value = "10.0.0.1")]
    router_addr: Ipv4Addr,
    /// Destination MAC of the frames sent (the router's MAC, as a diverting data plane leaves it).
    #[arg(long, default_value = "02:cc:0a:00:00:01")]
    dst_mac: String,
    /// Milliseconds to keep receiving after the last send (partial rounds time out in 10 ms).
    #[arg(long, default_value_t = 300)]
    drain_ms: u64,
    /// First aggregate key (keys KEY_BASE..KEY_BASE+KEYS): a second blaster given other keys
    /// never shares a merge round with the first.
    #[arg(long, default_value_t = 0)]
    key_base: u32,
    /// Only send: open the interface for sending alone (the kernel hands this socket no
    /// frames), count nothing that comes back. An extra load generator beside a counting one
    /// (bench_routerd.py --saturate), whose merged datagrams the counting one tallies.
    #[arg(long)]
    send_only: bool,
    /// Create this file once the socket is open, its statistics reset and anything already
    /// queued drained, just before the first send: a second blaster started only after it
    /// exists cannot write frames this one never had a chance to count (bench_routerd.py
    /// --saturate; session 15 found its missing datagrams there).
    #[arg(long)]
    ready_file: Option<std::path::PathBuf>,
}

fn sender_addr(s: u32) -> Ipv4Addr {
    Ipv4Addr::from(0x0a01_0002 + s)
}

/// The frames sent, in order, over and over: key-major, one per sender in a row.
fn build_frames(a: &Args, src_mac: [u8; 6], dst_mac: [u8; 6]) -> Result<Vec<Vec<u8>>, String> {
    let group = a.group.unwrap_or(match a.kind {
        Kind::Sum => 7,
        Kind::Mplex => concast_wire::MPLEX_GROUP,
    });
    let mut frames = Vec::with_capacity((a.keys * a.senders) as usize);
    for key in a.key_base..a.key_base + a.keys {
        for s in 0..a.senders {
            let mut f = vec![0u8; 256];
            f[0..6].copy_from_slice(&dst_mac);
            f[6..12].copy_from_slice(&src_mac);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            let mut params = Params::new(sender_addr(s), a.dst, protocol::UDP);
            params.ident = (key as u16) ^ ((s as u16) << 12);
            let sport = 4000 + (s % 1000) as u16;
            let len = match a.kind {
                Kind::Sum => {
                    let mut p = [0u8; 32];
                    p[0..2].copy_from_slice(&sport.to_be_bytes());
                    p[2..4].copy_from_slice(&a.dport.to_be_bytes());
                    p[4..6].copy_from_slice(&32u16.to_be_bytes());
                    p[8..10].copy_from_slice(b"CA");
                    p[10] = 1;
                    p[12..16].copy_from_slice(&key.to_be_bytes());
                    p[16..20].copy_from_slice(&1u32.to_be_bytes());
                    p[24..32].copy_from_slice(&(i64::from(key) + 1).to_be_bytes());
                    build::concast(&mut f[14..], &params, group, &p).map_err(|e| format!("{e:?}"))?
                }
                Kind::Mplex => {
                    // A bare TCP ACK: ports, seq, ack (grows with the key), offset 5, ACK, window.
                    let mut tcp = [0u8; 20];
                    tcp[0..2].copy_from_slice(&sport.to_be_bytes());
                    tcp[2..4].copy_from_slice(&a.dport.to_be_bytes());
                    tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
                    tcp[8..12].copy_from_slice(&(1 + key * 1448).to_be_bytes());
                    tcp[12] = 5 << 4;
                    tcp[13] = 0x10;
                    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
                    let hdr = HeaderRepr { initial_ttl: 64, max_total_delay: 10_000, delayed_so_far: 0, max_local_delay: 5_000 };
                    let mut b = MplexBuilder::new(&mut f[14..], &params, group, &hdr).map_err(|e| format!("{e:?}"))?;
                    b.push(&RecordRepr { src: sender_addr(s), ttl: 64, protocol: protocol::TCP, tos: 0, payload: &tcp })
                        .map_err(|e| format!("{e:?}"))?;
                    b.finish_bundle().map_err(|e| format!("{e:?}"))?
                }
            };
            f.truncate(14 + len);
            frames.push(f);
        }
    }
    Ok(frames)
}

#[derive(Default, Debug)]
struct Tally {
    returned: u64,
    returned_bytes: u64,
    /// Datagrams routerd built (source = its address) and what they stand for.
    merged: u64,
    merged_contributions: u64,
    /// Merged datagrams whose folded value is wrong.
    bad_value: u64,
    /// Our own datagrams sent back unchanged.
    passed: u64,
    /// Not ours / not concast / malformed.
    other: u64,
}

impl Tally {
    fn count(&mut self, frame: &[u8], router: Ipv4Addr) {
        self.returned += 1;
        self.returned_bytes += frame.len() as u64;
        if frame.len() < 14 || frame[12..14] != [0x08, 0x00] {
            self.other += 1;
            return;
        }
        match classify(&frame[14..]) {
            Ok(Datagram::Concast { ip, .. }) => {
                let p = ip.payload();
                let from_router = ip.src_addr() == router;
                if p.len() >= 32 && &p[8..10] == b"CA" {
                    let key = u32::from_be_bytes(p[12..16].try_into().unwrap());
                    let count = u32::from_be_bytes(p[16..20].try_into().unwrap()).max(1);
                    let value = i64::from_be_bytes(p[24..32].try_into().unwrap());
                    if from_router {
                        self.merged += 1;
                        self.merged_contributions += u64::from(count);
                        if value != i64::from(count) * (i64::from(key) + 1) {
                            self.bad_value += 1;
                        }
                    } else {
                        self.passed += 1;
                    }
                } else {
                    self.other += 1;
                }
            }
            Ok(Datagram::Mplex { ip, mplex, .. }) => {
                if ip.src_addr() == router {
                    self.merged += 1;
                    self.merged_contributions += mplex.records().count() as u64;
                } else {
                    self.passed += 1;
                }
            }
            _ => self.other += 1,
        }
    }
}

/// PACKET_STATISTICS of a socket (read and reset): (packets, drops).
fn packet_stats(fd: i32) -> (u64, u64) {
    let mut st = [0u32; 2];
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // PACKET_STATISTICS = 6
    let r = unsafe { libc::getsockopt(fd, libc::SOL_PACKET, 6, st.as_mut_ptr() as *mut libc::c_void, &mut len) };
    if r < 0 {
        return (0, 0);
    }
    (u64::from(st[0]), u64::from(st[1]))
}

fn run(a: Args) -> Result<(), String> {
    if !(1..=BATCH).contains(&a.batch) || a.senders == 0 || a.keys == 0 {
        return Err(format!("--batch must be 1..={BATCH}, --senders and --keys at least 1"));
    }
    if a.key_base.checked_add(a.keys).is_none() {
        return Err("--key-base + --keys must fit in 32 bits".into());
    }
    let dst_mac = parse_mac(&a.dst_mac)?;
    let open = if a.send_only { CpuPort::open_tx } else { CpuPort::open };
    let mut port = open(&a.iface).map_err(|e| format!("cannot open {}: {e}", a.iface))?;
    port.batch = a.batch;
    let frames = build_frames(&a, port.mac, dst_mac)?;
    // Reset the socket's statistics, then drain anything already queued: what the kernel
    // counts from here on (`socket_frames`) is what the tally sees plus `drained_at_start`
    // plus the socket's own drops.
    packet_stats(port.raw_fd());
    let mut drained_at_start: u64 = 0;
    loop {
        let n = port.recv_batch().map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        drained_at_start += n as u64;
    }
    if let Some(path) = &a.ready_file {
        std::fs::write(path, b"ready\n").map_err(|e| format!("--ready-file {}: {e}", path.display()))?;
    }

    let mut t = Tally::default();
    let mut sent: u64 = 0;
    let mut next = 0usize;
    let mut out: Vec<&[u8]> = Vec::with_capacity(a.batch);
    let start = Instant::now();
    let duration = Duration::from_secs_f64(a.duration);
    loop {
        let elapsed = start.elapsed();
        if elapsed >= duration {
            break;
        }
        let allowed = if a.rate == 0 { u64::MAX } else { (elapsed.as_secs_f64() * a.rate as f64) as u64 + a.batch as u64 };
        if sent < allowed {
            let n = if a.rate == 0 { a.batch } else { ((allowed - sent) as usize).min(a.batch) };
            out.clear();
            for _ in 0..n {
                out.push(&frames[next]);
                next = (next + 1) % frames.len();
            }
            sent += port.send_batch(&out).map_err(|e| format!("send: {e}"))? as u64;
        }
        while !a.send_only {
            let n = port.recv_batch().map_err(|e| format!("recv: {e}"))?;
            for i in 0..n {
                t.count(port.frame(i), a.router_addr);
            }
            if n < a.batch {
                break;
            }
        }
        if a.rate != 0 && sent >= allowed {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    let send_secs = start.elapsed().as_secs_f64();
    let returned_in_window = t.returned;
    let drain_end = Instant::now() + Duration::from_millis(if a.send_only { 0 } else { a.drain_ms });
    while Instant::now() < drain_end {
        let n = port.recv_batch().map_err(|e| format!("recv: {e}"))?;
        for i in 0..n {
            t.count(port.frame(i), a.router_addr);
        }
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    // (frames handed to the socket, kept or dropped; of them dropped at its full ring)
    let (socket_frames, rx_drops) = packet_stats(port.raw_fd());
    let kind = match a.kind {
        Kind::Sum => "sum",
        Kind::Mplex => "mplex",
    };
    let j = serde_json::json!({
        "iface": a.iface,
        "kind": kind,
        "batch": a.batch,
        "senders": a.senders,
        "keys": a.keys,
        "key_base": a.key_base,
        "send_only": a.send_only,
        "rate_asked": a.rate,
        "frame_bytes": frames[0].len(),
        "duration_s": send_secs,
        "offered": sent,
        "offered_pps": sent as f64 / send_secs,
        "returned": t.returned,
        "returned_in_window": returned_in_window,
        "returned_pps": returned_in_window as f64 / send_secs,
        "returned_bytes": t.returned_bytes,
        "merged": t.merged,
        "merged_contributions": t.merged_contributions,
        "bad_value": t.bad_value,
        "passed": t.passed,
        "other": t.other,
        "contributions_back": t.merged_contributions + t.passed,
        "rx_drops": rx_drops,
        "socket_frames": socket_frames,
        "drained_at_start": drained_at_start,
    });
    println!("{j}");
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("concast-blast: {e}");
            ExitCode::FAILURE
        }
    }
}
