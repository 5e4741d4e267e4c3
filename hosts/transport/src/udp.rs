//! The UDP driver: runs sessions over a real socket (std `UdpSocket`, `poll(2)` for waiting),
//! with the monotonic clock as the sessions' time. One `Conn` is a client's session; a
//! `Server` demultiplexes sessions by peer address.
//!
//! I/O is batched (`batch`): a session's datagrams go out with UDP GSO (sendmmsg where the
//! kernel refuses it), and come in with UDP GRO, each receive handed to the session as one
//! batch (`Session::begin_batch`), so in-order data is acknowledged once per receive.
//!
//! A full socket buffer does not stop a pump: the datagrams it refused stay queued in order
//! (`batch::Tx::pending`), the pump waits for the socket to be readable or writable, reads
//! the ACKs that came meanwhile and sends the queue first (issue #23).
//!
//! A socket carrying a composite with Resize sets DF on its datagrams (`batch::set_df`), so
//! Resize's probes find the path MTU instead of being fragmented. Only then: without Resize a
//! segment too big for a hop would be lost every time, where the kernel's own path MTU
//! discovery would otherwise fragment it. A server sets it once it accepts such a session.
use std::collections::HashMap;
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::composite::{Composite, MicroId};
use crate::session::{Config, Output, Session};

pub mod batch;

pub use batch::IoStats;
use batch::{wait_io, Rx, Tx};

/// Bytes asked of SO_SNDBUF, and of SO_RCVBUF at least (more when the window needs it).
const SOCKET_BUFFER: usize = 8 << 20;
/// Receives per pump, so a busy socket cannot keep outputs from the caller.
const BATCH: usize = 256;

/// Which batching the driver may use. `CONCAST_UDP_OFFLOAD=off` (or `gso`, `gro`: only that
/// one) in the environment selects the plain path for measuring and testing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offload {
    pub gso: bool,
    pub gro: bool,
}

impl Offload {
    pub const ON: Offload = Offload { gso: true, gro: true };
    pub const OFF: Offload = Offload { gso: false, gro: false };

    pub fn from_env() -> Offload {
        match std::env::var("CONCAST_UDP_OFFLOAD").as_deref() {
            Ok("off") => Offload::OFF,
            Ok("gso") => Offload { gso: true, gro: false },
            Ok("gro") => Offload { gso: false, gro: true },
            _ => Offload::ON,
        }
    }
}

/// A socket with its batching state.
struct Io {
    sock: UdpSocket,
    tx: Tx,
    rx: Rx,
}

impl Io {
    fn new(sock: UdpSocket, off: Offload) -> Io {
        let mut tx = Tx::new(off.gso);
        if off.gro {
            match batch::enable_gro(sock.as_raw_fd()) {
                Ok(()) => tx.stats.gro = true,
                Err(e) => tx.stats.fallback = Some(format!("UDP_GRO refused: {e}")),
            }
        }
        Io { sock, tx, rx: Rx::new() }
    }

    fn stats(&self) -> IoStats {
        self.tx.stats.clone()
    }

    fn df_for(&mut self, c: Composite) -> io::Result<()> {
        df_for(&self.sock, &mut self.tx.stats, c)
    }
}

/// DF for Resize's probes (see the module comment); once per socket.
fn df_for(sock: &UdpSocket, stats: &mut IoStats, c: Composite) -> io::Result<()> {
    // CONCAST_UDP_DF=off leaves the kernel's default (to show what DF changes)
    let off = std::env::var("CONCAST_UDP_DF").is_ok_and(|v| v == "off");
    if c.has(MicroId::Resize) && !stats.df && !off {
        batch::set_df(sock.as_raw_fd(), sock.local_addr()?.is_ipv6())?;
        stats.df = true;
    }
    Ok(())
}

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

