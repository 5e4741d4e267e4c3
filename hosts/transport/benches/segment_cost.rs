//! CPU cost of the session itself per data segment, with no system calls: a Bulk client and
//! server joined in memory (each ACK handed straight back), each end's calls timed apart.
//! `cargo bench -p concast-transport --bench segment_cost` prints ns per segment for the
//! sender and the receiver, so the driver's and the kernel's share of a `concast perf` run
//! can be told from the stack's. The sender hands its messages over as `send(&[u8])` (one
//! copy into the session) and as `send_shared(Bytes)` (none); the receiver gets each batch's
//! datagrams as slices of one buffer, as the UDP driver's GRO receive does (filling that
//! buffer is the kernel's copy, so it is not timed).
use std::time::{Duration, Instant};

use bytes::BytesMut;
use concast_transport::{Bytes, Config, Output, Preset, Session};

const MSG: usize = 64 * 1024;
/// Datagrams the receiver takes per batch, as one GRO buffer brings them.
const BATCH: usize = 45;
const TURN_MSGS: usize = 4;

fn run(composite: Preset, total: usize, shared: bool) -> (u64, Duration, Duration) {
    let msg = vec![0x5a; MSG];
    let msg_bytes = Bytes::from(msg.clone());
    let mut now = 1u64;
    let (mut t_a, mut t_b) = (Duration::ZERO, Duration::ZERO);
    let mut a = Session::connect(Config::preset(composite), 0);
    let mut b: Option<Session> = None;
    let (mut to_b, mut to_a): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
    let (mut sent, mut got) = (0usize, 0usize);
    let mut space = BytesMut::new();
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
            if shared {
                a.send_shared(msg_bytes.clone(), 0, now).unwrap();
            } else {
                a.send(&msg, now).unwrap();
            }
            sent += MSG;
        }
        a.on_timer(now);
        while let Some(o) = a.poll() {
            if let Output::Transmit(d) = o {
                to_b.push(d);
            }
        }
        t_a += t.elapsed();
        let batches: Vec<Vec<Bytes>> = to_b.chunks(BATCH).map(|c| gro_buffer(&mut space, c)).collect();
        let t = Instant::now();
        for batch in batches {
            let mut it = batch.into_iter();
            let s = match b.as_mut() {
                Some(s) => s,
                None => {
                    let first = it.next().unwrap();
                    b = Some(Session::accept(&Config::preset(composite), None, &first, now).unwrap());
                    b.as_mut().unwrap()
                }
            };
            s.begin_batch();
            for d in it {
                s.on_datagram_shared(d, now);
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

/// The datagrams copied into one buffer, as the kernel fills a GRO receive, and sliced; the
/// buffer's memory is reused once nothing slices it, as the driver's `Rx` reuses it.
fn gro_buffer(space: &mut BytesMut, datagrams: &[Vec<u8>]) -> Vec<Bytes> {
    space.reserve(datagrams.iter().map(Vec::len).sum());
    datagrams.iter().for_each(|d| space.extend_from_slice(d));
    let all = space.split().freeze();
    let mut at = 0;
    datagrams
        .iter()
        .map(|d| {
            at += d.len();
            all.slice(at - d.len()..at)
        })
        .collect()
}

fn main() {
    let total = std::env::var("SEGMENT_COST_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(512usize) << 20;
    let cases = [(Preset::Minimal, false), (Preset::Bulk, false), (Preset::Minimal, true), (Preset::Bulk, true)];
    // warm up, every case before timing any: the segment table and buffers grow to their size,
    // and glibc's adaptive trim threshold settles (before it has, freeing a message's buffer
    // gave memory back to the system and the next one page-faulted it in again)
    for (p, shared) in cases {
        run(p, 16 << 20, shared);
    }
    for (p, shared) in cases {
        let (segs, ta, tb) = run(p, total, shared);
        let ns = |t: Duration| t.as_nanos() as f64 / segs as f64;
        let api = if shared { "send_shared" } else { "send" };
        println!(
            "{{\"composite\": \"{p:?}\", \"api\": \"{api}\", \"segments\": {segs}, \"sender_ns_per_seg\": {:.0}, \"receiver_ns_per_seg\": {:.0}, \"sender_gbit_s_one_core\": {:.1}}}",
            ns(ta),
            ns(tb),
            1400.0 * 8.0 / ns(ta)
        );
    }
}
