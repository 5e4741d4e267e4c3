//! Batched datagram I/O for the UDP driver.
//!
//! Send: consecutive datagrams to one peer that have the same length (the last may be
//! shorter) form a group sent with UDP_SEGMENT (generic segmentation offload: the kernel, or
//! nobody at all on a veth or loopback path, cuts the buffer into datagrams); up to
//! `MAX_GROUPS` groups go in one `sendmmsg`. If the kernel refuses GSO (EIO, EINVAL,
//! ENOPROTOOPT, EOPNOTSUPP), the batch and every later one go out one datagram per message.
//!
//! Receive: with UDP_GRO the kernel hands a run of same-size datagrams of one flow over as
//! one buffer plus the segment size in a control message; without it (the option refused)
//! each `recvmsg` returns one datagram.
//!
//! DF (`set_df`, for Resize): a datagram over the interface MTU is refused with EMSGSIZE and
//! dropped (counted in `too_big`), never fatal; a GSO group over it is refused with EINVAL
//! (and without DF, over a path MTU the kernel learnt, with EMSGSIZE), so such a group is sent
//! one datagram at a time to tell size from a GSO refusal. A connected socket
//! reports an ICMP "fragmentation needed" as EMSGSIZE on its next call (`ptb_reports`).
//!
//! A full socket buffer (EAGAIN, ENOBUFS) does not hold the caller: what did not go stays
//! queued in order, `Tx::pending` says so, and the next `flush` sends it first. The driver
//! meanwhile waits for the socket to be readable *or* writable (`wait_io`) and reads ACKs.
//! Waiting here for room instead (10 ms polls until the whole batch was out) held a sender
//! for 123-730 ms at 16 flows with no ACK read, and the ACKs' delay fired timeouts (issue #23).
//! The fallback paths after a GSO refusal or an oversized datagram (`send_plain`) still wait.
//!
//! `IoStats` counts system calls and datagrams both ways and says which path ran.
use std::io::{self, ErrorKind};
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

// linux/udp.h; not exported by the libc crate for glibc targets
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// Most segments one GSO send may carry (UDP_MAX_SEGMENTS is 64 on older kernels).
pub const MAX_SEGS: usize = 64;
/// Most bytes one batch may carry: an IPv4 datagram's 65535 less the IP and UDP headers,
/// with room for IP options.
pub const MAX_BATCH_BYTES: usize = 65_000;
/// A GRO buffer holds at most one 64 KB super-datagram.
pub const RECV_BUF: usize = 65_536;
/// Receive space allocated at a time: receives fill it one after another, each keeping only
/// the bytes it got, so segments that slice a receive hold little memory beyond it.
const RX_CHUNK: usize = 4 * RECV_BUF;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    /// GSO in use for sending; false after the kernel refused it (or it was switched off).
    pub gso: bool,
    /// UDP_GRO enabled on the socket.
    pub gro: bool,
    /// Why GSO or GRO is off, when the kernel said so.
    pub fallback: Option<String>,
    /// DF set on every datagram (`IP_PMTUDISC_PROBE`).
    pub df: bool,
    /// Datagrams the kernel refused as larger than the interface MTU (EMSGSIZE), dropped.
    pub too_big: u64,
    /// ICMP "fragmentation needed" reports the socket handed over (as EMSGSIZE), skipped.
    pub ptb_reports: u64,
    pub send_calls: u64,
    pub datagrams_sent: u64,
    pub bytes_sent: u64,
    pub recv_calls: u64,
    pub datagrams_received: u64,
    pub bytes_received: u64,
    /// Sends the kernel refused for a full socket buffer (EAGAIN, ENOBUFS).
    pub send_full: u64,
    /// Time datagrams waited for socket-buffer room, in all and the longest wait (µs): from
    /// the first refusal until the queue was out.
    pub send_wait_us: u64,
    pub send_wait_max_us: u64,
    /// The longest a wait for the socket (the driver's poll) returned after its timeout, µs,
    /// and how many returned more than 10 ms late: time the process was ready to run and
    /// was not (a loaded CPU), or a late timer.
    pub poll_late_max_us: u64,
    pub polls_late_10ms: u64,
    /// Timed waits, and their lateness past the timeout in all (µs): the mean is what a pacer
    /// loses a wake-up.
    pub polls: u64,
    pub poll_late_us: u64,
    /// Pumps that stopped reading after the most receives one pump takes (`udp::BATCH`):
    /// datagrams may still be waiting when its timers run.
    pub reads_cut: u64,
}

