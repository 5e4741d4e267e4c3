//! The `wan` scenario's path (docs/experiments.md: 10 Mbit/s each way, a 110 ms round trip,
//! a 16-packet drop-tail queue at each sender) in virtual time, to trace how the
//! dissertation's MTP (ch. V) moves a 1 MB object over it, round by round.
use concast_transport::mtp::client::TraceEvent;
use concast_transport::mtp::server::{pattern, Objects};
use concast_transport::mtp::sim::Net;
use concast_transport::mtp::{Client, ClientConfig, ClientStats, Output, RequestOpts, Server};
use sha2::{Digest, Sha256};

const OBJECT: u32 = 1 << 20;

struct Run {
    secs: f64,
    st: ClientStats,
    trace: Vec<TraceEvent>,
    /// Datagrams the bottleneck queues dropped: (requests, replies).
    queue_drops: (u64, u64),
}

fn wan(cfg: ClientConfig, seed: u64, loss: f64) -> Run {
    let c = Client::new(ClientConfig { seed, trace: true, ..cfg }).unwrap();
    let mut n = Net::new(c, Server::new(Objects::default()), seed);
    for l in [&mut n.up, &mut n.down] {
        l.delay_us = 55_000;
        l.rate_bps = Some(10e6);
        // HTB's pfifo of `Testbed._bottleneck`: 20 ms of 1500-byte packets at 10 Mbit/s
        l.queue_pkts = 16;
        l.queue_in_packets = true;
        l.loss = loss;
    }
    n.client.request(0, format!("size:{OBJECT}").as_bytes(), RequestOpts::default()).unwrap();
    assert!(n.run_until(120_000_000, |n| n.client.active() == 0));
    let obj = n.outputs.iter().find_map(|o| match o {
        Output::Done { object, .. } => Some(object.clone()),
        _ => None,
    });
    assert_eq!(Sha256::digest(obj.expect("done")), Sha256::digest(pattern(0, OBJECT as usize)));
    let (ud, dd) = (n.up.dropped, n.down.dropped);
    Run { secs: n.now as f64 / 1e6, st: n.client.stats(), trace: n.client.take_trace(), queue_drops: (ud, dd) }
}

/// Per 100 ms: requests sent, bytes asked for, repeats, replies, bytes declared lost, the
/// window and transit at the end of the slice.
fn rounds(t: &[TraceEvent]) -> Vec<String> {
    let mut out = Vec::new();
    let end = t.last().map_or(0, |e| e.at_us);
    for slice in 0..=end / 100_000 {
        let s: Vec<&TraceEvent> = t.iter().filter(|e| e.at_us / 100_000 == slice).collect();
        let count = |k: &str| s.iter().filter(|e| e.kind == k).count();
        let bytes = |k: &str| s.iter().filter(|e| e.kind == k).map(|e| e.bytes as u64).sum::<u64>();
        let (w, tr) = s.last().map_or((0, 0), |e| (e.window, e.transit));
        out.push(format!(
            "{:>5} ms: send {:>3} ({:>6} B) repeat {:>3} ({:>6} B, largest {:>6}) reply {:>3} lost {:>6} B | window {:>6} transit {:>6}",
            slice * 100,
            count("send"),
            bytes("send"),
            count("repeat"),
            bytes("repeat"),
            s.iter().filter(|e| e.kind == "repeat").map(|e| e.bytes).max().unwrap_or(0),
            count("reply"),
            bytes("lost"),
            w,
            tr
        ));
    }
    out
}

#[test]
#[ignore = "a measurement: prints the trace of both request rules over the wan path"]
fn wan_path_trace_window_requests_against_one_datagram_requests() {
    for loss in [0.0, 0.01] {
        for one in [false, true] {
            let mut secs = Vec::new();
            for seed in 1..=5 {
                let r = wan(ClientConfig { one_datagram_requests: one, ..Default::default() }, seed, loss);
                secs.push(r.secs);
                if seed == 1 {
                    println!("loss {loss} one_datagram_requests {one}: {:.2} s, drops {:?}, {:?}", r.secs, r.queue_drops, r.st);
                    for l in rounds(&r.trace) {
                        println!("  {l}");
                    }
                }
            }
            println!("loss {loss} one_datagram_requests {one}: secs {secs:.2?}");
        }
    }
}

#[test]
#[ignore = "a measurement: prints the raw trace's tail"]
fn wan_path_trace_tail() {
    let r = wan(ClientConfig::default(), 1, 0.0);
    for e in r.trace.iter().filter(|e| e.at_us >= 2_150_000 || e.kind != "reply" && e.kind != "send") {
        println!("{:>8} {:6} off {:>8} bytes {:>6} window {:>6} transit {:>6}", e.at_us, e.kind, e.offset, e.bytes, e.window, e.transit);
    }
}
