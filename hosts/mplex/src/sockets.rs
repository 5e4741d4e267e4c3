//! Raw IPv4 sockets inside the host's namespace.
//!
//! - [`Arrivals`]: `socket(AF_INET, SOCK_RAW, 254)` gets a copy of every MplexPkt addressed
//!   to this host, header and options included, after the kernel's own header checks and
//!   reassembly. Its mere presence also keeps the kernel from answering protocol 254 with
//!   ICMP protocol unreachable (a protocol with a raw listener counts as handled).
//! - [`Sender`]: `socket(AF_INET, SOCK_RAW, IPPROTO_RAW)`, which implies `IP_HDRINCL`: the
//!   MplexPkt goes out with the header we wrote (the Concast ID option, DF, our TTL).

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Sets a socket's receive buffer past rmem_max (root only); best effort: a smaller buffer
/// only makes bursts more likely to overflow.
pub fn force_rcvbuf(fd: RawFd, bytes: libc::c_int) {
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &bytes as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

fn raw_socket(protocol: libc::c_int) -> io::Result<OwnedFd> {
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            protocol,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR))
}

pub struct Arrivals {
    fd: OwnedFd,
}

impl Arrivals {
    pub fn open() -> io::Result<Arrivals> {
        let fd = raw_socket(libc::c_int::from(concast_wire::ipv4::protocol::MPLEX))?;
        // Bundles from several routers arrive in bursts; a deep buffer absorbs them.
        force_rcvbuf(fd.as_raw_fd(), 4 << 20);
        Ok(Arrivals { fd })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// One datagram into `buf`; `None` when nothing waits.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if would_block(&e) { Ok(None) } else { Err(e) };
        }
        Ok(Some(n as usize))
    }
}

pub struct Sender {
    fd: OwnedFd,
}

impl Sender {
    pub fn open() -> io::Result<Sender> {
        Ok(Sender {
            fd: raw_socket(libc::IPPROTO_RAW)?,
        })
    }

    /// Sends one whole IPv4 datagram to `dst` (its header's destination). A full socket
    /// buffer is an error the caller handles by letting the original packet pass.
    pub fn send(&self, datagram: &[u8], dst: Ipv4Addr) -> io::Result<()> {
        let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from_ne_bytes(dst.octets());
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                datagram.as_ptr() as *const libc::c_void,
                datagram.len(),
                libc::MSG_DONTWAIT,
                &sin as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as u32,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