impl IoStats {
    /// A wait asked for `asked` took `took`.
    pub fn polled(&mut self, asked: Duration, took: Duration) {
        let late = took.saturating_sub(asked).as_micros() as u64;
        self.polls += 1;
        self.poll_late_us += late;
        self.poll_late_max_us = self.poll_late_max_us.max(late);
        if late > 10_000 {
            self.polls_late_10ms += 1;
        }
    }

    /// One wait for socket-buffer room is over.
    fn waited(&mut self, since: std::time::Instant) {
        let us = since.elapsed().as_micros() as u64;
        self.send_wait_us += us;
        self.send_wait_max_us = self.send_wait_max_us.max(us);
    }
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    let r = unsafe {
        libc::setsockopt(fd, level, opt, &v as *const _ as *const libc::c_void, size_of::<libc::c_int>() as _)
    };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// DF on every datagram, the kernel's path MTU cache ignored (`IP_PMTUDISC_PROBE`): a
/// datagram too big for a hop is dropped there instead of fragmented, as Resize's probes need.
pub fn set_df(fd: RawFd, v6: bool) -> io::Result<()> {
    if v6 {
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_PROBE)?;
        // a dual-stack socket's IPv4 traffic follows the IPv4 option; a v6-only one refuses it
        let _ = setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_PROBE);
        Ok(())
    } else {
        setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_PROBE)
    }
}

/// Turns UDP_GRO on; the error says why the kernel would not.
pub fn enable_gro(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_UDP, UDP_GRO, 1)
}

fn to_sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match a {
        SocketAddr::V4(v) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as _,
                sin_port: v.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v.ip().octets()) },
                sin_zero: [0; 8],
            };
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as _,
                sin6_port: v.port().to_be(),
                sin6_flowinfo: v.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: v.ip().octets() },
                sin6_scope_id: v.scope_id(),
            };
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn from_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(sin6.sin6_port), sin6.sin6_flowinfo, sin6.sin6_scope_id)))
        }
        _ => None,
    }
}

/// Wait until the socket is readable (or writable with `out`) or `timeout` passes.
pub fn wait(fd: RawFd, timeout: Duration, out: bool) -> io::Result<()> {
    poll_for(fd, if out { libc::POLLOUT } else { libc::POLLIN }, timeout)
}

/// Wait until the socket is readable, or also writable with `writable`, or `timeout` passes.
pub fn wait_io(fd: RawFd, timeout: Duration, writable: bool) -> io::Result<()> {
    poll_for(fd, io_events(writable), timeout)
}

fn io_events(writable: bool) -> libc::c_short {
    if writable { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN }
}

thread_local! {
    static FINE_SLACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A normal thread's timed wait may end up to its timer slack late (50 µs by default, prctl(2)
/// PR_SET_TIMERSLACK), so that the kernel can merge wake-ups: a pacer whose period is a few
/// tens of µs (UDP Blast at 300 Mbit/s: 37 µs) then woke every period + 50 µs and sent at
/// two thirds of its rate. The driver's waits are its timers: 1 ns of slack, once per thread.
fn fine_timer_slack() {
    FINE_SLACK.with(|done| {
        if !done.replace(true) {
            // failure leaves the default slack: waits merely end later
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        }
    });
}

/// `wait_io` over several sockets (fd, writable too): until any is ready or `timeout` passes.
pub fn wait_any(fds: &[(RawFd, bool)], timeout: Duration) -> io::Result<()> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, w)| libc::pollfd { fd, events: io_events(w), revents: 0 })
        .collect();
    ppoll(&mut p, timeout)
}

fn poll_for(fd: RawFd, events: libc::c_short, timeout: Duration) -> io::Result<()> {
    ppoll(&mut [libc::pollfd { fd, events, revents: 0 }], timeout)
}

