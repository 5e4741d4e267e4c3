//! routerd's `--busy-poll-us`: a bad window is refused at start with a clear error and exit
//! status 2; a frame that arrives inside a window is read without a poll() sleep, counted as
//! `busy_poll_hits` in `stats`, and with the window off (switched by the management command
//! `busy-poll 0`) no frame is.
//!
//! The running part starts the routerd binary in a namespace of the test's own on one end of
//! a veth pair (static diversion, no flow: every frame goes back unchanged) and writes frames
//! on the other end, one every 2 ms. Needs root and iproute2; skips without.

use std::process::Command;
use std::time::Duration;

use concast_routerd::cpu_port::CpuPort;
use serde_json::Value;

mod common;
use common::{enter, ipv4_frame, no_namespaces, query, Netns, Routerd};

const ROUTERD: &str = env!("CARGO_BIN_EXE_concast-routerd");

fn start_refused(window: &str) -> (i32, String) {
    let out = Command::new(ROUTERD)
        .args(["--cpu-iface", "lo", "--addr", "10.0.0.1", "--mgmt", "/nonexistent/x.sock", &format!("--busy-poll-us={window}")])
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_bad_window_is_refused_with_its_range_and_status_2() {
    for bad in ["10001", "-5", "soon", ""] {
        let (code, err) = start_refused(bad);
        assert_eq!(code, 2, "--busy-poll-us {bad:?}: {err}");
        assert!(err.contains("--busy-poll-us") && err.contains("0..=10000"), "--busy-poll-us {bad:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_bad_window_in_the_config_is_refused_too() {
    let dir = std::env::temp_dir().join(format!("busypoll-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("r.json");
    std::fs::write(&cfg, r#"{"addr": "10.0.0.1", "cpu_iface": "lo", "busy_poll_us": 50000}"#).unwrap();
    let out = Command::new(ROUTERD).args(["--config", cfg.to_str().unwrap(), "--mgmt", "/nonexistent/x.sock"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("busy_poll_us") && err.contains("0..=10000"), "{err}");
}

/// Sends `n` frames 2 ms apart on `tx`, then waits until routerd has read `total` in all.
fn send_spaced(tx: &CpuPort, routerd: &Routerd, n: usize, total: u64) -> Value {
    for _ in 0..n {
        tx.send_batch(&[ipv4_frame(0xa5)]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    routerd.counters_after(total)
}

#[test]
fn frames_inside_the_window_are_read_without_a_sleep_and_none_with_it_off() {
    if let Some(why) = no_namespaces() {
        eprintln!("skipped: {why}");
        return;
    }
    let ns = Netns::new("busypoll");
    ns.veth("bpx0", "bpx1");
    // A 10 ms window: each frame 2 ms after the last lands inside the window it opened,
    // however slowly this shared machine schedules routerd.
    let routerd = Routerd::start(ROUTERD, &ns.0, "bpx1", &["--busy-poll-us", "10000"]);
    let sock = routerd.sock.clone();
    enter(&ns.0);
    let tx = CpuPort::open_tx("bpx0").unwrap();

    let on = send_spaced(&tx, &routerd, 20, 20);
    assert_eq!(on["frames_in"], 20, "{on}");
    assert_eq!(on["busy_poll_us"], 10_000, "{on}");
    let hits = on["busy_poll_hits"].as_u64().unwrap();
    // The first frame opens the window; most of the 19 after it should be caught in one.
    assert!(hits >= 1 && hits <= 19, "busy_poll_hits {hits}: {on}");
    assert!(on["busy_poll_spun_us"].as_u64().unwrap() > 0, "{on}");

    assert_eq!(query(&sock, "busy-poll 0")["busy_poll_us"], 0);
    assert!(query(&sock, "busy-poll 20000")["error"].as_str().unwrap().contains("0..=10000"));
    let off = send_spaced(&tx, &routerd, 20, 40);
    assert_eq!(off["frames_in"], 40, "{off}");
    assert_eq!(off["busy_poll_hits"].as_u64(), Some(hits), "no window, no hit: {off}");
    assert_eq!(off["busy_poll_us"], 0, "{off}");
}
