//! TAP devices: created inside the namespace the end belongs to (a short-lived thread enters
//! it with setns, so the daemon itself stays in the root namespace), frames read from and
//! written to the file descriptor the daemon keeps.
//!
//! No IFF_VNET_HDR and no TUNSETOFFLOAD: the kernel then hands us complete checksums and
//! never a GSO super-frame, which is what userspace OVS and the peer stack need.
//!
//! Receive mode (`RxMode`, docs/linkemu.md "Where the receiving stack runs"): a plain TAP
//! runs the receiving namespace's whole stack inside our `write` (tun's `netif_receive_skb`
//! under `tun_chr_write_iter`), on the emulator's one real-time thread. With `IFF_NAPI` the
//! write only queues the frame and schedules the TAP's NAPI poll; with the device's NAPI
//! `threaded`, that poll runs in a kernel thread `napi/<dev>-<id>` at normal priority, so the
//! stack's work leaves our thread. GRO is switched off on such a TAP so the namespace still
//! receives the frames one by one, as written (a GRO super-frame would reach userspace OVS's
//! packet socket whole).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
/// tun.c: frames written are queued and handed to the stack by a NAPI poll.
const IFF_NAPI: libc::c_short = 0x0010;
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const SIOCSIFTXQLEN: libc::c_ulong = 0x8943;
const ETHTOOL_SGRO: u32 = 0x0000_002c;

/// How frames written to a TAP reach its namespace's stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxMode {
    /// The stack runs inside our write (plain TAP).
    Inline,
    /// IFF_NAPI with threaded NAPI: a kernel thread per TAP runs the stack.
    NapiThreaded,
}

impl RxMode {
    pub fn parse(s: &str) -> Result<RxMode, String> {
        match s {
            "inline" => Ok(RxMode::Inline),
            "napi" => Ok(RxMode::NapiThreaded),
            _ => Err(format!("rx mode {s:?}: want napi or inline")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RxMode::Inline => "inline",
            RxMode::NapiThreaded => "napi",
        }
    }
}

/// What a TAP got: the mode asked for may not be what this kernel allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxApplied {
    Inline,
    /// IFF_NAPI and threaded NAPI both took.
    NapiThreaded,
    /// IFF_NAPI took but `threaded` did not: the poll runs as a softirq at our write's
    /// bh-enable, i.e. still in our thread.
    NapiSoftirq,
    /// IFF_NAPI was refused (an old kernel); a plain TAP instead.
    InlineFallback,
}

