//! The UDP driver: runs sessions over a real socket (std `UdpSocket`, `poll(2)` for waiting),
//! with the monotonic clock as the sessions' time. One `Conn` is a client's session; a
//! `Server` demultiplexes sessions by peer address.
use std::collections::HashMap;
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::composite::Composite;
use crate::session::{Config, Output, Session};

const SOCKET_BUFFER: libc::c_int = 8 << 20;
const MAX_DATAGRAM: usize = 65_536;
/// Datagrams read per pump, so a busy socket cannot keep outputs from the caller.
const BATCH: usize = 256;

/// Microseconds since the driver started.
fn micros(t0: Instant) -> u64 {
    t0.elapsed().as_micros() as u64
}

fn seed() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = io::Read::read_exact(&mut f, &mut b);
    }
    u64::from_ne_bytes(b) ^ std::process::id() as u64
}

fn socket(bind: SocketAddr) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(bind)?;
    // The FORCE options pass net.core.[rw]mem_max (root only); else the capped ones. A
    // small receive buffer overflows at the first burst and costs a recovery per window.
    for (force, plain) in [(libc::SO_SNDBUFFORCE, libc::SO_SNDBUF), (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)] {
        for opt in [force, plain] {
            let r = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    &SOCKET_BUFFER as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r == 0 {
                break;
            }
        }
    }
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Wait until the socket is readable (or writable with `out`) or `timeout` passes.
fn wait(s: &UdpSocket, timeout: Duration, out: bool) -> io::Result<()> {
    let mut p = libc::pollfd {
        fd: s.as_raw_fd(),
        events: if out { libc::POLLOUT } else { libc::POLLIN },
        revents: 0,
    };
    // ppoll: microsecond timeouts, so pacing below a millisecond keeps its rate
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    if unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) } < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

