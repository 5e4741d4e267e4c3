//! What routerd's integration tests share: the bundled specs `make specs` builds, and a
//! network namespace of the test's own (made, entered, and deleted however the test ends).
#![allow(dead_code)] // each test binary uses a part

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The bytes of the bundled spec `build/mergespecs/NAME.wasm`.
pub fn spec_bytes(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/mergespecs").join(format!("{name}.wasm"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e} (run `make specs` first)", p.display()))
}

/// Runs a command; true when it ran and succeeded.
pub fn sh(args: &[&str]) -> bool {
    Command::new(args[0]).args(&args[1..]).status().map(|s| s.success()).unwrap_or(false)
}

/// Why a namespace test cannot run here (not root, or no iproute2), or None.
pub fn no_namespaces() -> Option<&'static str> {
    (unsafe { libc::geteuid() } != 0 || !sh(&["ip", "-V"])).then_some("needs root and iproute2")
}

/// The calling thread's network namespace becomes `ns` (a name under /run/netns).
pub fn enter(ns: &str) {
    let f = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
    assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns {ns}");
}

/// A namespace `<tag><pid>`, deleted with its interfaces when the test ends, however it ends.
pub struct Netns(pub String);

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let ns = Netns(format!("{tag}{}", std::process::id()));
        assert!(sh(&["ip", "netns", "add", &ns.0]), "ip netns add {}", ns.0);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

impl Netns {
    /// A veth pair `a`-`b` inside the namespace, both ends up.
    pub fn veth(&self, a: &str, b: &str) {
        assert!(sh(&["ip", "-n", &self.0, "link", "add", a, "type", "veth", "peer", "name", b]));
        assert!(sh(&["ip", "-n", &self.0, "link", "set", a, "up"]));
        assert!(sh(&["ip", "-n", &self.0, "link", "set", b, "up"]));
    }
}

/// One management command to routerd and its JSON answer.
pub fn query(sock: &Path, cmd: &str) -> Value {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    writeln!(s, "{cmd}").unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

/// A minimal IPv4 frame (UDP, 10.98.0.1 -> 10.98.0.2, a few bytes): not concast. `mac` is
/// the last byte of its source MAC.
pub fn ipv4_frame(mac: u8) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0xb1, mac, 0x08, 0x00]);
    f.extend_from_slice(&[0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 98, 0, 1, 10, 98, 0, 2]);
    f.extend_from_slice(&[0; 8]);
    f
}

/// The routerd binary running in a namespace on one interface (static diversion, no flow:
/// every frame goes back unchanged), asked through `sock`; stopped and reaped when dropped.
pub struct Routerd {
    child: Child,
    pub sock: PathBuf,
}

impl Routerd {
    /// Starts `binary` in `ns` on `iface` with `extra` flags and waits for its management socket.
    pub fn start(binary: &str, ns: &str, iface: &str, extra: &[&str]) -> Routerd {
        let sock = std::env::temp_dir().join(format!("{ns}-{}.sock", std::process::id()));
        let child = Command::new("ip")
            .args(["netns", "exec", ns, binary, "--cpu-iface", iface, "--addr", "10.0.0.1"])
            .args(extra)
            .arg("--mgmt")
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let r = Routerd { child, sock };
        let t = Instant::now();
        while !r.sock.exists() {
            assert!(t.elapsed() < Duration::from_secs(10), "routerd did not open its management socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }

    /// routerd's counters once it has read `total` frames in all (or after 10 s).
    pub fn counters_after(&self, total: u64) -> Value {
        let t = Instant::now();
        loop {
            let stats = query(&self.sock, "stats");
            if stats["counters"]["frames_in"].as_u64() == Some(total) || t.elapsed() > Duration::from_secs(10) {
                return stats["counters"].clone();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Routerd {
    fn drop(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}
