//! concast-perf's peers measured in the same run: kernel TCP (with a chosen congestion
//! control) and plain UDP.
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use concast_transport::udp::batch::{self, Rx, Tx};
use concast_transport::udp::{self, IoStats, Offload};
use concast_transport::session::DEFAULT_RECV_WND_SEGS;

use crate::report::{self, Tally};
use crate::{ClientArgs, Common, Mode, Proto};

const UDP_PAYLOAD: usize = 1400;
const END: &[u8] = b"E";

fn labels(c: &Common) -> Value {
    let proto = if c.proto == Proto::Tcp { "tcp" } else { "udp" };
    let cc = if c.proto == Proto::Tcp { json!(c.cc) } else { Value::Null };
    json!({"proto": proto, "cc": cc, "mode": format!("{:?}", c.mode).to_lowercase()})
}

fn set_tcp_cc(s: &TcpStream, cc: &str) -> Result<(), String> {
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr() as *const libc::c_void,
            cc.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(format!("TCP congestion control {cc:?}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

pub fn server(listen: &str, flows: usize, idle: f64, c: &Common) -> Result<(), String> {
    match c.proto {
        Proto::Tcp => tcp_server(listen, flows, c),
        _ => udp_server(listen, flows, idle, c),
    }
}

pub fn client(a: &ClientArgs) -> Result<(), String> {
    match a.c.proto {
        Proto::Tcp => tcp_client(a),
        _ => udp_client(a),
    }
}

fn tcp_server(listen: &str, flows: usize, c: &Common) -> Result<(), String> {
    let l = TcpListener::bind(listen).map_err(|e| format!("bind {listen}: {e}"))?;
    let (tx, rx) = mpsc::channel();
    for _ in 0..flows {
        let (mut s, peer) = l.accept().map_err(|e| e.to_string())?;
        let (tx, c) = (tx.clone(), c.clone());
        std::thread::spawn(move || {
            let _ = s.set_nodelay(true);
            let mut t = Tally::default();
            let mut carry = Vec::new();
            let mut buf = vec![0u8; if c.mode == Mode::Pingpong { c.size } else { 1 << 17 }];
            loop {
                let r = if c.mode == Mode::Pingpong {
                    s.read_exact(&mut buf).map(|_| buf.len()).or_else(|e| {
                        if e.kind() == ErrorKind::UnexpectedEof { Ok(0) } else { Err(e) }
                    })
                } else {
                    s.read(&mut buf)
                };
                match r {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if c.mode == Mode::Stream {
                            // TCP keeps no boundaries: cut the byte stream at the fixed size
                            carry.extend_from_slice(&buf[..n]);
                            let whole = carry.len() / c.size * c.size;
                            for m in carry[..whole].chunks(c.size) {
                                t.add(m, true);
                            }
                            carry.drain(..whole);
                        } else {
                            t.add(&buf[..n], false);
                        }
                        if c.mode == Mode::Pingpong && s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = s.shutdown(Shutdown::Both);
            let mut extra = labels(&c);
            report::merge(&mut extra, json!({"peer": peer.to_string(), "end": "eof"}));
            let _ = tx.send(t.json(extra));
        });
    }
    for _ in 0..flows {
        report::print(&rx.recv().map_err(|e| e.to_string())?);
    }
    Ok(())
}

fn tcp_client(a: &ClientArgs) -> Result<(), String> {
    let cpu0 = report::cpu_secs();
    let mut s = TcpStream::connect(a.to.as_str()).map_err(|e| format!("{}: {e}", a.to))?;
    set_tcp_cc(&s, &a.c.cc)?;
    s.set_nodelay(a.c.mode != Mode::Bulk).map_err(|e| e.to_string())?;
    let mut out = labels(&a.c);
    let t0 = Instant::now();
    match a.c.mode {
        Mode::Bulk => {
            let buf = vec![0x5a; a.c.size];
            let mut sent = 0u64;
            while t0.elapsed().as_secs_f64() < a.secs {
                s.write_all(&buf).map_err(|e| e.to_string())?;
                sent += buf.len() as u64;
            }
            s.shutdown(Shutdown::Write).map_err(|e| e.to_string())?;
            let _ = s.read(&mut [0u8; 1]); // the server closes once it has read everything
            let secs = t0.elapsed().as_secs_f64();
            report::merge(&mut out, json!({"bytes": sent, "secs": secs, "mbps": sent as f64 * 8.0 / secs / 1e6}));
        }
        Mode::Pingpong => {
            let mut msg = vec![0x50; a.c.size];
            let mut rtts = Vec::new();
            for _ in 0..a.count {
                let t = Instant::now();
                s.write_all(&msg).map_err(|e| e.to_string())?;
                s.read_exact(&mut msg).map_err(|e| e.to_string())?;
                rtts.push(t.elapsed());
            }
            report::merge(&mut out, json!({"size": a.c.size, "lost": 0, "rtt": report::rtt_summary(rtts)}));
        }
        Mode::Stream => {
            let period = Duration::from_secs_f64(a.c.size as f64 * 8.0 / a.rate);
            let mut seq = 0u32;
            while t0.elapsed().as_secs_f64() < a.secs {
                std::thread::sleep((t0 + period * seq).saturating_duration_since(Instant::now()));
                s.write_all(&report::stream_msg(seq, a.c.size)).map_err(|e| e.to_string())?;
                seq += 1;
            }
            report::merge(&mut out, json!({"sent": seq, "size": a.c.size, "rate": a.rate}));
        }
        Mode::Mtp => unreachable!("--mode mtp is handled in main"),
    }
    let _ = s.shutdown(Shutdown::Both);
    report::merge(&mut out, json!({"role": "client", "cpu_secs": report::cpu_secs() - cpu0}));
    report::print(&out);
    Ok(())
}

fn udp_server(listen: &str, flows: usize, idle: f64, c: &Common) -> Result<(), String> {
    // the receive buffer a CTP session's socket gets (the default window's worth): with the
    // kernel's ~200 KB default a receiver off the CPU for a few ms dropped up to a third of a
    // 100 Mbit/s stream (issue #23, Table I wide area, session 18)
    let addr: SocketAddr = listen.parse().map_err(|e| format!("bind {listen}: {e}"))?;
    let s = udp::socket(addr, DEFAULT_RECV_WND_SEGS).map_err(|e| format!("bind {listen}: {e}"))?;
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_millis(20))).map_err(|e| e.to_string())?;
    // the same receive path as the transport's driver (GRO when the kernel allows), so the
    // ratio to UDP compares the stacks, not the system calls
    let mut io = IoStats::default();
    if Offload::from_env().gro {
        io.gro = batch::enable_gro(s.as_raw_fd()).is_ok();
    }
    let mut rx = Rx::new();
    let mut tallies: HashMap<SocketAddr, Tally> = HashMap::new();
    let mut done = 0;
    let finish = |t: &mut HashMap<SocketAddr, Tally>, a: SocketAddr, why: &str, io: &IoStats| {
        let tally = t.remove(&a).unwrap_or_default();
        let mut extra = labels(c);
        report::merge(&mut extra, json!({"peer": a.to_string(), "end": why, "io": crate::ctp::io_json(io)}));
        report::print(&tally.json(extra));
    };
    while done < flows {
        if rx.recv(s.as_raw_fd(), &mut io).map_err(|e| e.to_string())? {
            let Some(from) = rx.from else { continue };
            for d in rx.datagrams() {
                if d == END {
                    if tallies.contains_key(&from) {
                        finish(&mut tallies, from, "end", &io);
                        done += 1;
                    }
                    continue;
                }
                tallies.entry(from).or_default().add(d, c.mode == Mode::Stream);
                if c.mode == Mode::Pingpong {
                    let _ = s.send_to(d, from);
                }
            }
        }
        let now = report::mono_us();
        let quiet: Vec<SocketAddr> = tallies
            .iter()
            .filter(|(_, t)| now.saturating_sub(t.last_us) > (idle * 1e6) as u64)
            .map(|(a, _)| *a)
            .collect();
        for a in quiet {
            finish(&mut tallies, a, "idle", &io);
            done += 1;
        }
    }
    Ok(())
}

fn udp_client(a: &ClientArgs) -> Result<(), String> {
    let cpu0 = report::cpu_secs();
    let s = UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
    s.connect(a.to.as_str()).map_err(|e| format!("{}: {e}", a.to))?;
    let mut out = labels(&a.c);
    let t0 = Instant::now();
    match a.c.mode {
        Mode::Bulk => {
            // batches of same-size datagrams, as the transport's driver sends them: one GSO
            // send each (or one sendmmsg where GSO is off or refused)
            let buf = vec![0x5a; a.c.size.min(UDP_PAYLOAD)];
            let per = (batch::MAX_BATCH_BYTES / buf.len()).min(batch::MAX_SEGS);
            let mut tx = Tx::new(Offload::from_env().gso);
            let fd = s.as_raw_fd();
            while t0.elapsed().as_secs_f64() < a.secs {
                if tx.pending() {
                    // the socket buffer was full: what it refused goes first
                    let _ = batch::wait(fd, Duration::from_millis(10), true);
                    let _ = tx.flush(fd);
                    continue;
                }
                for _ in 0..per {
                    let d = tx.spent.pop().unwrap_or_else(|| buf.clone());
                    let _ = tx.push(fd, d, None); // a refused datagram is not counted as sent
                }
                let _ = tx.flush(fd);
            }
            let sent = tx.stats.bytes_sent;
            let secs = t0.elapsed().as_secs_f64();
            report::merge(&mut out, json!({"bytes": sent, "secs": secs, "mbps": sent as f64 * 8.0 / secs / 1e6,
                "io": crate::ctp::io_json(&tx.stats)}));
        }
        Mode::Pingpong => {
            s.set_read_timeout(Some(Duration::from_secs(1))).map_err(|e| e.to_string())?;
            let mut msg = vec![0x50; a.c.size.min(UDP_PAYLOAD)];
            let (mut rtts, mut lost) = (Vec::new(), 0);
            for _ in 0..a.count {
                let t = Instant::now();
                s.send(&msg).map_err(|e| e.to_string())?;
                match s.recv(&mut msg) {
                    Ok(_) => rtts.push(t.elapsed()),
                    Err(_) => lost += 1,
                }
            }
            report::merge(&mut out, json!({"size": msg.len(), "lost": lost, "rtt": report::rtt_summary(rtts)}));
        }
        Mode::Stream => {
            let period = Duration::from_secs_f64(a.c.size as f64 * 8.0 / a.rate);
            let mut seq = 0u32;
            while t0.elapsed().as_secs_f64() < a.secs {
                std::thread::sleep((t0 + period * seq).saturating_duration_since(Instant::now()));
                let _ = s.send(&report::stream_msg(seq, a.c.size.min(UDP_PAYLOAD)));
                seq += 1;
            }
            report::merge(&mut out, json!({"sent": seq, "size": a.c.size, "rate": a.rate}));
        }
        Mode::Mtp => unreachable!("--mode mtp is handled in main"),
    }
    for _ in 0..10 {
        let _ = s.send(END);
        std::thread::sleep(Duration::from_millis(2));
    }
    report::merge(&mut out, json!({"role": "client", "cpu_secs": report::cpu_secs() - cpu0}));
    report::print(&out);
    Ok(())
}