fn ppoll(p: &mut [libc::pollfd], timeout: Duration) -> io::Result<()> {
    fine_timer_slack();
    // ppoll: microsecond timeouts, so pacing below a millisecond keeps its rate
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    if unsafe { libc::ppoll(p.as_mut_ptr(), p.len() as libc::nfds_t, &ts, std::ptr::null()) } < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// The socket buffer is full: try again when it has room.
fn full(e: &io::Error) -> bool {
    e.kind() == ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS)
}

fn too_big(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EMSGSIZE)
}

/// True for the errors with which a kernel or device refuses UDP GSO.
fn gso_refused(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT | libc::EOPNOTSUPP))
}

/// Datagrams queued for one peer, sent with one `sendmmsg`: each message of it one GSO
/// group of same-size datagrams (a shorter one ends a group, as a message's last segment
/// does), or with GSO off one datagram. They are sent from where they lie (one iovec each,
/// no copy) and handed back in `spent` for the session to reuse.
pub struct Tx {
    /// Most datagrams per GSO group (the driver sizes it to the flow's rate).
    pub max_group: usize,
    bufs: Vec<Vec<u8>>,
    groups: Vec<Group>,
    /// Buffers already sent, for `Session::recycle`.
    pub spent: Vec<Vec<u8>>,
    pub stats: IoStats,
    /// Since when what is queued has waited for socket-buffer room.
    full_since: Option<std::time::Instant>,
}

/// `count` datagrams from `bufs[first]` on, all `seg` bytes but perhaps the last, to `to`
/// (None on a connected socket).
struct Group {
    to: Option<SocketAddr>,
    first: usize,
    count: usize,
    seg: usize,
    bytes: usize,
    /// The last datagram was shorter than `seg`: nothing may follow it in this group.
    closed: bool,
}

/// Sends tried again after EMSGSIZE before the datagram counts as too big (`Tx::send_some`).
const EMSGSIZE_TRIES: usize = 8;

/// GSO groups per sendmmsg: 8 x 64 KB in one system call.
pub const MAX_GROUPS: usize = 8;

impl Tx {
    pub fn new(gso: bool) -> Tx {
        Tx {
            max_group: MAX_SEGS,
            bufs: Vec::with_capacity(MAX_SEGS),
            groups: Vec::with_capacity(MAX_SEGS),
            spent: Vec::new(),
            stats: IoStats { gso, ..IoStats::default() },
            full_since: None,
        }
    }

    /// Datagrams are queued that a full socket buffer refused: flush again once writable.
    pub fn pending(&self) -> bool {
        self.full_since.is_some() && !self.bufs.is_empty()
    }

    /// Queue a datagram (`to`: None on a connected socket); sends what is queued first when
    /// the batch is full (unless the socket buffer was full: then it waits in the queue).
    pub fn push(&mut self, fd: RawFd, d: Vec<u8>, to: Option<SocketAddr>) -> io::Result<()> {
        let gso = self.stats.gso;
        let joins = self.groups.last().is_some_and(|g| {
            gso && !g.closed
                && g.to == to
                && d.len() <= g.seg
                // a shorter one ends only a run of equal ones: after a lone datagram it may be
                // one of Resize's probes of another size, and a router refusing an oversized
                // GSO packet (DF) drops every datagram in it
                && (d.len() == g.seg || g.count > 1)
                && g.count < self.max_group.clamp(1, MAX_SEGS)
                && g.bytes + d.len() <= MAX_BATCH_BYTES
        });
        if joins {
            let g = self.groups.last_mut().expect("joins a group");
            g.count += 1;
            g.bytes += d.len();
            g.closed = d.len() < g.seg;
        } else {
            if self.groups.len() >= if gso { MAX_GROUPS } else { MAX_SEGS } && self.full_since.is_none() {
                self.flush(fd)?;
            }
            let len = d.len();
            self.groups.push(Group { to, first: self.bufs.len(), count: 1, seg: len, bytes: len, closed: false });
        }
        self.bufs.push(d);
        Ok(())
    }

