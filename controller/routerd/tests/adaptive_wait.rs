//! routerd's `--wait adaptive` (adaptive.rs): a bad mode is refused at start with a clear
//! error and exit status 2; on a real veth, frames sent at a steady 2 ms pace let routerd plan
//! windows (each one counted as a hit or a miss), `wait sleep` (the management command) stops
//! all spinning, and an idle routerd spins nothing at all.
//!
//! The running part starts the routerd binary in a namespace of the test's own on one end of
//! a veth pair (static diversion, no flow: every frame goes back unchanged) and writes frames
//! on the other end. Needs root and iproute2; skips without.

use std::process::Command;
use std::time::{Duration, Instant};

use concast_routerd::cpu_port::CpuPort;
use serde_json::Value;

mod common;
use common::{enter, ipv4_frame, no_namespaces, query, Netns, Routerd};

const ROUTERD: &str = env!("CARGO_BIN_EXE_concast-routerd");

#[test]
fn a_bad_mode_is_refused_with_status_2() {
    for bad in ["spin", "", "ADAPTIVE"] {
        let out = Command::new(ROUTERD)
            .args(["--cpu-iface", "lo", "--addr", "10.0.0.1", "--mgmt", "/nonexistent/x.sock", &format!("--wait={bad}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--wait {bad:?}: {err}");
        assert!(err.contains("--wait") && err.contains("sleep or adaptive"), "--wait {bad:?}: {err}");
    }
}

/// Sends `n` frames at a steady 2 ms pace (spinning to the send time, so the gaps agree
/// within a few µs), then waits until routerd has read `total` in all.
fn send_paced(tx: &CpuPort, routerd: &Routerd, n: u32, total: u64) -> Value {
    let t0 = Instant::now();
    for i in 0..n {
        let at = Duration::from_millis(2) * i;
        while t0.elapsed() < at {
            std::hint::spin_loop();
        }
        tx.send_batch(&[ipv4_frame(0xa6)]).unwrap();
    }
    routerd.counters_after(total)
}

#[test]
fn steady_frames_get_windows_sleep_mode_spins_nothing_and_idle_costs_nothing() {
    if let Some(why) = no_namespaces() {
        eprintln!("skipped: {why}");
        return;
    }
    let ns = Netns::new("adaptive");
    ns.veth("adw0", "adw1");
    let routerd = Routerd::start(ROUTERD, &ns.0, "adw1", &["--wait", "adaptive"]);
    let sock = routerd.sock.clone();
    enter(&ns.0);
    let tx = CpuPort::open_tx("adw0").unwrap();

    let on = send_paced(&tx, &routerd, 40, 40);
    assert_eq!(on["frames_in"], 40, "{on}");
    assert_eq!(on["wait"], "adaptive", "{on}");
    let (hits, misses) = (on["adaptive_hits"].as_u64().unwrap(), on["adaptive_misses"].as_u64().unwrap());
    // From the fifth frame on, each gap agrees with the last ones: windows are planned, and
    // each one ends as a hit or a miss (how many hit depends on this shared machine).
    assert!(hits + misses >= 1, "no window planned for a steady 2 ms pace: {on}");

    // Idle: after the last window and tail, nothing more is spun.
    std::thread::sleep(Duration::from_millis(100));
    let idle0 = query(&sock, "stats")["counters"]["adaptive_spun_us"].as_u64().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let idle1 = query(&sock, "stats")["counters"]["adaptive_spun_us"].as_u64().unwrap();
    assert_eq!(idle0, idle1, "an idle routerd spun");

    assert_eq!(query(&sock, "wait sleep")["wait"], "sleep");
    assert!(query(&sock, "wait spin")["error"].as_str().unwrap().contains("sleep or adaptive"));
    let off = send_paced(&tx, &routerd, 20, 60);
    assert_eq!(off["frames_in"], 60, "{off}");
    assert_eq!(off["wait"], "sleep", "{off}");
    assert_eq!(off["adaptive_spun_us"], idle1, "sleep mode spun: {off}");
    assert_eq!(off["adaptive_hits"].as_u64(), Some(hits), "{off}");
}
