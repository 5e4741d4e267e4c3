//! CPU cost of the session itself per data segment, with no system calls: a Bulk client and
//! server joined in memory (each ACK handed straight back), each end's calls timed apart.
//! `cargo bench -p concast-transport --bench segment_cost` prints ns per segment for the
//! sender and the receiver, so the driver's and the kernel's share of a `concast perf` run
//! can be told from the stack's.
use std::time::{Duration, Instant};

use concast_transport::{Config, Output, Preset, Session};

const MSG: usize = 64 * 1024;
/// Datagrams the receiver takes per batch, as one GRO buffer brings them.
const BATCH: usize = 45;
const TURN_MSGS: usize = 4;

fn run(composite: Preset, total: usize) -> (u64, Duration, Duration) {
    let msg = vec![0x5a; MSG];
    let mut now = 1u64;
    let (mut t_a, mut t_b) = (Duration::ZERO, Duration::ZERO);
    let mut a = Session::connect(Config::preset(composite), 0);
    let mut b: Option<Session> = None;
    let (mut to_b, mut to_a): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
    let (mut sent, mut got) = (0usize, 0usize);
    while got < total {
        now += 1; // a microsecond per round: timers stay far away, as on a fast path
        let t = Instant::now();
        for d in to_a.drain(..) {
            a.on_datagram(&d, now);
        }
        // 256 KB a round, as concast-perf hands them over: the datagrams stay in cache
        for _ in 0..TURN_MSGS {
            if sent >= total || !a.can_send(MSG) {
                break;
            }
            a.send(&msg, now).unwrap();
            sent += MSG;
        }
        a.on_timer(now);
        while let Some(o) = a.poll() {
            if let Output::Transmit(d) = o {
                to_b.push(d);
            }
        }
        t_a += t.elapsed();
        let t = Instant::now();
        for chunk in to_b.chunks(BATCH) {
            let mut it = chunk.iter();
            let s = match b.as_mut() {
                Some(s) => s,
                None => {
                    let first = it.next().unwrap();
                    b = Some(Session::accept(&Config::preset(composite), None, first, now).unwrap());
                    b.as_mut().unwrap()
                }
            };
            s.begin_batch();
            for d in it {
                s.on_datagram(d, now);
            }
            s.end_batch(now);
            while let Some(o) = s.poll() {
                match o {
                    Output::Transmit(d) => to_a.push(d),
                    Output::Deliver(m) => got += m.len(),
                    _ => {}
                }
            }
        }
        t_b += t.elapsed();
        for d in to_b.drain(..) {
            a.recycle(d);
        }
    }
    (a.stats().segs_sent, t_a, t_b)
}

fn main() {
    let total = std::env::var("SEGMENT_COST_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(512usize) << 20;
    for p in [Preset::Minimal, Preset::Bulk] {
        run(p, 16 << 20); // warm up: the segment table and buffers grow to their size
        let (segs, ta, tb) = run(p, total);
        let ns = |t: Duration| t.as_nanos() as f64 / segs as f64;
        println!(
            "{{\"composite\": \"{p:?}\", \"segments\": {segs}, \"sender_ns_per_seg\": {:.0}, \"receiver_ns_per_seg\": {:.0}, \"sender_gbit_s_one_core\": {:.1}}}",
            ns(ta),
            ns(tb),
            1400.0 * 8.0 / ns(ta)
        );
    }
}
