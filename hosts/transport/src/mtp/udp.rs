//! MTP over a real UDP socket: the event loop for a client (`Endpoint`) and the stateless
//! server loop (`serve`). The clock is microseconds since the endpoint was made.
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::client::{Client, Output};
use super::server::{Responder, Server};

/// The server socket's receive buffer asked for, bytes (ours; Linux doubles it, capped at
/// `net.core.rmem_max`).
pub const SERVER_RCVBUF: usize = 1 << 20;

/// Longest wait for a datagram when no timer is due sooner.
const IDLE_WAIT: Duration = Duration::from_millis(50);

pub struct Endpoint {
    pub client: Client,
    pub sock: UdpSocket,
    pub server: SocketAddr,
    start: Instant,
    /// Datagrams from any address but the server's (counted, dropped).
    pub foreign: u64,
    /// The kernel's receive buffer (its accounting: payload and per-datagram bookkeeping).
    pub kernel_rcvbuf: usize,
    /// Receive-buffer watches that cut a window (ch. V: the queue above half the buffer).
    pub watch_cuts: u64,
    buf: Vec<u8>,
}

impl Endpoint {
    pub fn new(client: Client, server: SocketAddr) -> io::Result<Endpoint> {
        let bind: SocketAddr = if server.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal");
        Endpoint::bound(client, server, bind)
    }

    /// `new` on a socket bound to `local` (an interface's address; port 0 picks one).
    pub fn bound(client: Client, server: SocketAddr, local: SocketAddr) -> io::Result<Endpoint> {
        let sock = UdpSocket::bind(local)?;
        sock.set_nonblocking(true)?;
        let kernel_rcvbuf = set_rcvbuf(&sock, client.config().rcvbuf)?;
        Ok(Endpoint { client, sock, server, start: Instant::now(), foreign: 0, kernel_rcvbuf, watch_cuts: 0, buf: vec![0; 65536] })
    }

    /// Datagrams the kernel dropped for a full receive buffer since the socket was made.
    pub fn overflow_drops(&self) -> u64 {
        meminfo(&self.sock).map_or(0, |m| m[libc::SK_MEMINFO_DROPS as usize] as u64)
    }

    /// The receive-buffer watch (ch. V, "Mechanisms"): the queue as the kernel counts it,
    /// against the kernel's buffer, told to the client in the units of the buffer its rules
    /// assume, so that "above half" means above half of the socket's real buffer.
    fn watch(&mut self) {
        let Ok(m) = meminfo(&self.sock) else { return };
        let (queued, buf) = (m[libc::SK_MEMINFO_RMEM_ALLOC as usize] as u64, m[libc::SK_MEMINFO_RCVBUF as usize] as u64);
        if buf == 0 {
            return;
        }
        let scaled = queued * self.client.config().rcvbuf as u64 / buf;
        let now = self.now();
        if self.client.rcvbuf_queued(now, scaled as usize) {
            self.watch_cuts += 1;
        }
    }

    pub fn now(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    fn flush(&mut self, handle: &mut impl FnMut(&mut Client, u64, Output) -> bool) -> io::Result<bool> {
        let mut done = false;
        while let Some(o) = self.client.poll() {
            match o {
                Output::Transmit(d) => {
                    if let Err(e) = self.sock.send_to(&d, self.server) {
                        // a full socket buffer is a loss like any other: the request repeats
                        if e.kind() != io::ErrorKind::WouldBlock && e.raw_os_error() != Some(libc::ENOBUFS) {
                            return Err(e);
                        }
                    }
                }
                o => {
                    let now = self.now();
                    done |= handle(&mut self.client, now, o);
                }
            }
        }
        Ok(done)
    }

    /// The event loop: runs until `handle` returns true for an output, or `limit` passes
    /// (then Ok(false)). `handle` gets the client and the time, and may call `request` or
    /// `abort`; what those send goes out before the loop waits again.
    pub fn run(&mut self, limit: Duration, mut handle: impl FnMut(&mut Client, u64, Output) -> bool) -> io::Result<bool> {
        let end = self.now() + limit.as_micros() as u64;
        loop {
            if self.flush(&mut handle)? {
                return Ok(true);
            }
            let now = self.now();
            if now >= end {
                return Ok(false);
            }
            let due = self.client.next_timer().unwrap_or(u64::MAX).min(end);
            if due <= now {
                self.client.on_timer(now);
                continue;
            }
            let wait = Duration::from_micros(due - now).min(IDLE_WAIT);
            if !readable(&self.sock, wait)? {
                let now = self.now();
                if self.client.next_timer().is_some_and(|t| t <= now) {
                    self.client.on_timer(now);
                }
                continue;
            }
            // the queue is longest now, before it is read
            self.watch();
            // everything queued, a bounded batch at a time so timers are not starved
            for _ in 0..64 {
                match self.sock.recv_from(&mut self.buf) {
                    Ok((n, from)) if from == self.server => {
                        let now = self.now();
                        self.client.on_datagram(now, &self.buf[..n]);
                    }
                    Ok(_) => self.foreign += 1,
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break,
                    // an ICMP port unreachable from a server not (yet) running: requests repeat
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                    Err(e) => return Err(e),
                }
            }
            let now = self.now();
            if self.client.next_timer().is_some_and(|t| t <= now) {
                self.client.on_timer(now);
            }
        }
    }
}

/// Linux's SO_MEMINFO (asm-generic/socket.h): the socket's memory counters, `SK_MEMINFO_*`.
const SO_MEMINFO: libc::c_int = 55;

fn meminfo(sock: &UdpSocket) -> io::Result<[u32; 9]> {
    use std::os::fd::AsRawFd;
    let mut m = [0u32; 9];
    let mut len = std::mem::size_of_val(&m) as libc::socklen_t;
    let r = unsafe { libc::getsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, SO_MEMINFO, m.as_mut_ptr().cast(), &mut len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(m)
}

/// Asks for a receive buffer of `bytes` and returns what the kernel keeps. Linux doubles the
/// value asked for, to leave room for its per-datagram bookkeeping (socket(7)), and caps it at
/// `net.core.rmem_max`; left alone, a socket gets `rmem_default` with no doubling, and the
/// bookkeeping of a window of `bytes` of payload overflows it (the mtp-cubic window of a 1 MiB
/// loopback fetch lost 285 of its 1139 replies there; docs/transport.md).
fn set_rcvbuf(sock: &UdpSocket, bytes: usize) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let fd = sock.as_raw_fd();
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    if unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, (&v as *const libc::c_int).cast(), size) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let (mut got, mut len) = (0 as libc::c_int, size);
    if unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, (&mut got as *mut libc::c_int).cast(), &mut len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(got as usize)
}

