//! The router's CPU port: an AF_PACKET socket on routerd's end of the veth pair, read
//! through a memory-mapped receive ring (rx_ring.rs: no system call per frame or per batch)
//! or, where that is unavailable or `--cpu-io socket` asks, with recvmmsg; written with
//! sendmmsg. Either way one turn moves up to BATCH frames.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use concast_daemon::sys::check;

use crate::rx_ring::{self, RxRing};

/// Largest frame read: an Ethernet header and the largest IPv4 datagram, so bundles built
/// for a jumbo path MTU arrive whole.
pub const FRAME_MAX: usize = 14 + 65_535;
pub const BATCH: usize = 64;

const ETH_P_IP: u16 = 0x0800;

/// How the CPU port is read (`--cpu-io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxMode {
    /// The memory-mapped ring, or the socket when the kernel refuses a ring.
    Ring,
    /// recvmmsg on the socket, always (the path before the ring; tests run both).
    Socket,
}

impl RxMode {
    pub fn parse(s: &str) -> Result<RxMode, String> {
        match s {
            "ring" => Ok(RxMode::Ring),
            "socket" => Ok(RxMode::Socket),
            _ => Err(format!("{s:?}: the CPU port is read by `ring` or `socket`")),
        }
    }
}

/// Where frame `i` of the last batch is.
#[derive(Debug, Clone, Copy)]
enum Loc {
    /// In a held ring slot.
    Ring(rx_ring::Ready),
    /// In receive buffer slot `i`, this many bytes (recvmmsg, or a frame too long for a slot).
    Buf(usize),
}

pub struct CpuPort {
    fd: OwnedFd,
    ifindex: i32,

    pub mac: [u8; 6],
    /// Frames per recvmmsg/sendmmsg call, 1..=BATCH (routerd `--batch`; 1 = one syscall per frame).
    pub batch: usize,
    /// BATCH slots of FRAME_MAX bytes, zero-allocated: pages are only resident once a frame
    /// reaches them (most frames touch the first page of their slot).
    rx: Vec<u8>,
    loc: [Loc; BATCH],
    ring: Option<RxRing>,
    /// Ring slots that held a truncated frame with no whole copy on the socket (its queue
    /// was full): lost like a kernel drop, and counted with them.
    ring_truncated: u64,
    /// How long ring frames waited between the kernel writing them and routerd reading
    /// them (wake-up plus the turn before): 1 µs bins, the last one "longer".
    read_delay: ReadDelay,
    /// How long the first frame of the last batch waited in the ring (ring mode; None on
    /// the socket, whose frames carry no stamp here): when it arrived, for the adaptive wait.
    first_wait_ns: Option<u64>,
    /// Frames the kernel dropped because this socket's receive buffer was full, so far
    /// (PACKET_STATISTICS resets on every read; this adds them up).
    kernel_drops: std::cell::Cell<u64>,
    /// Reads that returned frames, and of those the ones that returned a full `batch`: a
    /// port whose reads come back full has a backlog (how a benchmark shows routerd saturated).
    pub batches: u64,
    pub full_batches: u64,
}

fn ifindex(name: &str) -> io::Result<i32> {
    let c = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface named {name}")));
    }
    Ok(idx as i32)
}

/// A MAC address written as six hex bytes with colons (`02:cc:0a:00:00:01`).
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("{s:?} is not a MAC address like 02:cc:0a:00:00:01");
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(mac)
}

/// The interface's MAC, asked of the kernel through the socket (SIOCGIFHWADDR) rather than
/// read from /sys, which shows the namespace /sys was mounted in, not the caller's.
fn hardware_address(fd: RawFd, name: &str) -> io::Result<[u8; 6]> {
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= req.ifr_name.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("interface name {name:?} is too long")));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    check(unsafe { libc::ioctl(fd, libc::SIOCGIFHWADDR, &mut req) })?;
    let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
    let mut mac = [0u8; 6];
    for (m, d) in mac.iter_mut().zip(data) {
        *m = d as u8;
    }
    Ok(mac)
}

fn realtime_ns() -> u64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Bins of 1 µs up to 1 ms, and one for longer: where a hop's microseconds go (issue #26).
const DELAY_BINS: usize = 1001;