/// A socket whose receive buffer holds `wnd` full segments (`rcvbuf_for`), where the kernel
/// allows it; `fit_window` then bounds the window by what it allowed. Non-blocking.
/// (concast-perf's kernel-UDP receiver takes the same buffers, so UDP is not measured with less.)
pub fn socket(bind: SocketAddr, wnd: u32) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(bind)?;
    // The FORCE options pass net.core.[rw]mem_max (root only); else the capped ones. A
    // small receive buffer overflows at the first burst and costs a recovery per window.
    let sizes = [(libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, SOCKET_BUFFER), (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, rcvbuf_for(wnd))];
    for (force, plain, bytes) in sizes {
        let v = bytes.min(libc::c_int::MAX as usize) as libc::c_int;
        for opt in [force, plain] {
            let r = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    &v as *const _ as *const libc::c_void,
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

/// Bytes of receive buffer one datagram of a full segment takes (its skb's truesize,
/// rounded up): the kernel counts these, not payload, against SO_RCVBUF.
const TRUESIZE: usize = 2560;

/// What to ask of SO_RCVBUF for `wnd` full segments: the kernel doubles the value set
/// (socket(7)) and charges TRUESIZE a datagram. Never below SOCKET_BUFFER. A fixed 8 MB held
/// every window at 6,553 segments, below the 8,192 asked and below the 9,082 of a 1 Gbit/s,
/// 110 ms path (issue #23).
fn rcvbuf_for(wnd: u32) -> usize {
    (wnd as usize * TRUESIZE).div_ceil(2).max(SOCKET_BUFFER)
}

/// Full segments a receive buffer of `reported` bytes (getsockopt's figure) holds.
fn segments_in(reported: usize) -> u32 {
    (reported / TRUESIZE).max(64).min(u32::MAX as usize) as u32
}

/// The receive window (segments) the socket can hold without dropping: Windowed Flow then
/// stops the peer before the buffer overflows, as TCP bounds its window by its buffer.
fn fit_window(s: &UdpSocket, cfg: &mut Config) {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &mut v as *mut _ as *mut _, &mut len)
    };
    if r == 0 && v > 0 {
        cfg.recv_wnd_segs = cfg.recv_wnd_segs.min(segments_in(v as usize));
    }
}

/// Datagrams per GSO group: what the flow sends in about a millisecond (cwnd / srtt, as
/// Linux sizes TSO bursts), so a slow flow does not hit a bottleneck queue with 64 KB at
/// once (a drop-tail queue then loses the whole burst); a flow without a window or an RTT
/// yet takes the most.
fn group_limit(s: &Session) -> usize {
    let sh = s.shared();
    if !sh.cwnd.is_finite() || sh.srtt_us <= 0.0 {
        return batch::MAX_SEGS;
    }
    let per_ms = sh.cwnd * 1000.0 / sh.srtt_us;
    (per_ms as usize).clamp(1, batch::MAX_SEGS)
}

/// Queues the session's datagrams into `io`'s batch and sends it; returns its other outputs.
fn flush(s: &mut Session, io: &mut Io, to: Option<SocketAddr>, out: &mut Vec<Output>) -> io::Result<()> {
    let fd = io.sock.as_raw_fd();
    io.tx.max_group = group_limit(s);
    while let Some(o) = s.poll() {
        match o {
            Output::Transmit(d) => io.tx.push(fd, d, to)?,
            other => out.push(other),
        }
    }
    io.tx.flush(fd)?;
    for b in io.tx.spent.drain(..) {
        s.recycle(b);
    }
    Ok(())
}

/// A client's session on its own connected socket.
pub struct Conn {
    pub session: Session,
    /// Why the session ended ("refused: ..." or the close reason), once it has.
    pub ended: Option<String>,
    io: Io,
    t0: Instant,
}

impl Conn {
    pub fn connect(to: impl ToSocketAddrs, cfg: Config) -> io::Result<Conn> {
        Conn::connect_with(to, cfg, Offload::from_env())
    }