    /// Send what is queued, as much as the socket buffer takes: the rest stays queued, in
    /// order (`pending`), for the next flush.
    pub fn flush(&mut self, fd: RawFd) -> io::Result<()> {
        if self.bufs.is_empty() {
            return Ok(());
        }
        match self.send(fd) {
            Ok(n) if n < self.groups.len() => {
                let sent = self.groups[n].first;
                self.spent.extend(self.bufs.drain(..sent));
                self.groups.drain(..n);
                for g in &mut self.groups {
                    g.first -= sent;
                }
                let now = std::time::Instant::now();
                self.full_since.get_or_insert(now);
                Ok(())
            }
            r => {
                self.spent.append(&mut self.bufs);
                self.groups.clear();
                if let Some(t) = self.full_since.take() {
                    self.stats.waited(t);
                }
                r.map(|_| ())
            }
        }
    }

    /// One call; a closed port (ICMP) is left to the session's timers. A full socket buffer
    /// is an error here (`full`): `send` leaves the rest queued, `send_plain` waits.
    fn once(mut call: impl FnMut() -> isize) -> io::Result<usize> {
        loop {
            let r = call();
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                ErrorKind::Interrupted => {}
                ErrorKind::ConnectionRefused => return Ok(0),
                _ => return Err(e),
            }
        }
    }

    /// One sendmmsg from `msgs[0]` on, as `retrying`. EMSGSIZE is tried again: it may be an
    /// ICMP report a connected socket was holding (each is handed over once), not about this
    /// datagram. Reports come one per oversized datagram sent, possibly while retrying (a
    /// router on this host answers within the send), so a few tries; a datagram really over
    /// the interface MTU fails every one.
    fn send_some(fd: RawFd, msgs: &mut [libc::mmsghdr], stats: &mut IoStats) -> io::Result<usize> {
        let mut call = || unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), msgs.len() as _, 0) as isize };
        let mut r = Tx::once(&mut call);
        for _ in 0..EMSGSIZE_TRIES {
            match &r {
                Err(e) if too_big(e) => r = Tx::once(&mut call),
                _ => break,
            }
            if r.is_ok() {
                stats.ptb_reports += 1;
            }
        }
        if r.as_ref().is_err_and(full) {
            stats.send_full += 1;
        }
        r
    }

    /// `send_some` until the kernel took them, waiting for room (the fallback paths only).
    fn send_waiting(fd: RawFd, msgs: &mut [libc::mmsghdr], stats: &mut IoStats) -> io::Result<usize> {
        let mut since = None;
        loop {
            match Tx::send_some(fd, msgs, stats) {
                Err(e) if full(&e) => {
                    since.get_or_insert_with(std::time::Instant::now);
                    wait(fd, Duration::from_millis(10), true)?;
                }
                r => {
                    if let Some(t) = since {
                        stats.waited(t);
                    }
                    return r;
                }
            }
        }
    }

    /// Sends the queued groups in order until the socket buffer is full; returns how many
    /// groups were dealt with (sent, or dropped as refused), the rest to be sent later.
    fn send(&mut self, fd: RawFd) -> io::Result<usize> {
        let mut names: Vec<(libc::sockaddr_storage, libc::socklen_t)> =
            self.groups.iter().map(|g| g.to.as_ref().map(to_sockaddr).unwrap_or((unsafe { zeroed() }, 0))).collect();
        let mut iovs: Vec<libc::iovec> = self
            .bufs
            .iter_mut()
            .map(|b| libc::iovec { iov_base: b.as_mut_ptr() as *mut _, iov_len: b.len() })
            .collect();
        // one cmsg carrying a u16 per group, 8-byte aligned; the Vec is not moved once filled
        let mut ctrls = vec![[0u64; 4]; self.groups.len()];
        let mut msgs: Vec<libc::mmsghdr> = Vec::with_capacity(self.groups.len());
        for ((g, ctrl), (name, name_len)) in self.groups.iter().zip(ctrls.iter_mut()).zip(names.iter_mut()) {
            let mut h: libc::mmsghdr = unsafe { zeroed() };
            let m = &mut h.msg_hdr;
            m.msg_name = if *name_len > 0 { name as *mut _ as *mut _ } else { std::ptr::null_mut() };
            m.msg_namelen = *name_len;
            m.msg_iov = unsafe { iovs.as_mut_ptr().add(g.first) };
            m.msg_iovlen = g.count as _;
            if g.count > 1 {
                m.msg_control = ctrl.as_mut_ptr() as *mut _;
                m.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as _;
                unsafe {
                    let c = libc::CMSG_FIRSTHDR(m);
                    (*c).cmsg_level = libc::SOL_UDP;
                    (*c).cmsg_type = UDP_SEGMENT;
                    (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, g.seg as u16);
                }
            }
            msgs.push(h);
        }
        let mut done = 0;
        while done < msgs.len() {
            let r = Tx::send_some(fd, &mut msgs[done..], &mut self.stats);
            match r {
                Ok(0) => return Ok(msgs.len()), // port closed: the rest would be refused as well
                Err(e) if full(&e) => return Ok(done),
                Ok(n) => {
                    self.stats.send_calls += 1;
                    for g in &self.groups[done..done + n] {
                        self.stats.datagrams_sent += g.count as u64;
                        self.stats.bytes_sent += g.bytes as u64;
                    }
                    done += n;
                }
                Err(e) if (too_big(&e) || gso_refused(&e)) && self.groups[done].count > 1 => {
                    // a segment over the MTU: EINVAL under DF, EMSGSIZE over a path MTU the
                    // kernel learnt without it (which it fragments when sent alone). One at a
                    // time tells size from a GSO refusal, and sends what fits
                    let (first, end) = (self.groups[done].first, self.groups[done].first + self.groups[done].count);
                    let (name, name_len) = &mut names[done];
                    let big = self.send_plain(fd, &mut iovs[first..end], name, *name_len)?;
                    done += 1;
                    if big > 0 || too_big(&e) {
                        continue;
                    }
                    self.stats.gso = false;
                    self.stats.fallback = Some(format!("UDP GSO refused: {e}"));
                    // the rest one datagram at a time, each group to its own peer
                    for k in done..self.groups.len() {
                        let (first, end) = (self.groups[k].first, self.groups[k].first + self.groups[k].count);
                        let (name, name_len) = &mut names[k];
                        self.send_plain(fd, &mut iovs[first..end], name, *name_len)?;
                    }
                    return Ok(self.groups.len());
                }
                Err(e) if too_big(&e) => {
                    self.stats.too_big += 1;
                    done += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// The plain path after a refusal: one message per datagram, one sendmmsg for them all.
    /// Returns how many the kernel refused as too big (dropped).
    fn send_plain(
        &mut self,
        fd: RawFd,
        iovs: &mut [libc::iovec],
        name: &mut libc::sockaddr_storage,
        name_len: libc::socklen_t,
    ) -> io::Result<u64> {
        let mut msgs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                let mut h: libc::mmsghdr = unsafe { zeroed() };
                h.msg_hdr.msg_name = if name_len > 0 { name as *mut _ as *mut _ } else { std::ptr::null_mut() };
                h.msg_hdr.msg_namelen = name_len;
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        let (mut done, mut big) = (0, 0);
        while done < msgs.len() {
            let n = match Tx::send_waiting(fd, &mut msgs[done..], &mut self.stats) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if too_big(&e) => {
                    big += 1;
                    done += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.stats.send_calls += 1;
            self.stats.datagrams_sent += n as u64;
            self.stats.bytes_sent += iovs[done..done + n].iter().map(|v| v.iov_len as u64).sum::<u64>();
            done += n;
        }
        self.stats.too_big += big;
        Ok(big)
    }
}

/// One receive: a GRO buffer of `seg`-byte datagrams (the last may be shorter), or one
/// datagram when `seg` is its whole length. Each receive's bytes are a `Bytes` of their own,
/// which the session's segments slice instead of copying.
pub struct Rx {
    /// Where the next receive goes: the free rest of the current allocation.
    space: BytesMut,
    /// The last receive's bytes.
    pub data: Bytes,
    pub seg: usize,
    pub from: Option<SocketAddr>,
}

impl Rx {
    pub fn new() -> Rx {
        Rx { space: BytesMut::with_capacity(RX_CHUNK), data: Bytes::new(), seg: 0, from: None }
    }

    /// The datagrams of the last receive.
    pub fn datagrams(&self) -> impl Iterator<Item = &[u8]> {
        self.data.chunks(self.seg.max(1))
    }

    /// The datagrams of the last receive as slices of it (no copy).
    pub fn shared_datagrams(&self) -> impl Iterator<Item = Bytes> + '_ {
        let step = self.seg.max(1);
        (0..self.data.len()).step_by(step).map(move |at| self.data.slice(at..(at + step).min(self.data.len())))
    }

    /// Read one buffer; Ok(false) when nothing is waiting. A refused port (ICMP) is skipped.
    pub fn recv(&mut self, fd: RawFd, stats: &mut IoStats) -> io::Result<bool> {
        loop {
            let mut name: libc::sockaddr_storage = unsafe { zeroed() };
            if self.space.capacity() < RECV_BUF {
                // takes the allocation back once no segment slices it any more, else a new one
                self.space.reserve(RX_CHUNK);
            }
            let free = self.space.spare_capacity_mut();
            let mut iov = libc::iovec { iov_base: free.as_mut_ptr() as *mut _, iov_len: RECV_BUF };
            let mut ctrl = [0u64; 8];
            let mut m: libc::msghdr = unsafe { zeroed() };
            m.msg_name = &mut name as *mut _ as *mut _;
            m.msg_namelen = size_of::<libc::sockaddr_storage>() as _;
            m.msg_iov = &mut iov;
            m.msg_iovlen = 1;
            m.msg_control = ctrl.as_mut_ptr() as *mut _;
            m.msg_controllen = size_of::<[u64; 8]>() as _;
            let r = unsafe { libc::recvmsg(fd, &mut m, 0) };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    ErrorKind::WouldBlock => return Ok(false),
                    ErrorKind::Interrupted | ErrorKind::ConnectionRefused => continue,
                    _ if too_big(&e) => {
                        stats.ptb_reports += 1;
                        continue;
                    }
                    _ => return Err(e),
                }
            }
            let len = r as usize;
            // SAFETY: the kernel wrote `len` bytes (at most `iov_len`) into the spare capacity
            unsafe { self.space.set_len(len) };
            self.data = self.space.split().freeze();
            self.seg = len;
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&m);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                        let g = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
                        if g > 0 {
                            self.seg = g as usize;
                        }
                    }
                    c = libc::CMSG_NXTHDR(&m, c);
                }
            }
            self.from = from_sockaddr(&name);
            stats.recv_calls += 1;
            stats.datagrams_received += len.div_ceil(self.seg.max(1)).max(1) as u64;
            stats.bytes_received += len as u64;
            return Ok(true);
        }
    }
}

