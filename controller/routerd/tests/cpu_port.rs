//! The CPU port hears its own interface only, from the moment it is opened. A socket made
//! with a protocol hears that protocol on every interface of the namespace until bind():
//! a routerd restarted on an OVS router (root namespace, every router's ports beside it)
//! picked up frames of other ports in that gap and forwarded them a second time.
//!
//! Two veth pairs in a namespace of the test's own: frames are blasted over the second
//! pair without pause while the CPU port is opened and read again and again on the first,
//! which carries nothing. Any frame read is a leak. Needs root and iproute2; skips without.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use concast_routerd::cpu_port::CpuPort;

mod common;
use common::{enter, no_namespaces, sh, Netns};

fn ipv4_frame() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0xb1, 0xa5, 0x08, 0x00]);
    // A minimal IPv4 header (UDP, 10.98.0.1 -> 10.98.0.2) and a few bytes.
    f.extend_from_slice(&[
        0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 98, 0, 1, 10, 98, 0, 2,
    ]);
    f.extend_from_slice(&[0; 8]);
    f
}

#[test]
fn frames_of_other_interfaces_never_reach_a_cpu_port_being_opened() {
    if let Some(why) = no_namespaces() {
        eprintln!("skipped: {why}");
        return;
    }
    let ns = Netns::new("cpuport");
    for (a, b) in [("cpq0", "cpq1"), ("cpx0", "cpx1")] {
        assert!(sh(&[
            "ip", "-n", &ns.0, "link", "add", a, "type", "veth", "peer", "name", b
        ]));
        assert!(sh(&["ip", "-n", &ns.0, "link", "set", a, "up"]));
        assert!(sh(&["ip", "-n", &ns.0, "link", "set", b, "up"]));
    }

    let stop = Arc::new(AtomicBool::new(false));
    let blasted = Arc::new(AtomicU64::new(0));
    let blaster = {
        let (ns, stop, blasted) = (ns.0.clone(), stop.clone(), blasted.clone());
        thread::spawn(move || {
            enter(&ns);
            let tx = CpuPort::open_tx("cpx0").unwrap();
            let frames = vec![ipv4_frame(); 64];
            while !stop.load(Ordering::Relaxed) {
                let n = tx.send_batch(&frames).unwrap();
                blasted.fetch_add(n as u64, Ordering::Relaxed);
            }
        })
    };

    enter(&ns.0);
    while blasted.load(Ordering::Relaxed) == 0 {
        assert!(
            !blaster.is_finished(),
            "the blaster stopped before sending anything"
        );
        thread::yield_now();
    }
    let (mut opens, mut leaked) = (0u32, 0usize);
    for _ in 0..600 {
        let mut port = CpuPort::open("cpq1").unwrap();
        opens += 1;
        leaked += port.recv_batch().unwrap();
        if leaked > 0 {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    blaster.join().unwrap();
    let sent = blasted.load(Ordering::Relaxed);
    assert!(
        sent > 0,
        "the blaster sent nothing: the test proves nothing"
    );
    assert_eq!(
        leaked, 0,
        "{leaked} frame(s) of another interface read on opening {opens} times \
                           ({sent} frames blasted meanwhile)"
    );
}
