//! MTP over a real UDP socket: the event loop for a client (`Endpoint`) and the stateless
//! server loop (`serve`). The clock is microseconds since the endpoint was made.
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::client::{Client, Output};
use super::server::{Responder, Server};

/// Longest wait for a datagram when no timer is due sooner.
const IDLE_WAIT: Duration = Duration::from_millis(50);

pub struct Endpoint {
    pub client: Client,
    pub sock: UdpSocket,
    pub server: SocketAddr,
    start: Instant,
    /// Datagrams from any address but the server's (counted, dropped).
    pub foreign: u64,
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
        Ok(Endpoint { client, sock, server, start: Instant::now(), foreign: 0, buf: vec![0; 65536] })
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
