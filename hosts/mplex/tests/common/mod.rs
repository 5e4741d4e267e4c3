//! What the kernel tests share: two network namespaces joined by a veth pair, entering a
//! namespace from a thread, and running an `Mplex` loop until told to stop.

#![allow(dead_code)] // each test file uses its own part

use std::io::Write;
use std::net::Ipv4Addr;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use concast_mplex::{Mplex, Options, SenderConfig};

pub const A: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);

/// True if this process may create namespaces and iptables rules; says why not otherwise.
pub fn can_run() -> bool {
    let ok = unsafe { libc::geteuid() } == 0
        && Command::new("iptables").arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: needs root and iptables");
    }
    ok
}

pub fn sh(args: &[&str]) {
    let ok = Command::new(args[0])
        .args(&args[1..])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "{args:?} failed");
}

/// Two namespaces `mplex<tag><pid>a` and `...b` (A and B on a veth), deleted on drop with
/// everything in them. `tag` keeps the tests of one binary (one pid) apart.
pub struct Pair {
    pub a: String,
    pub b: String,
}

impl Pair {
    pub fn new(tag: &str) -> Pair {
        let p = format!("mplex{tag}{}", std::process::id());
        let pair = Pair {
            a: format!("{p}a"),
            b: format!("{p}b"),
        };
        sh(&["ip", "netns", "add", &pair.a]);
        sh(&["ip", "netns", "add", &pair.b]);
        sh(&[
            "ip", "link", "add", "mtva", "netns", &pair.a, "type", "veth", "peer", "name", "mtvb",
            "netns", &pair.b,
        ]);
        for (ns, dev, addr) in [(&pair.a, "mtva", A), (&pair.b, "mtvb", B)] {
            let cidr = format!("{addr}/24");
            sh(&["ip", "-n", ns, "addr", "add", &cidr, "dev", dev]);
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            // MSS-sized segments, as on a real link: with TSO/GRO a veth moves 64 KiB at a
            // time and TCP sends only a few dozen ACKs.
            sh(&[
                "ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro",
                "off",
            ]);
        }
        pair
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

/// Moves the calling thread into namespace `name` (network namespaces are per thread).
pub fn enter(name: &str) {
    let f = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
    assert_eq!(
        unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) },
        0,
        "setns {name}"
    );
}

/// A thread in namespace `ns` that accepts one TCP connection on B:`port`, writes `data` to
/// it and closes; it says `ready` once listening.
pub fn serve_once(
    ns: String,
    port: u16,
    data: Vec<u8>,
    ready: mpsc::Sender<()>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        enter(&ns);
        let l = TcpListener::bind((B, port)).unwrap();
        ready.send(()).unwrap();
        let (mut c, _) = l.accept().unwrap();
        c.write_all(&data).unwrap();
    })
}

/// Waits until `n` threads said they are ready (10 s each at most).
pub fn wait_ready(ready: &mpsc::Receiver<()>, n: usize) {
    for _ in 0..n {
        ready
            .recv_timeout(Duration::from_secs(10))
            .expect("a thread did not start");
    }
}

/// A's multiplex service capturing its pure ACKs toward B, group 1, MaxLocalDelay 1 ms and
/// MaxTotalDelay 5 ms (call it inside A's namespace, after `enter`).
pub fn ack_sender() -> Mplex {
    let mut m = Mplex::new(Options::default());
    m.add_sender(SenderConfig::new(B, A, 1, 1.0, 5.0, None).unwrap())
        .unwrap();
    m.start_capture(B).unwrap();
    m
}

/// R's multiplex service for group 1, unbundling into the TUN device `mplextun` (call it
/// inside B's namespace, after `enter`).
pub fn receiver() -> Mplex {
    let mut m = Mplex::new(Options {
        tun_name: "mplextun".into(),
        ..Options::default()
    });
    m.add_receiver(1).unwrap();
    m
}

/// Runs `m`'s loop (poll on its descriptors, its timers) until `stop`; returns it for its
/// counters.
pub fn run_loop(mut m: Mplex, stop: Arc<AtomicBool>) -> Mplex {
    while !stop.load(Ordering::Relaxed) {
        let ds = m.descriptors();
        let mut fds: Vec<_> = ds
            .iter()
            .map(|(fd, _)| libc::pollfd {
                fd: *fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 5) };
        for (p, (_, src)) in fds.iter().zip(&ds) {
            if p.revents != 0 {
                m.on_ready(*src).unwrap();
            }
        }
    }
    m
}

/// An `AF_PACKET` socket reading every IPv4 datagram that arrives on device `dev` of the
/// calling thread's namespace (for a TUN device: what was injected), without blocking.
pub struct Sniffer(i32);

impl Sniffer {
    pub fn open(dev: &str) -> Sniffer {
        let proto = (libc::ETH_P_IP as u16).to_be();
        // Protocol 0 until bind(): made with ETH_P_IP, the socket would also hear the
        // namespace's other devices (the veth) until it is bound to `dev`.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0) };
        assert!(fd >= 0, "AF_PACKET socket");
        let name = std::ffi::CString::new(dev).unwrap();
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert!(index > 0, "no device {dev}");
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = index as i32;
        let r = unsafe {
            libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind to {dev}");
        // Room for thousands of ACKs read only at the end of a test.
        let size: i32 = 64 << 20;
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const i32 as *const libc::c_void,
                4,
            )
        };
        Sniffer(fd)
    }

    /// Every datagram queued so far.
    pub fn drain(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            let n = unsafe { libc::recv(self.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n <= 0 {
                return out;
            }
            out.push(buf[..n as usize].to_vec());
        }
    }
}

impl Drop for Sniffer {
    fn drop(&mut self) {
        unsafe { libc::close(self.0) };
    }
}
