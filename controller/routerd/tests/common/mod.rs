//! What routerd's integration tests share: the bundled specs `make specs` builds, and a
//! network namespace of the test's own (made, entered, and deleted however the test ends).
#![allow(dead_code)] // each test binary uses a part

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;

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