fn send_to(s: &UdpSocket, d: &[u8], to: Option<SocketAddr>) -> io::Result<()> {
    loop {
        let r = match to {
            Some(a) => s.send_to(d, a),
            None => s.send(d),
        };
        match r {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait(s, Duration::from_millis(10), true)?,
            // the peer's port is closed (ICMP): the session's timers deal with silence
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Sends the session's datagrams; returns its other outputs.
fn flush(s: &mut Session, sock: &UdpSocket, to: Option<SocketAddr>, out: &mut Vec<Output>) -> io::Result<()> {
    while let Some(o) = s.poll() {
        match o {
            Output::Transmit(d) => send_to(sock, &d, to)?,
            other => out.push(other),
        }
    }
    Ok(())
}

/// A client's session on its own connected socket.
pub struct Conn {
    pub session: Session,
    /// Why the session ended ("refused: ..." or the close reason), once it has.
    pub ended: Option<String>,
    sock: UdpSocket,
    t0: Instant,
    buf: Vec<u8>,
}

impl Conn {
    pub fn connect(to: impl ToSocketAddrs, mut cfg: Config) -> io::Result<Conn> {
        let to = to.to_socket_addrs()?.next().ok_or(ErrorKind::InvalidInput)?;
        let bind: SocketAddr = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().unwrap();
        let sock = socket(bind)?;
        sock.connect(to)?;
        cfg.seed = seed();
        let t0 = Instant::now();
        Ok(Conn { session: Session::connect(cfg, 0), ended: None, sock, t0, buf: vec![0; MAX_DATAGRAM] })
    }

    pub fn now(&self) -> u64 {
        micros(self.t0)
    }

    /// Hand a message to the session; false when its send buffer is full (pump, then retry).
    pub fn send(&mut self, msg: &[u8]) -> io::Result<bool> {
        let now = self.now();
        match self.session.send(msg, now) {
            Ok(()) => Ok(true),
            Err(crate::session::SendError::Full) => Ok(false),
            Err(e) => Err(io::Error::other(match &self.ended {
                Some(why) => why.clone(),
                None => format!("send: {e:?}"),
            })),
        }
    }

    /// Transmit what is pending, wait up to `max_wait` for datagrams or the next timer,
    /// handle them, and return the outputs that are not datagrams.
    pub fn pump(&mut self, max_wait: Duration) -> io::Result<Vec<Output>> {
        let mut out = Vec::new();
        flush(&mut self.session, &self.sock, None, &mut out)?;
        let now = self.now();
        let wait_us = match self.session.next_timer() {
            Some(t) => t.saturating_sub(now).min(max_wait.as_micros() as u64),
            None => max_wait.as_micros() as u64,
        };
        if wait_us > 0 && out.is_empty() {
            wait(&self.sock, Duration::from_micros(wait_us), false)?;
        }
        for _ in 0..BATCH {
            match self.sock.recv(&mut self.buf) {
                Ok(n) => {
                    let now = self.now();
                    self.session.on_datagram(&self.buf[..n], now);
                    flush(&mut self.session, &self.sock, None, &mut out)?;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
                Err(e) => return Err(e),
            }
        }
        let now = self.now();
        self.session.on_timer(now);
        flush(&mut self.session, &self.sock, None, &mut out)?;
        for o in &out {
            match o {
                Output::Refused(why) => self.ended = Some(format!("refused: {why}")),
                Output::Closed(why) => self.ended = Some(why.clone()),
                _ => {}
            }
        }
        Ok(out)
    }
}

/// Sessions accepted on one socket, by peer address.
pub struct Server {
    sock: UdpSocket,
    template: Config,
    serve: Option<Composite>,
    pub sessions: HashMap<SocketAddr, Session>,
    /// Datagrams no session could be opened from, with the reason.
    pub refused: Vec<(SocketAddr, String)>,
    t0: Instant,
    buf: Vec<u8>,
}

impl Server {
    pub fn bind(addr: impl ToSocketAddrs, template: Config, serve: Option<Composite>) -> io::Result<Server> {
        let a = addr.to_socket_addrs()?.next().ok_or(ErrorKind::InvalidInput)?;
        Ok(Server {
            sock: socket(a)?,
            template,
            serve,
            sessions: HashMap::new(),
            refused: Vec::new(),
            t0: Instant::now(),
            buf: vec![0; MAX_DATAGRAM],
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    pub fn now(&self) -> u64 {
        micros(self.t0)
    }

    /// Send a message on one session; false when its send buffer is full.
    pub fn send(&mut self, to: SocketAddr, msg: &[u8]) -> bool {
        let now = self.now();
        self.sessions.get_mut(&to).is_some_and(|s| s.send(msg, now).is_ok())
    }

    pub fn pump(&mut self, max_wait: Duration) -> io::Result<Vec<(SocketAddr, Output)>> {
        let mut out = Vec::new();
        let mut tmp = Vec::new();
        for (a, s) in self.sessions.iter_mut() {
            flush(s, &self.sock, Some(*a), &mut tmp)?;
            out.extend(tmp.drain(..).map(|o| (*a, o)));
        }
        let now = self.now();
        let next = self.sessions.values_mut().filter_map(Session::next_timer).min();
        let wait_us = next.map_or(max_wait.as_micros() as u64, |t| {
            t.saturating_sub(now).min(max_wait.as_micros() as u64)
        });
        if wait_us > 0 && out.is_empty() {
            wait(&self.sock, Duration::from_micros(wait_us), false)?;
        }
        for _ in 0..BATCH {
            let (n, from) = match self.sock.recv_from(&mut self.buf) {
                Ok(r) => r,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            let now = micros(self.t0);
            let d = &self.buf[..n];
            match self.sessions.get_mut(&from) {
                Some(s) => s.on_datagram(d, now),
                None => {
                    let mut cfg = self.template.clone();
                    cfg.seed = seed();
                    match Session::accept(&cfg, self.serve, d, now) {
                        Ok(s) => {
                            self.sessions.insert(from, s);
                        }
                        Err((why, reply)) => {
                            if !reply.is_empty() {
                                send_to(&self.sock, &reply, Some(from))?;
                            }
                            self.refused.push((from, why));
                            continue;
                        }
                    }
                }
            }
            let s = self.sessions.get_mut(&from).unwrap();
            flush(s, &self.sock, Some(from), &mut tmp)?;
            out.extend(tmp.drain(..).map(|o| (from, o)));
        }
        let now = self.now();
        for (a, s) in self.sessions.iter_mut() {
            s.on_timer(now);
            flush(s, &self.sock, Some(*a), &mut tmp)?;
            out.extend(tmp.drain(..).map(|o| (*a, o)));
        }
        Ok(out)
    }

    /// Forget closed sessions.
    pub fn reap(&mut self) {
        self.sessions.retain(|_, s| !s.is_closed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::composite::Preset;

    #[test]
    fn bulk_over_loopback_udp() {
        let mut srv = Server::bind("127.0.0.1:0", Config::preset(Preset::Bulk), None).unwrap();
        let addr = srv.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                for (_, o) in srv.pump(Duration::from_millis(5)).unwrap() {
                    match o {
                        Output::Deliver(m) => got.extend(m),
                        Output::Closed(_) => return got,
                        _ => {}
                    }
                }
            }
            got
        });
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut c = Conn::connect(addr, Config::preset(Preset::Bulk)).unwrap();
        let mut off = 0;
        let mut closed = false;
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && !closed {
            while off < data.len() && c.send(&data[off..(off + 60_000).min(data.len())]).unwrap() {
                off = (off + 60_000).min(data.len());
            }
            if off == data.len() {
                let now = c.now();
                c.session.close(now);
            }
            closed = c.pump(Duration::from_millis(5)).unwrap().iter().any(|o| matches!(o, Output::Closed(_)));
        }
        assert!(closed, "{:?}", c.session.stats());
        assert_eq!(h.join().unwrap(), data);
    }
}