pub struct ReadDelay {
    bins: Box<[u64; DELAY_BINS]>,
    n: u64,
    sum_ns: u64,
}

impl Default for ReadDelay {
    fn default() -> ReadDelay {
        ReadDelay { bins: Box::new([0; DELAY_BINS]), n: 0, sum_ns: 0 }
    }
}

impl ReadDelay {
    pub fn add(&mut self, ns: u64) {
        self.bins[((ns / 1000) as usize).min(DELAY_BINS - 1)] += 1;
        self.n += 1;
        self.sum_ns += ns;
    }

    /// The bin (µs) holding quantile `q`; DELAY_BINS - 1 means "1 ms or more".
    pub fn quantile_us(&self, q: f64) -> u64 {
        let rank = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (us, c) in self.bins.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return us as u64;
            }
        }
        0
    }

    /// Every bin that holds a frame, `[[us, frames], ...]` (the last bin, DELAY_BINS - 1,
    /// holds 1 ms and more): a benchmark takes differences between two reads to get the
    /// delays of the frames in between (management command `read-delay`).
    pub fn bins_json(&self) -> serde_json::Value {
        let bins: Vec<[u64; 2]> = self.bins.iter().enumerate().filter(|(_, &c)| c > 0).map(|(us, &c)| [us as u64, c]).collect();
        serde_json::json!({"n": self.n, "sum_ns": self.sum_ns, "bins": bins})
    }

    /// `{n, mean_us, p50_us, p90_us, p99_us}` (bins are 1 µs wide: p50_us 12 = 12..13 µs).
    pub fn to_json(&self) -> serde_json::Value {
        let mean = if self.n == 0 { 0.0 } else { self.sum_ns as f64 / self.n as f64 / 1000.0 };
        serde_json::json!({
            "n": self.n, "mean_us": (mean * 10.0).round() / 10.0,
            "p50_us": self.quantile_us(0.5), "p90_us": self.quantile_us(0.9), "p99_us": self.quantile_us(0.99),
        })
    }
}

impl CpuPort {
    /// Opens `name` for IPv4 frames only, read through the ring if the kernel gives one;
    /// frames this socket sends are not read back.
    pub fn open(name: &str) -> io::Result<CpuPort> {
        CpuPort::open_rx(name, RxMode::Ring)
    }

    /// Opens `name` for IPv4 frames, read as `mode` says.
    pub fn open_rx(name: &str, mode: RxMode) -> io::Result<CpuPort> {
        CpuPort::open_with(name, ETH_P_IP, mode)
    }

    /// Opens `name` for sending only (protocol 0: the socket is handed no frames).
    pub fn open_tx(name: &str) -> io::Result<CpuPort> {
        CpuPort::open_with(name, 0, RxMode::Socket)
    }