/// Waits up to `wait` for a datagram. ppoll, not a socket read timeout: those round up to the
/// kernel's tick (4 ms here), which would cap paced requests at 250 a second.
fn readable(sock: &UdpSocket, wait: Duration) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ts = libc::timespec { tv_sec: wait.as_secs() as libc::time_t, tv_nsec: wait.subsec_nanos() as libc::c_long };
    match unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) } {
        n if n < 0 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
        n => Ok(n > 0),
    }
}

/// The server loop: answers every request on `sock` until `stop` is set (checked at least
/// every 100 ms). Returns the server, with its counters.
pub fn serve<R: Responder>(sock: &UdpSocket, responder: R, stop: &AtomicBool) -> io::Result<Server<R>> {
    serve_idle(sock, responder, stop, None)
}

/// `serve`, and also over once `idle` passes without a request after the first one (a
/// measurement's server: concast-perf --mode mtp).
pub fn serve_idle<R: Responder>(sock: &UdpSocket, responder: R, stop: &AtomicBool, idle: Option<Duration>) -> io::Result<Server<R>> {
    serve_server(sock, Server::new(responder), stop, idle)
}

/// `serve_idle` for a server already made (its response limit set, say).
pub fn serve_server<R: Responder>(sock: &UdpSocket, mut server: Server<R>, stop: &AtomicBool, idle: Option<Duration>) -> io::Result<Server<R>> {
    // room for the requests of many windows (ours): a request's bookkeeping on Linux is about
    // 1 KB, so the default 212992 holds some 200, and a window's burst of requests (or the
    // repeats after a silence) overflowed it on loopback
    set_rcvbuf(sock, SERVER_RCVBUF)?;
    let mut buf = vec![0u8; 65536];
    let mut last = None::<Instant>;
    sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    while !stop.load(Ordering::Relaxed) {
        if let (Some(idle), Some(at)) = (idle, last) {
            if at.elapsed() >= idle {
                break;
            }
        }
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                last = Some(Instant::now());
                for r in server.handle(&buf[..n]) {
                    let _ = sock.send_to(&r, from);
                }
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mtp::client::ClientConfig;

    #[test]
    fn the_socket_gets_the_buffer_the_rules_assume_and_the_watch_sees_its_queue() {
        let c = Client::new(ClientConfig { rcvbuf: 100_000, ..ClientConfig::default() }).unwrap();
        let mut e = Endpoint::bound(c, "127.0.0.1:9".parse().unwrap(), "127.0.0.1:0".parse().unwrap()).unwrap();
        // Linux doubles the value asked for (unless rmem_max is below it)
        let max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        assert_eq!(e.kernel_rcvbuf, 2 * 100_000.min(max), "rmem_max {max}");
        assert_eq!(meminfo(&e.sock).unwrap()[libc::SK_MEMINFO_RMEM_ALLOC as usize], 0);
        // fill it past half from another socket, unread: the queue shows, and more than the
        // buffer overflows (counted as drops)
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = e.sock.local_addr().unwrap();
        for _ in 0..400 {
            let _ = tx.send_to(&[0u8; 1400], to);
        }
        let m = meminfo(&e.sock).unwrap();
        assert!(m[libc::SK_MEMINFO_RMEM_ALLOC as usize] as usize > e.kernel_rcvbuf / 2, "{m:?}");
        assert!(e.overflow_drops() > 0, "{m:?}");
        // no transaction: nothing to cut, but the watch runs without error
        e.watch();
        assert_eq!(e.watch_cuts, 0);
    }
}
