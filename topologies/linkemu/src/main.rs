//! concast-linkemu: one process emulates every link of a network between pairs of TAPs.
//! The links are spread over `--threads` shards (`shard.rs`); each shard's thread runs an
//! epoll loop over its TAP fds (edge-triggered) and one timerfd armed (absolute,
//! CLOCK_MONOTONIC) at its earliest pending event. Readable TAPs are read in bounded,
//! round-robin batches with the due frames written between them (`concast_linkemu::pump`);
//! while any TAP still holds frames, epoll is only polled, and once none does, it is polled a
//! short adaptive while before the thread sleeps (`concast_linkemu::idle`). The main thread serves the control
//! socket and hands link work to the shards. With `--io uring` a batch of TAP reads or writes
//! enters the kernel once (`uring.rs`).

mod control;
mod emu;
mod shard;
mod tap;
mod uring;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Parser;
use concast_daemon::log::{emit, Level};
use concast_daemon::linkstate::StateFile;

use control::Links;
use emu::{epoll_add, epoll_del};
use shard::Shard;

#[derive(Parser)]
#[command(name = "concast-linkemu", about = "Link emulator: delay, loss, rate and drop-tail queues between TAP devices (docs/linkemu.md)")]
struct Args {
    /// Unix socket for the control protocol (JSON lines)
    #[arg(long)]
    control: PathBuf,
    /// Shared-memory state file with each link direction's queue state, for routerd
    #[arg(long)]
    state: Option<PathBuf>,
    /// Slots in the state file (two per link)
    #[arg(long, default_value_t = 4096)]
    slots: u32,
    /// SCHED_FIFO priority for the loop (0 = normal scheduling). On a busy machine a normal
    /// thread wakes up for a due frame milliseconds late; a real-time one does not.
    #[arg(long, default_value_t = 0)]
    realtime: i32,
    /// Fidelity bound: a frame written later than this after its due time is counted
    /// per link as over the bound (docs/linkemu.md, "Fidelity")
    #[arg(long, default_value_t = 500)]
    late_bound_us: u64,
    /// Shards: threads that each move the frames of their share of the links (0: one per
    /// CPU the process may run on). Default 1: on this 2-core machine two real-time shards
    /// took both cores under the ACK study's high load and starved everything else
    /// (docs/linkemu.md, "The event loop").
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Where the receiving namespace's stack runs for frames we write: `inline` inside our
    /// write, on the emulator's thread; `napi` opens each TAP with IFF_NAPI and threaded NAPI,
    /// so a kernel thread per TAP runs it at normal priority (a kernel without either falls
    /// back per TAP; each link's stats say what it got). Default inline: on this 2-core
    /// machine napi cost more CPU per frame in all, and the emulator's own share did not
    /// drop (docs/linkemu.md, "Where the receiving stack runs").
    #[arg(long, default_value = "inline", value_parser = tap::RxMode::parse)]
    rx_mode: tap::RxMode,
    /// Longest poll for new frames before a shard sleeps, µs (0, the default: sleep at once).
    /// The poll adapts: it runs only while frames come in gaps shorter than this. Only for a
    /// machine where the emulator has a core of its own: on this one it starved the senders
    /// and pushed the ACK study into real-time throttling (docs/linkemu.md, "The event loop";
    /// concast_linkemu::idle).
    #[arg(long, default_value_t = concast_linkemu::idle::DEFAULT_MAX_NS / 1000, value_parser = clap::value_parser!(u64).range(0..=1000))]
    spin_us: u64,
    /// How frames are read from and written to the TAPs: `uring` queues each batch (a TAP's
    /// reads, a direction's due writes) on an io_uring and enters the kernel once for it;
    /// `syscalls` makes one read() or write() per frame. Where io_uring is not available
    /// (io_uring_disabled, seccomp, an old kernel) a shard logs `io_fallback` and uses
    /// syscalls (docs/linkemu.md, "Batched TAP I/O").
    #[arg(long, default_value = "syscalls", value_parser = concast_linkemu::iobatch::IoMode::parse)]
    io: concast_linkemu::iobatch::IoMode,
}

const LISTENER: u64 = 1;
const CLIENT_BASE: u64 = 16;

/// A control client. Replies are queued and written without blocking: the loop that moves
/// every link's frames must never wait for a slow reader (a `stats` reply written blocking
/// stalled all links for tens of ms while the machine was busy; docs/linkemu.md).
struct Client {
    stream: UnixStream,
    token: u64,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    /// The client hung up its side; close once its replies are out.
    eof: bool,
}

/// A client whose unread replies pass this is dropped (it stopped reading).
const MAX_OUTBUF: usize = 64 << 20;