    fn open_with(name: &str, protocol: u16, mode: RxMode) -> io::Result<CpuPort> {
        let ifindex = ifindex(name)?;
        // Protocol 0 at socket(): a packet socket made with a protocol gets that protocol's
        // frames from EVERY interface of the namespace until bind() narrows it to one, and
        // a restarted routerd forwarded such frames, sniffed off the router's other ports,
        // a second time. bind() below sets the protocol and the interface in one step.
        let fd = check(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) })?;
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // The ring goes on before bind(), so no frame ever waits on the socket queue ahead
        // of it: that queue then holds only the whole copies of frames too long for a slot.
        // A kernel that refuses (or a socket that cannot map it) falls back to recvmmsg.
        let ring = match (mode, protocol) {
            (RxMode::Ring, p) if p != 0 => RxRing::attach(fd.as_raw_fd(), rx_ring::SLOTS).ok(),
            _ => None,
        };
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = protocol.to_be();
        sll.sll_ifindex = ifindex;
        check(unsafe {
            libc::bind(fd.as_raw_fd(), &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32)
        })?;
        let one: libc::c_int = 1;
        // PACKET_IGNORE_OUTGOING (23): never see our own transmissions.
        check(unsafe { libc::setsockopt(fd.as_raw_fd(), libc::SOL_PACKET, 23, &one as *const _ as *const libc::c_void, 4) })?;
        let buf: libc::c_int = 4 << 20;
        for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
            // Best effort: a bigger buffer only absorbs bursts.
            unsafe { libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, opt, &buf as *const _ as *const libc::c_void, 4) };
        }
        let mac = hardware_address(fd.as_raw_fd(), name)?;
        Ok(CpuPort {
            fd,
            ifindex,
            mac,
            batch: BATCH,
            rx: vec![0; FRAME_MAX * BATCH],
            loc: [Loc::Buf(0); BATCH],
            ring,
            ring_truncated: 0,
            read_delay: ReadDelay::default(),
            first_wait_ns: None,
            kernel_drops: std::cell::Cell::new(0),
            batches: 0,
            full_batches: 0,
        })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// How the port is read: "ring", or "socket" (asked for, or the ring was refused).
    pub fn rx_mode(&self) -> &'static str {
        if self.ring.is_some() {
            "ring"
        } else {
            "socket"
        }
    }

    /// Reads up to `batch` frames without blocking; returns how many (0 when none waits).
    /// The frames of the previous batch are given up.
    pub fn recv_batch(&mut self) -> io::Result<usize> {
        let n = self.recv_any()?;
        if n > 0 {
            self.batches += 1;
            self.full_batches += u64::from(n == self.batch.clamp(1, BATCH));
        }
        Ok(n)
    }

    fn recv_any(&mut self) -> io::Result<usize> {
        if self.ring.is_some() {
            return self.recv_ring();
        }
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..BATCH {
            iov[i].iov_base = self.rx[i * FRAME_MAX..].as_mut_ptr() as *mut libc::c_void;
            iov[i].iov_len = FRAME_MAX;
            hdrs[i].msg_hdr.msg_iov = &mut iov[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
        }
        let n = unsafe { libc::recvmmsg(self.fd.as_raw_fd(), hdrs.as_mut_ptr(), self.batch.clamp(1, BATCH) as u32, libc::MSG_DONTWAIT, std::ptr::null_mut()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(0) } else { Err(e) };
        }
        for i in 0..n as usize {
            self.loc[i] = Loc::Buf(hdrs[i].msg_len as usize);
        }
        Ok(n as usize)
    }

    /// The ring's turn: every ready slot up to `batch`, read in place. A slot whose frame
    /// was too long for it stands for the whole copy on the socket, read into buffer `i`.
    fn recv_ring(&mut self) -> io::Result<usize> {
        let want = self.batch.clamp(1, BATCH);
        let ring = self.ring.as_mut().expect("ring mode");
        ring.release();
        self.first_wait_ns = None;
        let mut n = 0;
        let mut now_ns = 0;
        while n < want {
            let Some(r) = ring.next() else { break };
            if now_ns == 0 {
                now_ns = realtime_ns(); // once a turn: the ring's stamps are CLOCK_REALTIME
                self.first_wait_ns = Some(now_ns.saturating_sub(r.stamp_ns));
            }
            self.read_delay.add(now_ns.saturating_sub(r.stamp_ns));
            if r.snaplen >= r.len {
                self.loc[n] = Loc::Ring(r);
                n += 1;
                continue;
            }
            if r.copied {
                let buf = &mut self.rx[n * FRAME_MAX..][..FRAME_MAX];
                let got = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, FRAME_MAX, libc::MSG_DONTWAIT) };
                if got >= 0 {
                    self.loc[n] = Loc::Buf(got as usize);
                    n += 1;
                    continue;
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::WouldBlock && e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            // Truncated and no whole copy (the socket's queue was full): the frame is lost.
            self.ring_truncated += 1;
        }
        Ok(n)
    }

    /// Whether a frame waits to be read, without reading it: on the ring a look at the next
    /// slot's status word (no system call), on the socket a zero-timeout poll().
    pub fn rx_ready(&self) -> bool {
        if let Some(ring) = &self.ring {
            return ring.ready();
        }
        let mut fd = [libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        unsafe { libc::poll(fd.as_mut_ptr(), 1, 0) > 0 }
    }

    /// Frames the kernel could not queue for this socket (its buffer was full) since it
    /// was opened: the part of a flood the data plane handed over that routerd never saw.
    pub fn kernel_drops(&self) -> u64 {
        // struct tpacket_stats { tp_packets, tp_drops } (u32 each), read and reset.
        let mut st = [0u32; 2];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // PACKET_STATISTICS = 6
        let r = unsafe { libc::getsockopt(self.fd.as_raw_fd(), libc::SOL_PACKET, 6, st.as_mut_ptr() as *mut libc::c_void, &mut len) };
        if r == 0 {
            self.kernel_drops.set(self.kernel_drops.get() + u64::from(st[1]));
        }
        self.kernel_drops.get() + self.ring_truncated
    }

    /// How long the first frame of the last batch had waited when it was read (ring mode;
    /// None on the socket or when the batch was empty).
    pub fn first_wait_ns(&self) -> Option<u64> {
        self.first_wait_ns
    }

    /// Delay from the kernel's ring write to routerd's read (ring mode; all zero otherwise).
    pub fn read_delay(&self) -> &ReadDelay {
        &self.read_delay
    }

    /// Frame `i` of the last batch.
    pub fn frame(&self, i: usize) -> &[u8] {
        match (&self.loc[i], &self.ring) {
            (Loc::Ring(r), Some(ring)) => ring.bytes(r),
            (Loc::Buf(len), _) => &self.rx[i * FRAME_MAX..][..*len],
            (Loc::Ring(_), None) => unreachable!("ring slots only come from a ring"),
        }
    }

    /// Sends frames in batches; returns how many the kernel took.
    pub fn send_batch<B: AsRef<[u8]>>(&self, frames: &[B]) -> io::Result<usize> {
        let mut sent = 0;
        for chunk in frames.chunks(self.batch.clamp(1, BATCH)) {
            let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
            let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_ifindex = self.ifindex;
            sll.sll_halen = 6;
            for (i, f) in chunk.iter().enumerate() {
                let f = f.as_ref();
                iov[i].iov_base = f.as_ptr() as *mut libc::c_void;
                iov[i].iov_len = f.len();
                hdrs[i].msg_hdr.msg_iov = &mut iov[i];
                hdrs[i].msg_hdr.msg_iovlen = 1;
                hdrs[i].msg_hdr.msg_name = &mut sll as *mut _ as *mut libc::c_void;
                hdrs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            }
            let mut off = 0;
            while off < chunk.len() {
                let n = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), hdrs[off..].as_mut_ptr(), (chunk.len() - off) as u32, 0) };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    if e.raw_os_error() == Some(libc::ENOBUFS) || e.kind() == io::ErrorKind::WouldBlock {
                        // The veth queue is full: wait for room rather than drop.
                        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
                        unsafe { libc::poll(&mut pfd, 1, 10) };
                        continue;
                    }
                    return Err(e);
                }
                off += n as usize;
                sent += n as usize;
            }
        }
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_delay_quantiles_come_from_1us_bins_and_long_waits_share_the_last() {
        let mut d = ReadDelay::default();
        for ns in [500, 1_500, 2_200, 2_900, 40_000, 5_000_000_000] {
            d.add(ns);
        }
        assert_eq!((d.quantile_us(0.5), d.quantile_us(0.9), d.quantile_us(1.0)), (2, 1000, 1000));
        assert_eq!(d.quantile_us(0.1), 0);
        let j = d.to_json();
        assert_eq!((j["n"].as_u64(), j["p50_us"].as_u64()), (Some(6), Some(2)));
        assert_eq!(ReadDelay::default().to_json()["p50_us"], 0);
    }

    #[test]
    fn read_delay_bins_list_only_the_filled_ones() {
        let mut d = ReadDelay::default();
        for ns in [3_200, 3_900, 40_000, 5_000_000] {
            d.add(ns);
        }
        let j = d.bins_json();
        assert_eq!(j["n"], 4);
        assert_eq!(j["bins"], serde_json::json!([[3, 2], [40, 1], [DELAY_BINS - 1, 1]]));
    }

    #[test]
    fn cpu_io_modes_parse_and_anything_else_is_refused() {
        assert_eq!(RxMode::parse("ring"), Ok(RxMode::Ring));
        assert_eq!(RxMode::parse("socket"), Ok(RxMode::Socket));
        assert!(RxMode::parse("mmap").unwrap_err().contains("ring"));
    }
}
