//! concast-linkemu: one process emulates every link of a network between pairs of TAPs.
//! A single thread runs an epoll loop over all TAP fds (edge-triggered), the control socket
//! and one timerfd armed (absolute, CLOCK_MONOTONIC) at the earliest pending event. Readable
//! TAPs are read in bounded, round-robin batches with the due frames written between them
//! (`concast_linkemu::pump`); while any TAP still holds frames, epoll is only polled.

mod control;
mod emu;
mod tap;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use concast_daemon::log::{emit, Level};
use concast_daemon::linkstate::StateFile;

use concast_linkemu::pump::Pump;
use emu::{epoll_add, epoll_del, Emu, TAP_TOKEN_BASE};

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
}

const TIMER: u64 = 0;
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

fn arm(timer: &OwnedFd, at: Option<u64>) {
    let at = at.map(|t| t.max(1)).unwrap_or(0); // 0 disarms
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: (at / 1_000_000_000) as _, tv_nsec: (at % 1_000_000_000) as _ },
    };
    unsafe { libc::timerfd_settime(timer.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
}

/// Read what a client sent, answer each complete line, write what the socket takes now.
/// Returns false when the client is done (hung up with nothing left to send, or broken).
fn serve_client(emu: &mut Emu, epfd: RawFd, c: &mut Client) -> bool {
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
        let reply = control::handle(emu, text.trim());
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
    let tfd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
    if tfd < 0 {
        return Err(format!("timerfd_create: {}", std::io::Error::last_os_error()));
    }
    let timer = unsafe { OwnedFd::from_raw_fd(tfd) };
    epoll_add(epfd, tfd, TIMER).map_err(|e| format!("epoll: {e}"))?;
    let state = match &args.state {
        Some(p) => Some(StateFile::create(p, args.slots).map_err(|e| format!("--state {}: {e}", p.display()))?),
        None => None,
    };
    let listener = concast_daemon::bind_unix(&args.control).map_err(|e| format!("--control {}: {e}", args.control.display()))?;
    epoll_add(epfd, listener.as_raw_fd(), LISTENER).map_err(|e| format!("epoll: {e}"))?;
    concast_daemon::stop_on_signals();
    let mut emu = Emu::new(epfd, state, args.late_bound_us * 1000);
    let mut clients: HashMap<u64, Client> = HashMap::new();
    let mut next_client = CLIENT_BASE;
    // The timer's deadline, and the earliest due event when the last round ended.
    let mut armed: Option<u64> = None;
    let mut next: Option<u64> = None;
    let mut pump = Pump::default();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    emit(Level::Info, "started", &[("control", &args.control.display()), ("state", &args.state.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "-".into())), ("slots", &args.slots), ("realtime", &args.realtime)]);

    while !concast_daemon::stopping() {
        // Inputs still holding frames: only look for news. Otherwise sleep until an input, a
        // client or the timer (armed at the earliest due event) wakes us.
        let timeout = if pump.idle() { 1000 } else { 0 };
        let n = unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), events.len() as i32, timeout) };
        let woke = emu::now_ns();
        // How late the loop woke for the earliest due event (0 when nothing was due yet).
        if let Some(due) = next {
            emu.wake_late.record_ns(woke.saturating_sub(due));
        }
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("epoll_wait: {e}"));
        }
        for ev in &events[..n as usize] {
            let token = ev.u64;
            match token {
                TIMER => {
                    let mut b = [0u8; 8];
                    unsafe { libc::read(tfd, b.as_mut_ptr() as *mut libc::c_void, 8) };
                }
                LISTENER => {
                    while let Ok((stream, _)) = listener.accept() {
                        if stream.set_nonblocking(true).is_err() || epoll_add(epfd, stream.as_raw_fd(), next_client).is_err() {
                            continue;
                        }
                        clients.insert(next_client, Client { stream, token: next_client, inbuf: Vec::new(), outbuf: Vec::new(), eof: false });
                        next_client += 1;
                    }
                }
                t if t >= TAP_TOKEN_BASE => pump.ready((t - TAP_TOKEN_BASE) as usize),
                t => {
                    if let Some(c) = clients.get_mut(&t) {
                        if !serve_client(&mut emu, epfd, c) {
                            epoll_del(epfd, c.stream.as_raw_fd());
                            clients.remove(&t);
                        }
                    }
                }
            }
        }
        // Reads and the due writes between them; the due writes run even when nothing was read.
        pump.round(&mut emu);
        emu.busy.record_ns(emu::now_ns() - woke);
        next = emu.next_deadline();
        // The timer only matters before a blocking wait: re-arming it after every busy round
        // cost 8 % of the loop's CPU (timerfd_settime, perf under the ACK study's high load).
        if pump.idle() && next != armed {
            arm(&timer, next);
            armed = next;
        }
    }
    let delivered: u64 = emu.links().map(|l| l.dirs[0].counters.delivered + l.dirs[1].counters.delivered).sum();
    emit(Level::Info, "stopped", &[("links", &emu.len()), ("delivered", &delivered), ("write_errors", &emu.write_errors)]);
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