/// Read what a client sent, answer each complete line, write what the socket takes now.
/// Returns false when the client is done (hung up with nothing left to send, or broken).
fn serve_client(links: &mut Links, epfd: RawFd, c: &mut Client) -> bool {
    let mut buf = [0u8; 16384];
    while !c.eof {
        match c.stream.read(&mut buf) {
            Ok(0) => c.eof = true,
            Ok(n) => c.inbuf.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    while let Some(nl) = c.inbuf.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = c.inbuf.drain(..=nl).collect();
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        let reply = control::handle(links, text.trim());
        // Serialised whole, then written in as few syscalls as the socket allows.
        if serde_json::to_writer(&mut c.outbuf, &reply).is_err() {
            return false;
        }
        c.outbuf.push(b'\n');
    }
    while !c.outbuf.is_empty() {
        match c.stream.write(&c.outbuf) {
            Ok(n) => {
                c.outbuf.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    if c.outbuf.len() > MAX_OUTBUF {
        return false;
    }
    if c.eof && c.outbuf.is_empty() {
        return false;
    }
    // Wait for room when replies are pending; stop asking for input after EOF (a closed
    // socket is always readable and would spin the loop).
    let mut events = if c.outbuf.is_empty() { 0 } else { libc::EPOLLOUT as u32 };
    if !c.eof {
        events |= libc::EPOLLIN as u32;
    }
    let mut ev = libc::epoll_event { events, u64: c.token };
    unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, c.stream.as_raw_fd(), &mut ev) };
    true
}

fn run(args: Args) -> Result<(), String> {
    // Timer wake-ups exactly when asked: the default 50 us slack would be added jitter.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if args.realtime > 0 {
        let p = libc::sched_param { sched_priority: args.realtime };
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } < 0 {
            return Err(format!("--realtime {}: {}", args.realtime, std::io::Error::last_os_error()));
        }
    }
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epfd < 0 {
        return Err(format!("epoll_create1: {}", std::io::Error::last_os_error()));
    }
    let _ep = unsafe { OwnedFd::from_raw_fd(epfd) };
    let state = match &args.state {
        Some(p) => Some(Arc::new(Mutex::new(StateFile::create(p, args.slots).map_err(|e| format!("--state {}: {e}", p.display()))?))),
        None => None,
    };
    let threads = match args.threads {
        0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        n => n,
    };
    let shards = (0..threads).map(|i| Shard::spawn(i, state.clone(), args.late_bound_us * 1000, args.spin_us * 1000, args.io)).collect::<Result<Vec<_>, _>>()?;
    let mut links = Links::new(shards, state, args.late_bound_us * 1000, args.rx_mode);
    let listener = concast_daemon::bind_unix(&args.control).map_err(|e| format!("--control {}: {e}", args.control.display()))?;
    epoll_add(epfd, listener.as_raw_fd(), LISTENER).map_err(|e| format!("epoll: {e}"))?;
    concast_daemon::stop_on_signals();
    let mut clients: HashMap<u64, Client> = HashMap::new();
    let mut next_client = CLIENT_BASE;
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    emit(Level::Info, "started", &[("control", &args.control.display()), ("state", &args.state.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "-".into())), ("slots", &args.slots), ("realtime", &args.realtime), ("threads", &threads), ("rx_mode", &args.rx_mode.name()), ("spin_us", &args.spin_us), ("io", &links.io_names())]);

    while !concast_daemon::stopping() {
        let n = unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), events.len() as i32, 1000) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("epoll_wait: {e}"));
        }
        for ev in &events[..n as usize] {
            let token = ev.u64; // a copy: epoll_event is packed
            match token {
                LISTENER => {
                    while let Ok((stream, _)) = listener.accept() {
                        if stream.set_nonblocking(true).is_err() || epoll_add(epfd, stream.as_raw_fd(), next_client).is_err() {
                            continue;
                        }
                        clients.insert(next_client, Client { stream, token: next_client, inbuf: Vec::new(), outbuf: Vec::new(), eof: false });
                        next_client += 1;
                    }
                }
                t => {
                    if let Some(c) = clients.get_mut(&t) {
                        if !serve_client(&mut links, epfd, c) {
                            epoll_del(epfd, c.stream.as_raw_fd());
                            clients.remove(&t);
                        }
                    }
                }
            }
        }
    }
    let (delivered, write_errors) = links.totals();
    emit(Level::Info, "stopped", &[("links", &links.len()), ("delivered", &delivered), ("write_errors", &write_errors), ("cpu_ms", &control::process_cpu_ms())]);
    drop(links); // stops the shards; their TAPs close
    drop(listener);
    let _ = std::fs::remove_file(&args.control);
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            emit(Level::Error, "fatal", &[("error", &e)]);
            ExitCode::FAILURE
        }
    }
}
