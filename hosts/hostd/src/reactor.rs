//! The event loop's poll(2) set, rebuilt every turn from what each part of hostd wants
//! watched. A part registers its descriptors under a [`Token`] of its own, so a new part (the
//! multiplex module's NFQUEUE and TUN descriptors) plugs in with a token variant and a
//! dispatch arm, without changing how the loop waits.

use std::io;
use std::os::fd::RawFd;

/// Who a ready descriptor belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    /// Raw socket, protocol 253: CSP addressed to this host.
    Csp,
    /// Raw socket, protocol 17: UDP addressed to this host (concast datagrams among them).
    Capture,
    /// The API's listening socket.
    Listener,
    /// One API client connection.
    Client(u64),
    /// A UDP port held against ICMP port unreachable.
    Sink(u16),
    /// A descriptor of the multiplex module (NFQUEUE, protocol-254 socket, TUN device).
    Mplex(concast_mplex::Source),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    pub token: Token,
    pub readable: bool,
    pub writable: bool,
    /// Hang-up or error: the peer is gone.
    pub closed: bool,
}

#[derive(Default)]
pub struct PollSet {
    fds: Vec<libc::pollfd>,
    tokens: Vec<Token>,
}

impl PollSet {
    pub fn new() -> PollSet {
        PollSet::default()
    }

    pub fn clear(&mut self) {
        self.fds.clear();
        self.tokens.clear();
    }

    /// Watch `fd` for input, and for room to write when `want_write`.
    pub fn add(&mut self, fd: RawFd, token: Token, want_write: bool) {
        let events = libc::POLLIN | if want_write { libc::POLLOUT } else { 0 };
        self.fds.push(libc::pollfd { fd, events, revents: 0 });
        self.tokens.push(token);
    }

    /// Waits until a descriptor is ready or `timeout_ms` passes (a signal also ends the wait).
    pub fn wait(&mut self, timeout_ms: i32) -> io::Result<()> {
        for p in &mut self.fds {
            p.revents = 0;
        }
        let n = unsafe { libc::poll(self.fds.as_mut_ptr(), self.fds.len() as libc::nfds_t, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Like [`PollSet::wait`] with a timeout in microseconds (merge timers need better
    /// than poll(2)'s milliseconds).
    pub fn wait_us(&mut self, timeout_us: u64) -> io::Result<()> {
        for p in &mut self.fds {
            p.revents = 0;
        }
        concast_daemon::wait::poll_us(&mut self.fds, timeout_us).map(|_| ())
    }

    pub fn ready(&self) -> Vec<Ready> {
        self.fds
            .iter()
            .zip(&self.tokens)
            .filter(|(p, _)| p.revents != 0)
            .map(|(p, t)| Ready {
                token: *t,
                readable: p.revents & libc::POLLIN != 0,
                writable: p.revents & libc::POLLOUT != 0,
                closed: p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0,
            })
            .collect()
    }
}