    /// `connect` with the batching chosen by the caller.
    pub fn connect_with(to: impl ToSocketAddrs, mut cfg: Config, off: Offload) -> io::Result<Conn> {
        let to = to.to_socket_addrs()?.next().ok_or(ErrorKind::InvalidInput)?;
        let bind: SocketAddr = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().unwrap();
        let sock = socket(bind, cfg.recv_wnd_segs)?;
        sock.connect(to)?;
        fit_window(&sock, &mut cfg);
        cfg.seed = seed();
        let t0 = Instant::now();
        let mut io = Io::new(sock, off);
        io.df_for(cfg.composite)?;
        Ok(Conn { session: Session::connect(cfg, 0), ended: None, io, t0 })
    }

    pub fn now(&self) -> u64 {
        micros(self.t0)
    }

    /// System calls and datagrams so far, and whether GSO/GRO are in use.
    pub fn io_stats(&self) -> IoStats {
        self.io.stats()
    }

    /// The connected socket (for socket options the driver does not set).
    pub fn socket(&self) -> &UdpSocket {
        &self.io.sock
    }

    /// Hand a message to the session; false when its send buffer is full (pump, then retry).
    pub fn send(&mut self, msg: &[u8]) -> io::Result<bool> {
        let now = self.now();
        let r = self.session.send(msg, now);
        self.sent(r)
    }

    /// `send` without copying the message: its segments slice it (see `Session::send_shared`).
    pub fn send_shared(&mut self, msg: Bytes) -> io::Result<bool> {
        let now = self.now();
        let r = self.session.send_shared(msg, 0, now);
        self.sent(r)
    }

