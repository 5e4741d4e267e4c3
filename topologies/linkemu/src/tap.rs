//! TAP devices: created inside the namespace the end belongs to (a short-lived thread enters
//! it with setns, so the daemon itself stays in the root namespace), frames read from and
//! written to the file descriptor the daemon keeps.
//!
//! No IFF_VNET_HDR and no TUNSETOFFLOAD: the kernel then hands us complete checksums and
//! never a GSO super-frame, which is what userspace OVS and the peer stack need.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;

/// Where an end's interface lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Netns {
    Root,
    /// A file that names a network namespace: /proc/PID/ns/net, /run/netns/NAME, ...
    Path(String),
}

impl std::fmt::Display for Netns {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Netns::Root => f.write_str("root"),
            Netns::Path(p) => f.write_str(p),
        }
    }
}

impl Netns {
    /// null or "root": the daemon's namespace; a number: that process's; "/..." a namespace
    /// file; another string: a name under /run/netns.
    pub fn from_json(v: &serde_json::Value) -> Result<Netns, String> {
        match v {
            serde_json::Value::Null => Ok(Netns::Root),
            serde_json::Value::Number(n) => match n.as_u64() {
                Some(pid) if pid > 0 => Ok(Netns::Path(format!("/proc/{pid}/ns/net"))),
                _ => Err(format!("netns {n}: want a PID, a path or a name")),
            },
            serde_json::Value::String(s) if s == "root" || s.is_empty() => Ok(Netns::Root),
            serde_json::Value::String(s) if s.starts_with('/') => Ok(Netns::Path(s.clone())),
            serde_json::Value::String(s) if !s.contains('/') => Ok(Netns::Path(format!("/run/netns/{s}"))),
            _ => Err(format!("netns {v}: want a PID, a path or a name")),
        }
    }
}

#[repr(C)]
struct IfreqFlags {
    name: [u8; 16],
    flags: libc::c_short,
    _pad: [u8; 22],
}

#[repr(C)]
struct IfreqAddr {
    name: [u8; 16],
    addr: libc::sockaddr,
    _pad: [u8; 8],
}

fn ifname(name: &str) -> Result<[u8; 16], String> {
    if name.is_empty() || name.len() > 15 || name.contains(['/', ' ', '\0']) {
        return Err(format!("interface name {name:?}: 1 to 15 characters, no '/' or spaces"));
    }
    let mut b = [0u8; 16];
    b[..name.len()].copy_from_slice(name.as_bytes());
    Ok(b)
}

pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!("MAC {s:?}: want six hex bytes like 02:00:00:00:00:01"));
    }
    for (i, p) in parts.iter().enumerate() {
        mac[i] = u8::from_str_radix(p, 16).map_err(|_| format!("MAC {s:?}: {p:?} is not a hex byte"))?;
    }
    Ok(mac)
}

fn create_here(name: &[u8; 16], mac: Option<[u8; 6]>) -> io::Result<OwnedFd> {
    let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut req = IfreqFlags { name: *name, flags: IFF_TAP | IFF_NO_PI, _pad: [0; 22] };
    if unsafe { libc::ioctl(raw, TUNSETIFF as _, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    if let Some(mac) = mac {
        let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if sock < 0 {
            return Err(io::Error::last_os_error());
        }
        let sock = unsafe { OwnedFd::from_raw_fd(sock) };
        let mut addr: libc::sockaddr = unsafe { std::mem::zeroed() };
        addr.sa_family = libc::ARPHRD_ETHER;
        for (i, b) in mac.iter().enumerate() {
            addr.sa_data[i] = *b as libc::c_char;
        }
        let mut req = IfreqAddr { name: *name, addr, _pad: [0; 8] };
        if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFHWADDR as _, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(fd)
}

/// A TAP named `name` in `ns` with `mac`; its non-blocking fd.
pub fn create(ns: &Netns, name: &str, mac: Option<[u8; 6]>) -> Result<OwnedFd, String> {
    let req = ifname(name)?;
    let what = |e: io::Error| format!("tap {name} in {ns:?}: {e}");
    match ns {
        Netns::Root => create_here(&req, mac).map_err(what),
        Netns::Path(p) => {
            let nsf = File::open(p).map_err(|e| format!("netns {p}: {e}"))?;
            // setns changes only the calling thread: do it in a thread of its own.
            std::thread::scope(|s| {
                s.spawn(|| {
                    if unsafe { libc::setns(nsf.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
                        return Err(format!("setns {p}: {}", io::Error::last_os_error()));
                    }
                    create_here(&req, mac).map_err(what)
                })
                .join()
                .unwrap_or_else(|_| Err("tap creation thread panicked".into()))
            })
        }
    }
}

/// Read one frame into `buf` (cleared first); Ok(false) when nothing is waiting.
pub fn read_frame(fd: RawFd, buf: &mut Vec<u8>, scratch: &mut [u8]) -> io::Result<bool> {
    let n = unsafe { libc::read(fd, scratch.as_mut_ptr() as *mut libc::c_void, scratch.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock { Ok(false) } else { Err(e) };
    }
    buf.clear();
    buf.extend_from_slice(&scratch[..n as usize]);
    Ok(true)
}

/// Write one frame: it appears as received on the TAP's interface.
pub fn write_frame(fd: RawFd, frame: &[u8]) -> io::Result<()> {
    let n = unsafe { libc::write(fd, frame.as_ptr() as *const libc::c_void, frame.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_macs_and_namespaces_are_checked() {
        assert!(ifname("a-very-long-interface").unwrap_err().contains("15 characters"));
        assert_eq!(parse_mac("02:00:0a:00:01:ff").unwrap(), [2, 0, 10, 0, 1, 255]);
        assert!(parse_mac("02:00").unwrap_err().contains("six hex bytes"));
        assert!(parse_mac("02:00:0a:00:01:zz").unwrap_err().contains("not a hex byte"));
        use serde_json::json;
        assert_eq!(Netns::from_json(&json!(null)).unwrap(), Netns::Root);
        assert_eq!(Netns::from_json(&json!(42)).unwrap(), Netns::Path("/proc/42/ns/net".into()));
        assert_eq!(Netns::from_json(&json!("ccab-h1")).unwrap(), Netns::Path("/run/netns/ccab-h1".into()));
        assert!(Netns::from_json(&json!("a/b")).is_err());
    }
}
