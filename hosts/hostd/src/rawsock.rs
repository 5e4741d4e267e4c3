//! The sockets hostd talks to the network with, all inside the host's namespace:
//!
//! - [`RawReceiver`]: `socket(AF_INET, SOCK_RAW, proto)`. The kernel gives a raw socket a copy
//!   of every datagram of that protocol addressed to this host, IPv4 header and options
//!   included, after its own header checks and reassembly. Protocol 253 carries CSP; protocol
//!   17 is how the receiver sees concast datagrams (their option names the group).
//! - [`RawSender`]: `socket(AF_INET, SOCK_RAW, IPPROTO_RAW)`, which implies `IP_HDRINCL`: hostd
//!   writes every header itself (Router Alert on CSP, the Concast ID option on data).
//! - [`PortSink`]: a UDP socket bound to a port the receiver serves. The kernel also hands
//!   each captured UDP datagram to its own UDP layer; with nobody bound to the port it would
//!   answer with ICMP port unreachable (toward the router or sender that sent it) and a second
//!   application socket could see an unmerged copy. Binding the port stops both; what the
//!   sink receives is a duplicate of what the raw socket saw and is read and discarded.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn raw_socket(protocol: libc::c_int) -> io::Result<OwnedFd> {
    let fd = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, protocol) })?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn set_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, value: libc::c_int) -> io::Result<()> {
    check(unsafe { libc::setsockopt(fd, level, opt, &value as *const _ as *const libc::c_void, 4) }).map(|_| ())
}

/// Receives every datagram of one IPv4 protocol addressed to this host.
pub struct RawReceiver {
    fd: OwnedFd,
}

impl RawReceiver {
    pub fn open(protocol: u8) -> io::Result<RawReceiver> {
        let fd = raw_socket(libc::c_int::from(protocol))?;
        // Best effort: a bigger buffer only absorbs bursts (8 senders' rounds arrive together).
        let _ = set_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20);
        Ok(RawReceiver { fd })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// One datagram into `buf` without blocking; `None` when nothing waits.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }
}

/// Sends whole IPv4 datagrams, headers as written.
pub struct RawSender {
    fd: OwnedFd,
}

impl RawSender {
    pub fn open() -> io::Result<RawSender> {
        Ok(RawSender { fd: raw_socket(libc::IPPROTO_RAW)? })
    }

    /// Sends one datagram to the destination in its header. A full socket buffer is waited
    /// out briefly rather than turned into a loss.
    pub fn send(&self, datagram: &[u8]) -> io::Result<()> {
        if datagram.len() < 20 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "shorter than an IPv4 header"));
        }
        let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from_ne_bytes([datagram[16], datagram[17], datagram[18], datagram[19]]);
        let mut tries = 0;
        loop {
            let n = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    datagram.as_ptr() as *const libc::c_void,
                    datagram.len(),
                    0,
                    &sin as *const _ as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                )
            };
            if n >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            let full = e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS);
            if e.kind() == io::ErrorKind::Interrupted || (full && tries < 100) {
                tries += 1;
                let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
                unsafe { libc::poll(&mut pfd, 1, 1) };
                continue;
            }
            return Err(e);
        }
    }
}

/// A UDP port held by hostd so the kernel neither answers its datagrams with ICMP nor hands
/// them to another socket (see the module doc).
pub struct PortSink {
    socket: UdpSocket,
    pub port: u16,
}

impl PortSink {
    pub fn bind(port: u16) -> io::Result<PortSink> {
        let socket = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))?;
        socket.set_nonblocking(true)?;
        Ok(PortSink { socket, port })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// Reads and discards whatever the kernel queued; returns how many datagrams.
    pub fn drain(&self) -> u64 {
        let mut buf = [0u8; 2048];
        let mut n = 0;
        while self.socket.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    }
}