    fn sent(&self, r: Result<(), crate::session::SendError>) -> io::Result<bool> {
        match r {
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
        flush(&mut self.session, &mut self.io, None, &mut out)?;
        let now = self.now();
        let wait_us = match self.session.next_timer() {
            Some(t) => t.saturating_sub(now).min(max_wait.as_micros() as u64),
            None => max_wait.as_micros() as u64,
        };
        let fd = self.io.sock.as_raw_fd();
        if wait_us > 0 && out.is_empty() {
            let (asked, t) = (Duration::from_micros(wait_us), Instant::now());
            wait_io(fd, asked, self.io.tx.pending())?;
            self.io.tx.stats.polled(asked, t.elapsed());
        }
        // everything one wake-up reads is one batch (Positive ACK acknowledges in-order data
        // every BATCH_ACK_SEGS and at its end); what the session sends meanwhile goes at once.
        // What waited is read before the timers that came due meanwhile run (below), so a
        // late wake-up does not time out what its ACKs acknowledge (`on_waiting_datagram`)
        let mut batch = false;
        for i in 0..=BATCH {
            if i == BATCH {
                self.io.tx.stats.reads_cut += 1;
                break;
            }
            if !self.io.rx.recv(fd, &mut self.io.tx.stats)? {
                break;
            }
            let now = self.now();
            if !batch {
                self.session.begin_batch();
                batch = true;
            }
            for d in self.io.rx.shared_datagrams() {
                self.session.on_waiting_datagram(d, now);
            }
            flush(&mut self.session, &mut self.io, None, &mut out)?;
        }
        if batch {
            let now = self.now();
            self.session.end_batch(now);
        }
        let now = self.now();
        self.session.on_timer(now);
        flush(&mut self.session, &mut self.io, None, &mut out)?;
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

/// Wait until any of `conns` has a datagram, room for what it holds back, or a timer due, at
/// most `max_wait`: where one loop drives several sessions (concast-perf `--parallel`), it
/// sleeps here rather than in one `Conn::pump`, which would not see the others' sockets.
pub fn wait_any(conns: &mut [Conn], max_wait: Duration) -> io::Result<()> {
    let mut wait_us = max_wait.as_micros() as u64;
    for c in conns.iter_mut() {
        let now = c.now();
        if let Some(t) = c.session.next_timer() {
            wait_us = wait_us.min(t.saturating_sub(now));
        }
    }
    if wait_us == 0 {
        return Ok(());
    }
    let fds: Vec<_> = conns.iter().map(|c| (c.io.sock.as_raw_fd(), c.io.tx.pending())).collect();
    let (asked, t) = (Duration::from_micros(wait_us), Instant::now());
    batch::wait_any(&fds, asked)?;
    let took = t.elapsed();
    for c in conns.iter_mut() {
        c.io.tx.stats.polled(asked, took);
    }
    Ok(())
}

/// Sessions accepted on one socket, by peer address.
pub struct Server {
    io: Io,
    template: Config,
    serve: Option<Composite>,
    pub sessions: HashMap<SocketAddr, Session>,
    /// Datagrams no session could be opened from, with the reason.
    pub refused: Vec<(SocketAddr, String)>,
    t0: Instant,
}

impl Server {
    pub fn bind(addr: impl ToSocketAddrs, template: Config, serve: Option<Composite>) -> io::Result<Server> {
        Server::bind_with(addr, template, serve, Offload::from_env())
    }

    /// `bind` with the batching chosen by the caller.
    pub fn bind_with(
        addr: impl ToSocketAddrs,
        mut template: Config,
        serve: Option<Composite>,
        off: Offload,
    ) -> io::Result<Server> {
        let a = addr.to_socket_addrs()?.next().ok_or(ErrorKind::InvalidInput)?;
        let sock = socket(a, template.recv_wnd_segs)?;
        fit_window(&sock, &mut template);
        let mut io = Io::new(sock, off);
        if let Some(c) = serve {
            io.df_for(c)?;
        }
        Ok(Server {
            io,
            template,
            serve,
            sessions: HashMap::new(),
            refused: Vec::new(),
            t0: Instant::now(),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.sock.local_addr()
    }

    pub fn now(&self) -> u64 {
        micros(self.t0)
    }

    /// System calls and datagrams so far (all sessions), and whether GSO/GRO are in use.
    pub fn io_stats(&self) -> IoStats {
        self.io.stats()
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
            flush(s, &mut self.io, Some(*a), &mut tmp)?;
            out.extend(tmp.drain(..).map(|o| (*a, o)));
        }
        let now = self.now();
        let next = self.sessions.values_mut().filter_map(Session::next_timer).min();
        let wait_us = next.map_or(max_wait.as_micros() as u64, |t| {
            t.saturating_sub(now).min(max_wait.as_micros() as u64)
        });
        let fd = self.io.sock.as_raw_fd();
        if wait_us > 0 && out.is_empty() {
            let (asked, t) = (Duration::from_micros(wait_us), Instant::now());
            wait_io(fd, asked, self.io.tx.pending())?;
            self.io.tx.stats.polled(asked, t.elapsed());
        }
        // as in Conn::pump: one batch per session per wake-up
        let mut batched: Vec<SocketAddr> = Vec::new();
        for i in 0..=BATCH {
            if i == BATCH {
                self.io.tx.stats.reads_cut += 1;
                break;
            }
            if !self.io.rx.recv(fd, &mut self.io.tx.stats)? {
                break;
            }
            let Some(from) = self.io.rx.from else { continue };
            let now = micros(self.t0);
            let mut grams = self.io.rx.shared_datagrams();
            if !self.sessions.contains_key(&from) {
                let Some(first) = grams.next() else { continue };
                let mut cfg = self.template.clone();
                cfg.seed = seed();
                match Session::accept(&cfg, self.serve, &first, now) {
                    Ok(s) => {
                        df_for(&self.io.sock, &mut self.io.tx.stats, s.composite())?;
                        self.sessions.insert(from, s);
                    }
                    Err((why, reply)) => {
                        if !reply.is_empty() {
                            self.io.tx.push(fd, reply, Some(from))?;
                            self.io.tx.flush(fd)?;
                            self.io.tx.spent.clear();
                        }
                        self.refused.push((from, why));
                        continue;
                    }
                }
            }
            let s = self.sessions.get_mut(&from).expect("found or accepted above");
            if !batched.contains(&from) {
                s.begin_batch();
                batched.push(from);
            }
            for d in grams {
                s.on_waiting_datagram(d, now);
            }
            flush(s, &mut self.io, Some(from), &mut tmp)?;
            out.extend(tmp.drain(..).map(|o| (from, o)));
        }
        let now = self.now();
        for a in batched {
            if let Some(s) = self.sessions.get_mut(&a) {
                s.end_batch(now);
            }
        }
        let now = self.now();
        for (a, s) in self.sessions.iter_mut() {
            s.on_timer(now);
            flush(s, &mut self.io, Some(*a), &mut tmp)?;
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
    fn the_receive_buffer_asked_for_holds_the_window() {
        // the kernel reports twice what was set; every window, the default 8,192 included,
        // must fit what is asked for it (the old fixed 8 MB held 6,553)
        for wnd in [64, 6_553, 8_192, 9_082, 26_214, 100_000] {
            assert!(segments_in(2 * rcvbuf_for(wnd)) >= wnd, "window {wnd}");
        }
        assert_eq!(rcvbuf_for(1), SOCKET_BUFFER, "never below the old size");
    }

    #[test]
    fn a_bound_socket_holds_the_window_where_the_kernel_allows_it() {
        let want = rcvbuf_for(26_214);
        let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
        if unsafe { libc::geteuid() } != 0 && rmem_max < want {
            eprintln!("skipped: not root and net.core.rmem_max {rmem_max} < {want}: the window is capped by design");
            return;
        }
        let mut cfg = Config::new(Preset::Bulk.composite());
        cfg.recv_wnd_segs = 26_214;
        let s = socket("127.0.0.1:0".parse().unwrap(), cfg.recv_wnd_segs).unwrap();
        fit_window(&s, &mut cfg);
        assert_eq!(cfg.recv_wnd_segs, 26_214);
    }

    /// `len` bytes through Bulk over loopback, client and server with the given batching;
    /// asserts they arrive byte for byte and returns both ends' I/O figures.
    fn transfer(len: usize, off: Offload, tweak: impl FnOnce(&Conn)) -> (IoStats, IoStats) {
        transfer_with(Config::preset(Preset::Bulk), len, off, tweak)
    }

    fn transfer_with(cfg: Config, len: usize, off: Offload, tweak: impl FnOnce(&Conn)) -> (IoStats, IoStats) {
        let mut srv = Server::bind_with("127.0.0.1:0", cfg.clone(), None, off).unwrap();
        let addr = srv.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                for (_, o) in srv.pump(Duration::from_millis(5)).unwrap() {
                    match o {
                        Output::Deliver(m) => got.extend(m),
                        Output::Closed(_) => return (got, srv.io_stats()),
                        _ => {}
                    }
                }
            }
            (got, srv.io_stats())
        });
        let data: Vec<u8> = (0..len as u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut c = Conn::connect_with(addr, cfg, off).unwrap();
        tweak(&c);
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
        let (got, srv_io) = h.join().unwrap();
        assert!(got == data, "{} of {} bytes, or not the same", got.len(), data.len());
        (c.io_stats(), srv_io)
    }

    #[test]
    fn gso_groups_are_sized_to_a_millisecond_of_the_flow() {
        let fresh = Session::connect(Config::preset(Preset::Bulk), 0);
        assert_eq!(group_limit(&fresh), batch::MAX_SEGS, "no window or RTT yet: the most");
        // 10 Mbit/s with 20 ms each way: about one 1.4 kB segment per millisecond
        let mut p = crate::sim::Pair::new(Config::preset(Preset::Bulk), Config::preset(Preset::Bulk), 3);
        for l in [&mut p.ab, &mut p.ba] {
            l.delay_us = 20_000;
            l.rate_bps = Some(10e6);
        }
        p.transfer(&vec![1u8; 1 << 20], 64 * 1024, 60_000_000);
        let sh = p.a.shared();
        let g = group_limit(&p.a);
        assert!((1..=4).contains(&g), "{g} from cwnd {} and srtt {} us", sh.cwnd, sh.srtt_us);
    }

    fn pmtu_discover(c: &Conn) -> libc::c_int {
        let mut v: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let r = unsafe {
            libc::getsockopt(c.socket().as_raw_fd(), libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, &mut v as *mut _ as *mut _, &mut len)
        };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        v
    }

    #[test]
    fn a_resize_socket_sets_df_and_still_sends_with_gso() {
        let cfg = Config::new(Composite::parse("Bulk+resize").unwrap());
        let probe = |c: &Conn| assert_eq!(pmtu_discover(c), libc::IP_PMTUDISC_PROBE);
        let (cli, srv) = transfer_with(cfg, 3_000_000, Offload::ON, probe);
        assert!(cli.df && srv.df, "{cli:?} {srv:?}");
        assert!(cli.gso && cli.fallback.is_none() && cli.datagrams_sent >= 4 * cli.send_calls, "{cli:?}");
        assert_eq!((cli.too_big, cli.ptb_reports), (0, 0), "loopback carries every size");
        // without Resize the kernel's default stays (it may fragment after an ICMP)
        let c = Conn::connect_with("127.0.0.1:9", Config::preset(Preset::Bulk), Offload::ON).unwrap();
        assert!(!c.io_stats().df && pmtu_discover(&c) != libc::IP_PMTUDISC_PROBE);
    }

    #[test]
    fn bulk_over_loopback_udp() {
        transfer(3_000_000, Offload::from_env(), |_| {});
    }

    #[test]
    fn gso_sends_and_gro_receives_carry_many_datagrams_per_call() {
        let (cli, srv) = transfer(4_000_000, Offload::ON, |_| {});
        assert!(cli.gso && srv.gro && cli.fallback.is_none(), "{cli:?} {srv:?}");
        // loopback takes GSO buffers whole and GRO hands them over whole: each call carries
        // many datagrams (a plain path carries one per receive)
        assert!(cli.datagrams_sent >= 4 * cli.send_calls, "{cli:?}");
        assert!(srv.datagrams_received >= 4 * srv.recv_calls, "{srv:?}");
    }

    #[test]
    fn plain_path_sends_with_sendmmsg_and_receives_one_datagram_per_call() {
        let (cli, srv) = transfer(1_000_000, Offload::OFF, |_| {});
        assert!(!cli.gso && !srv.gro, "{cli:?} {srv:?}");
        assert_eq!(srv.recv_calls, srv.datagrams_received, "{srv:?}");
        assert!(cli.datagrams_sent > cli.send_calls, "sendmmsg batches: {cli:?}");
    }

    #[test]
    fn a_kernel_refusing_gso_falls_back_to_sendmmsg() {
        // UDP checksums off (SO_NO_CHECK): the kernel refuses UDP_SEGMENT with EINVAL, as it
        // does for a segment over the path MTU or (EIO) UDP-Lite and IPsec
        let no_check = |c: &Conn| {
            let one: libc::c_int = 1;
            let r = unsafe {
                libc::setsockopt(c.socket().as_raw_fd(), libc::SOL_SOCKET, libc::SO_NO_CHECK,
                    &one as *const _ as *const libc::c_void, std::mem::size_of::<libc::c_int>() as libc::socklen_t)
            };
            assert_eq!(r, 0, "{}", io::Error::last_os_error());
        };
        let (cli, _) = transfer(2_000_000, Offload::ON, no_check);
        assert!(!cli.gso, "{cli:?}");
        let why = cli.fallback.as_deref().unwrap_or("");
        assert!(why.starts_with("UDP GSO refused") && why.contains("os error 22"), "{why:?}");
        assert!(cli.datagrams_sent > cli.send_calls, "the fallback still batches: {cli:?}");
    }
}