impl Default for Rx {
    fn default() -> Self {
        Rx::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    /// Receives `n` datagrams of `len` bytes into `rx`, keeping what `keep` picks of each.
    fn receive(rx: &mut Rx, n: usize, len: usize, keep: impl Fn(usize) -> bool) -> Vec<(usize, Bytes)> {
        let (a, b) = (UdpSocket::bind("127.0.0.1:0").unwrap(), UdpSocket::bind("127.0.0.1:0").unwrap());
        let mut stats = IoStats::default();
        let mut kept = Vec::new();
        for i in 0..n {
            a.send_to(&vec![i as u8; len], b.local_addr().unwrap()).unwrap();
            wait(b.as_raw_fd(), Duration::from_secs(5), false).unwrap();
            assert!(rx.recv(b.as_raw_fd(), &mut stats).unwrap());
            assert_eq!(rx.data.len(), len);
            assert!(rx.shared_datagrams().all(|d| d.iter().all(|x| *x == i as u8)));
            if keep(i) {
                kept.push((i, rx.data.clone()));
            }
        }
        kept
    }

    #[test]
    fn a_shorter_datagram_joins_a_run_of_equal_ones_but_not_a_lone_one() {
        let mut tx = Tx::new(true);
        // nothing is sent while the groups fit: no socket needed
        for len in [1462, 1372, 1252, 996, 548, 1000, 1000, 1000, 400, 1000] {
            tx.push(-1, vec![0; len], None).unwrap();
        }
        let groups: Vec<(usize, usize)> = tx.groups.iter().map(|g| (g.seg, g.count)).collect();
        // Resize's probes each alone (a hop dropping one GSO packet drops all of it); a
        // message's segments and its short tail together
        assert_eq!(groups, vec![(1462, 1), (1372, 1), (1252, 1), (996, 1), (548, 1), (1000, 4), (1000, 1)]);
        tx.bufs.clear();
        tx.groups.clear();
    }

    /// A full socket buffer returns at once with the rest queued in order (issue #23: waiting
    /// there for room kept the sender from its ACKs). A Unix datagram pair stands in for the
    /// UDP socket: its sender gets EAGAIN once the peer's queue is full, as a UDP sender does
    /// once its send buffer is. The reader starts when the sender's flush has returned, or by
    /// itself after 10 s (which the old path, waiting for room, needed).
    #[test]
    fn a_full_socket_buffer_leaves_the_rest_queued_instead_of_waiting() {
        use std::sync::mpsc;
        const N: u32 = 2000;
        let mut fds = [0; 2];
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0, fds.as_mut_ptr()) };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        let (a, b) = (fds[0], fds[1]);
        let (go, started) = mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            let by_itself = started.recv_timeout(Duration::from_secs(10)).is_err();
            let mut got = Vec::new();
            let mut buf = [0u8; 200];
            while got.len() < N as usize {
                wait(b, Duration::from_millis(100), false).unwrap();
                loop {
                    let n = unsafe { libc::recv(b, buf.as_mut_ptr() as *mut _, buf.len(), 0) };
                    if n < 0 {
                        break;
                    }
                    got.push(u32::from_be_bytes(buf[..4].try_into().unwrap()));
                }
            }
            (by_itself, got)
        });
        let mut tx = Tx::new(false);
        for i in 0..N {
            let mut d = i.to_be_bytes().to_vec();
            d.resize(100, 0);
            tx.push(a, d, None).unwrap();
        }
        tx.flush(a).unwrap();
        let _ = go.send(());
        assert!(tx.pending() && tx.stats.send_full >= 1, "{:?}", tx.stats);
        assert!(tx.stats.datagrams_sent < N as u64);
        while tx.pending() {
            wait_io(a, Duration::from_millis(100), true).unwrap();
            tx.flush(a).unwrap();
        }
        let (by_itself, got) = reader.join().unwrap();
        assert!(!by_itself, "the sender's flush waited for the reader");
        assert_eq!(got, (0..N).collect::<Vec<u32>>(), "every datagram, in order");
        assert_eq!(tx.stats.datagrams_sent, N as u64);
        assert_eq!(tx.spent.len(), N as usize, "every buffer handed back once");
        unsafe {
            libc::close(a);
            libc::close(b);
        }
    }

    #[test]
    fn receives_fill_one_allocation_and_take_it_back_when_nothing_slices_it() {
        // 60000-byte receives: four fit in one allocation, the fifth needs room again
        let mut rx = Rx::new();
        let first = receive(&mut rx, 4, 60_000, |i| i == 0).pop().unwrap().1.as_ptr() as usize;
        assert_eq!(rx.data.as_ptr() as usize, first + 3 * 60_000, "receives share the allocation");
        rx.data = Bytes::new();
        receive(&mut rx, 1, 60_000, |_| false);
        assert_eq!(rx.data.as_ptr() as usize, first, "the allocation was taken back");
        // while a slice of the allocation lives, the next receive goes elsewhere
        let mut rx = Rx::new();
        let kept = receive(&mut rx, 5, 60_000, |i| i == 0);
        let start = kept[0].1.as_ptr() as usize;
        assert!(!(start..start + RX_CHUNK).contains(&(rx.data.as_ptr() as usize)));
        assert!(kept[0].1.iter().all(|x| *x == 0), "a kept receive was overwritten");
    }
}