impl RxApplied {
    pub fn name(self) -> &'static str {
        match self {
            RxApplied::Inline => "inline",
            RxApplied::NapiThreaded => "napi-threaded",
            RxApplied::NapiSoftirq => "napi-softirq",
            RxApplied::InlineFallback => "inline-fallback",
        }
    }
}

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
struct IfreqData {
    name: [u8; 16],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

#[repr(C)]
struct IfreqInt {
    name: [u8; 16],
    val: libc::c_int,
    _pad: [u8; 20],
}

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
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

fn open_tap(name: &[u8; 16], flags: libc::c_short) -> io::Result<OwnedFd> {
    let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut req = IfreqFlags { name: *name, flags, _pad: [0; 22] };
    if unsafe { libc::ioctl(raw, TUNSETIFF as _, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

fn inet_socket() -> io::Result<OwnedFd> {
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(sock) })
}

/// The device's transmit queue: the frames its stack sends wait there until we read them, and
/// past `frames` the kernel drops the rest (the device's tx_dropped).
fn set_txqueuelen(sock: &OwnedFd, name: &[u8; 16], frames: u32) -> io::Result<()> {
    let mut req = IfreqInt { name: *name, val: frames.min(i32::MAX as u32) as libc::c_int, _pad: [0; 20] };
    if unsafe { libc::ioctl(sock.as_raw_fd(), SIOCSIFTXQLEN as _, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn gro_off(sock: &OwnedFd, name: &[u8; 16]) -> io::Result<()> {
    let mut val = EthtoolValue { cmd: ETHTOOL_SGRO, data: 0 };
    let mut req = IfreqData { name: *name, data: &mut val as *mut EthtoolValue as *mut libc::c_void, _pad: [0; 16] };
    if unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Write 1 to the device's sysfs `threaded` as this thread's network namespace sees it. The
/// daemon's /sys belongs to its own namespace, so this thread takes a mount namespace of its
/// own (gone when the thread ends) and mounts a sysfs there, which shows the devices of the
/// network namespace the thread is in (what `ip netns exec` does).
fn napi_threaded_here(name: &str) -> io::Result<()> {
    let fail = |what: &str| io::Error::new(io::ErrorKind::Other, format!("{what}: {}", io::Error::last_os_error()));
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } < 0 {
        return Err(fail("unshare(CLONE_NEWNS)"));
    }
    let root = c"/";
    if unsafe { libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) } < 0 {
        return Err(fail("mount --make-rprivate /"));
    }
    unsafe { libc::umount2(c"/sys".as_ptr(), libc::MNT_DETACH) };
    if unsafe { libc::mount(c"sysfs".as_ptr(), c"/sys".as_ptr(), c"sysfs".as_ptr(), 0, std::ptr::null()) } < 0 {
        return Err(fail("mount sysfs"));
    }
    std::fs::write(format!("/sys/class/net/{name}/threaded"), "1")
}

/// Runs in a thread that is already in the end's network namespace (and may change its own
/// mount namespace).
fn create_here(name: &[u8; 16], mac: Option<[u8; 6]>, mode: RxMode, txqueuelen: u32) -> io::Result<(OwnedFd, RxApplied)> {
    let (fd, mut applied) = match mode {
        RxMode::Inline => (open_tap(name, IFF_TAP | IFF_NO_PI)?, RxApplied::Inline),
        RxMode::NapiThreaded => match open_tap(name, IFF_TAP | IFF_NO_PI | IFF_NAPI) {
            Ok(fd) => (fd, RxApplied::NapiThreaded),
            // EINVAL: a kernel without IFF_NAPI; EPERM: it needs CAP_NET_ADMIN.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EPERM)) => {
                (open_tap(name, IFF_TAP | IFF_NO_PI)?, RxApplied::InlineFallback)
            }
            Err(e) => return Err(e),
        },
    };
    let sock = inet_socket()?;
    set_txqueuelen(&sock, name, txqueuelen)?;
    if let Some(mac) = mac {
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
    if applied == RxApplied::NapiThreaded {
        // GRO off first: it is what keeps the frames whole and one by one.
        gro_off(&sock, name)?;
        let n = name.iter().position(|&b| b == 0).unwrap_or(16);
        if napi_threaded_here(std::str::from_utf8(&name[..n]).unwrap_or("")).is_err() {
            applied = RxApplied::NapiSoftirq;
        }
    }
    Ok((fd, applied))
}

/// Runs `f` in a short-lived thread that has entered `ns`: setns, and the mount namespace a
/// thread may take for sysfs, change only the calling thread.
fn in_netns<T: Send>(ns: &Netns, f: impl FnOnce() -> Result<T, String> + Send) -> Result<T, String> {
    let nsf = match ns {
        Netns::Root => None,
        Netns::Path(p) => Some(File::open(p).map_err(|e| format!("netns {p}: {e}"))?),
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(nsf) = &nsf {
                if unsafe { libc::setns(nsf.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
                    return Err(format!("setns {ns}: {}", io::Error::last_os_error()));
                }
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| Err("namespace thread panicked".into()))
    })
}

/// A TAP named `name` in `ns` with `mac` and a transmit queue of `txqueuelen` frames; its
/// non-blocking fd and the receive mode it got.
pub fn create(ns: &Netns, name: &str, mac: Option<[u8; 6]>, mode: RxMode, txqueuelen: u32) -> Result<(OwnedFd, RxApplied), String> {
    let req = ifname(name)?;
    in_netns(ns, || create_here(&req, mac, mode, txqueuelen).map_err(|e| format!("tap {name} in {ns}: {e}")))
}

/// Frames `name`'s stack sent that found its transmit queue full (the kernel's tx_dropped,
/// from /proc/net/dev as the namespace shows it): lost before the emulator read them.
pub fn tx_dropped(ns: &Netns, name: &str) -> Result<u64, String> {
    ifname(name)?;
    in_netns(ns, || {
        let dev = std::fs::read_to_string("/proc/thread-self/net/dev").map_err(|e| format!("/proc/net/dev in {ns}: {e}"))?;
        dev_tx_dropped(&dev, name).ok_or_else(|| format!("no interface {name} in {ns}"))
    })
}

/// /proc/net/dev's line for `name`: 8 receive counters, then transmit bytes, packets, errs,
/// drop, ...
fn dev_tx_dropped(dev: &str, name: &str) -> Option<u64> {
    let line = dev.lines().find_map(|l| l.trim_start().strip_prefix(name)?.strip_prefix(':'))?;
    line.split_whitespace().nth(11)?.parse().ok()
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
        assert_eq!(RxMode::parse("napi").unwrap(), RxMode::NapiThreaded);
        assert_eq!(RxMode::parse("inline").unwrap(), RxMode::Inline);
        assert!(RxMode::parse("fast").unwrap_err().contains("napi or inline"));
    }

    #[test]
    fn tx_dropped_is_read_from_the_devices_line() {
        let dev = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n\
ce1a: 1514 1 0 0 0 0 0 0 302800 200 0 136 0 0 0 0\n\
ce1: 9 9 9 9 9 9 9 9 9 9 9 7 9 9 9 9\n";
        assert_eq!(dev_tx_dropped(dev, "ce1a"), Some(136));
        assert_eq!(dev_tx_dropped(dev, "ce1"), Some(7));
        assert_eq!(dev_tx_dropped(dev, "lo"), Some(0));
        assert_eq!(dev_tx_dropped(dev, "ce"), None);
    }
}
