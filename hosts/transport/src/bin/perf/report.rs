//! Shared measuring helpers: CPU time, clocks, stream message framing, JSON lines.
use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The calling thread's `/proc/thread-self/schedstat`, opened once: read every turn of a
/// sender's loop, one `pread` each instead of an open, read and close.
pub struct RunDelay(Option<std::fs::File>);

impl RunDelay {
    pub fn open() -> RunDelay {
        RunDelay(std::fs::File::open("/proc/thread-self/schedstat").ok())
    }

    /// Nanoseconds the thread has spent runnable but not running (the file's second field),
    /// None where the kernel does not keep it.
    pub fn ns(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.0.as_ref()?.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n]).ok()?.split_whitespace().nth(1)?.parse().ok()
    }
}

/// User + system CPU seconds of this process so far.
pub fn cpu_secs() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// CLOCK_MONOTONIC in microseconds: the same clock in every namespace of one machine, so a
/// receiver can compute one-way delays of stream packets.
pub fn mono_us() -> u64 {
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000
}

/// A stream packet: sequence number and send time, padded to `size`.
pub fn stream_msg(seq: u32, size: usize) -> Vec<u8> {
    let mut m = Vec::with_capacity(size.max(12));
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(&mono_us().to_be_bytes());
    m.resize(size.max(12), 0);
    m
}

/// (sequence, one-way delay in µs) of a stream packet.
pub fn stream_parse(m: &[u8]) -> Option<(u32, u64)> {
    let seq = u32::from_be_bytes(m.get(..4)?.try_into().ok()?);
    let sent = u64::from_be_bytes(m.get(4..12)?.try_into().ok()?);
    Some((seq, mono_us().saturating_sub(sent)))
}

/// Receiver-side tallies of one flow.
#[derive(Default)]
pub struct Tally {
    pub bytes: u64,
    pub msgs: u64,
    pub first_us: Option<u64>,
    pub last_us: u64,
    /// Stream packets: highest sequence + 1, and those within the playout delay.
    pub stream_top: u32,
    pub on_time: u64,
    /// Stream packets by one-way delay, one count per LATE_EDGES_US bucket (the CTP paper's
    /// Figure 5(c) lateness breakdown): [0, playout], then each edge to the next, then beyond.
    pub late: [u64; LATE_EDGES_US.len()],
    pub hash: Option<Sha256>,
    /// Bytes delivered in each SAMPLE_US interval since the first, for the stability index.
    pub samples: Vec<u64>,
}

pub const SAMPLE_US: u64 = 500_000;

/// A reproducible byte stream (xorshift64), so a receiver's hash shows order as well as content.
pub struct Pattern(u64);

impl Pattern {
    pub fn new(seed: u64) -> Pattern {
        Pattern(seed | 1)
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            *b = self.0 as u8;
        }
    }
}

pub use concast_wire::hex;

pub const PLAYOUT_US: u64 = 3_000_000;
/// Upper edges of the stream delay buckets (the last is open): on time within the 3 s playout
/// window, then late by up to 1 s, 3 s, 7 s, and more.
pub const LATE_EDGES_US: [u64; 5] = [PLAYOUT_US, 4_000_000, 6_000_000, 10_000_000, u64::MAX];

/// Which LATE_EDGES_US bucket a one-way delay falls in.
pub fn late_bucket(delay_us: u64) -> usize {
    LATE_EDGES_US.iter().position(|&e| delay_us <= e).unwrap_or(LATE_EDGES_US.len() - 1)
}

impl Tally {
    pub fn add(&mut self, m: &[u8], stream: bool) {
        let now = mono_us();
        let first = *self.first_us.get_or_insert(now);
        self.last_us = now;
        let slot = ((now - first) / SAMPLE_US) as usize;
        if self.samples.len() <= slot {
            self.samples.resize(slot + 1, 0);
        }
        self.samples[slot] += m.len() as u64;
        self.bytes += m.len() as u64;
        self.msgs += 1;
        if let Some(h) = self.hash.as_mut() {
            h.update(m);
        }
        if stream {
            if let Some((seq, delay)) = stream_parse(m) {
                self.stream_top = self.stream_top.max(seq + 1);
                self.on_time += (delay <= PLAYOUT_US) as u64;
                self.late[late_bucket(delay)] += 1;
            }
        }
    }

    pub fn json(&self, extra: Value) -> Value {
        let secs = self.first_us.map_or(0.0, |f| (self.last_us - f) as f64 / 1e6);
        let mut v = json!({
            "role": "server",
            "bytes": self.bytes,
            "msgs": self.msgs,
            "secs": secs,
            "mbps": if secs > 0.0 { self.bytes as f64 * 8.0 / secs / 1e6 } else { 0.0 },
            "cpu_secs": cpu_secs(),
            "sample_secs": SAMPLE_US as f64 / 1e6,
            "first_us": self.first_us,
            "last_us": self.last_us,
            "samples": self.samples,
        });
        if let Some(h) = &self.hash {
            v["sha256"] = json!(hex(&h.clone().finalize()));
        }
        if self.stream_top > 0 {
            v["stream_on_time"] = json!(self.on_time);
            v["stream_delay_buckets"] = json!(self.late);
            v["stream_delay_edges_us"] = json!(LATE_EDGES_US[..LATE_EDGES_US.len() - 1]);
        }
        merge(&mut v, extra);
        v
    }
}

pub fn merge(v: &mut Value, extra: Value) {
    if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
}

/// Latency summary of ping-pong round trips, given in the order they were made (the first
/// is reported on its own: it runs before the sender has an RTT sample).
pub fn rtt_summary(mut rtts: Vec<Duration>) -> Value {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let Some(&first) = rtts.first() else {
        return json!({"count": 0});
    };
    rtts.sort();
    let n = rtts.len();
    json!({
        "count": n,
        "first_us": us(first),
        "min_us": us(rtts[0]),
        "median_us": us(rtts[n / 2]),
        "p99_us": us(rtts[(n * 99 / 100).min(n - 1)]),
        "max_us": us(rtts[n - 1]),
        "mean_us": rtts.iter().map(|d| us(*d)).sum::<f64>() / n as f64,
    })
}

pub fn print(v: &Value) {
    println!("{v}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_buckets_split_at_the_playout_window() {
        assert_eq!(late_bucket(0), 0);
        assert_eq!(late_bucket(PLAYOUT_US), 0);
        assert_eq!(late_bucket(PLAYOUT_US + 1), 1);
        assert_eq!(late_bucket(5_000_000), 2);
        assert_eq!(late_bucket(9_999_999), 3);
        assert_eq!(late_bucket(60_000_000), 4);
    }
}
