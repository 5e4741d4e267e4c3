//! linkemu-bench: the traffic side of scripts/bench_linkemu.py, run inside the benchmark's
//! namespace. Raw Ethernet frames through AF_PACKET, so the same tool drives an emulated
//! link (TAP pair) and its peer, a plain veth pair.
//!
//!   linkemu-bench blast --ifaces a0,a1 --duration 3 [--size 64]
//!       send as fast as possible, round robin over the interfaces; prints {"sent": N, ...}
//!   linkemu-bench probe --tx a0 --rx b0 --count 5000 --interval-us 1000
//!       timestamped frames one by one; prints one-way latency quantiles in microseconds

use std::ffi::CString;
use std::io;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

const ETHERTYPE: u16 = 0x88b5; // IEEE local experimental: no stack takes it

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    Blast {
        #[arg(long, value_delimiter = ',')]
        ifaces: Vec<String>,
        #[arg(long, default_value_t = 3.0)]
        duration: f64,
        #[arg(long, default_value_t = 64)]
        size: usize,
    },
    Probe {
        #[arg(long)]
        tx: String,
        #[arg(long)]
        rx: String,
        #[arg(long, default_value_t = 5000)]
        count: u64,
        #[arg(long, default_value_t = 1000)]
        interval_us: u64,
        #[arg(long, default_value_t = 100)]
        size: usize,
    },
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// An AF_PACKET socket bound to `iface` for our ethertype.
fn packet_socket(iface: &str) -> io::Result<i32> {
    let name = CString::new(iface).unwrap();
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface {iface}")));
    }
    // Protocol 0 until bind(): with the ethertype, the socket would hear it on every
    // interface of the namespace until bound to this one (as routerd's CpuPort once did).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETHERTYPE.to_be();
    sll.sll_ifindex = index as i32;
    if unsafe { libc::bind(fd, &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

fn frame(size: usize) -> Vec<u8> {
    let mut f = vec![0u8; size.max(60)];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    f
}

fn blast(ifaces: &[String], duration: f64, size: usize) -> io::Result<String> {
    const BATCH: usize = 32;
    let fds: Vec<i32> = ifaces.iter().map(|i| packet_socket(i)).collect::<io::Result<_>>()?;
    let f = frame(size);
    let mut iov = vec![libc::iovec { iov_base: f.as_ptr() as *mut _, iov_len: f.len() }; BATCH];
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH)
        .map(|i| {
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = &mut iov[i];
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect();
    let (mut sent, mut errors) = (0u64, 0u64);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(duration);
    'outer: loop {
        for &fd in &fds {
            let n = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), BATCH as u32, 0) };
            if n < 0 {
                errors += 1;
            } else {
                sent += n as u64;
            }
        }
        if Instant::now() >= end {
            break 'outer;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(format!("{{\"sent\": {sent}, \"send_errors\": {errors}, \"seconds\": {secs:.4}}}"))
}

fn probe(tx: &str, rx: &str, count: u64, interval_us: u64, size: usize) -> io::Result<String> {
    let txfd = packet_socket(tx)?;
    let rxfd = packet_socket(rx)?;
    let tv = libc::timeval { tv_sec: 0, tv_usec: 200_000 };
    unsafe { libc::setsockopt(rxfd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv as *const _ as *const _, std::mem::size_of::<libc::timeval>() as u32) };
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    let receiver = std::thread::spawn(move || {
        let mut lat = Vec::new();
        let mut buf = [0u8; 2048];
        loop {
            let n = unsafe { libc::recv(rxfd, buf.as_mut_ptr() as *mut _, buf.len(), 0) };
            let t = now_ns();
            if n < 0 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                continue;
            }
            if n >= 30 {
                let sent = u64::from_le_bytes(buf[22..30].try_into().unwrap());
                lat.push(t.saturating_sub(sent));
            }
        }
        lat
    });
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let mut f = frame(size);
    let t0 = now_ns() + 10_000_000;
    for i in 0..count {
        let at = t0 + i * interval_us * 1000;
        let ts = libc::timespec { tv_sec: (at / 1_000_000_000) as _, tv_nsec: (at % 1_000_000_000) as _ };
        unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        f[14..22].copy_from_slice(&i.to_le_bytes());
        f[22..30].copy_from_slice(&now_ns().to_le_bytes());
        unsafe { libc::send(txfd, f.as_ptr() as *const _, f.len(), 0) };
    }
    std::thread::sleep(Duration::from_millis(1500));
    done.store(true, Ordering::SeqCst);
    let mut lat = receiver.join().unwrap();
    lat.sort_unstable();
    let q = |p: f64| if lat.is_empty() { 0.0 } else { lat[((lat.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0 };
    Ok(format!(
        "{{\"sent\": {count}, \"received\": {}, \"p50_us\": {:.1}, \"p90_us\": {:.1}, \"p99_us\": {:.1}, \"max_us\": {:.1}, \"min_us\": {:.1}}}",
        lat.len(), q(0.5), q(0.9), q(0.99), q(1.0), q(0.0)
    ))
}

fn main() -> ExitCode {
    let out = match Cli::parse().cmd {
        Cmd::Blast { ifaces, duration, size } => blast(&ifaces, duration, size),
        Cmd::Probe { tx, rx, count, interval_us, size } => probe(&tx, &rx, count, interval_us, size),
    };
    match out {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("linkemu-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
