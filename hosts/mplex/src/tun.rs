//! The receiver's injection point: a TUN device inside the host's namespace. A datagram
//! written to its descriptor enters the kernel as if it had arrived on that interface, goes
//! through routing, netfilter INPUT and TCP exactly like one from the wire, so R's own TCP
//! sees the ACK its peer sent. (Sent through a raw socket it would instead be locally
//! generated output looping back over `lo` with a foreign source address.) The device is
//! also an interface of its own: captures on it show exactly what was injected, and
//! firewall rules can name it.
//!
//! Reverse-path filtering must not reject what we inject: a rebuilt ACK carries its client's
//! address as source, and the route back to that address leaves through eth0, not through
//! the TUN device, so strict mode (`rp_filter = 1`) drops it as spoofed (loose mode, 2, would
//! let it pass, since some route exists). The kernel applies the larger of `all` and the
//! device's own value, so both are set to 0, inside this namespace only (`/proc/sys/net` is
//! per namespace); `all` is put back when the device goes away.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use concast_daemon::sys::check;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

fn ifreq_with_name(name: &str) -> io::Result<libc::ifreq> {
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.is_empty()
        || name.len() >= req.ifr_name.len()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}"),
        ));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

fn rp_filter_path(dev: &str) -> String {
    format!("/proc/sys/net/ipv4/conf/{dev}/rp_filter")
}

/// An up TUN device that takes whole IPv4 datagrams (no packet-information prefix).
pub struct Tun {
    fd: OwnedFd,
    name: String,
    /// `all/rp_filter` before we set it, restored on drop.
    saved_all_rp_filter: Option<String>,
}

impl Tun {
    pub fn create(name: &str) -> io::Result<Tun> {
        let raw = check(unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        })?;
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = ifreq_with_name(name)?;
        req.ifr_ifru.ifru_flags = IFF_TUN | IFF_NO_PI;
        check(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) })?;
        let mut tun = Tun {
            fd,
            name: name.to_string(),
            saved_all_rp_filter: None,
        };
        tun.set_up()?;
        let all = rp_filter_path("all");
        tun.saved_all_rp_filter = fs::read_to_string(&all).ok().map(|s| s.trim().to_string());
        fs::write(rp_filter_path(name), "0")?;
        fs::write(all, "0")?;
        Ok(tun)
    }

    fn set_up(&self) -> io::Result<()> {
        let sock = check(unsafe {
            libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
        })?;
        let sock = unsafe { OwnedFd::from_raw_fd(sock) };
        let mut req = ifreq_with_name(&self.name)?;
        check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })?;
        unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &mut req) })?;
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Injects one IPv4 datagram into the namespace's stack.
    pub fn inject(&self, datagram: &[u8]) -> io::Result<()> {
        let n = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                datagram.as_ptr() as *const libc::c_void,
                datagram.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads and discards whatever the kernel routed into the device (nothing is routed
    /// there, but a stray packet must not fill its queue); returns how many.
    pub fn drain(&self) -> u64 {
        let mut buf = [0u8; 2048];
        let mut n = 0;
        while unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        } > 0
        {
            n += 1;
        }
        n
    }
}

impl Drop for Tun {
    fn drop(&mut self) {
        // Closing the descriptor deletes the (non-persistent) device.
        if let Some(v) = &self.saved_all_rp_filter {
            let _ = fs::write(rp_filter_path("all"), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_checked() {
        assert!(ifreq_with_name("mplex0").is_ok());
        assert!(ifreq_with_name("").is_err());
        assert!(ifreq_with_name("a-name-far-too-long").is_err());
        assert!(ifreq_with_name("bad/name").is_err());
    }
}
