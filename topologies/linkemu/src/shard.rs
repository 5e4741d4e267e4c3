//! A shard: one thread with its own links, epoll set, timerfd and pump. The daemon runs one
//! shard per core it may use (`--threads`); each link lives in exactly one shard, so a shard
//! never waits for another. The control thread reaches a shard's links only through jobs the
//! shard runs between two rounds (`Shard::call`), so the per-frame path takes no locks but the
//! state file's.
//!
//! Why more than one: under the ACK study's high load one thread needed a whole core (its TAP
//! writes run the receiving namespaces' forwarding), and the kernel's real-time throttling
//! (`sched_rt_runtime_us`, 95 % of each second) then stopped it for ~50 ms once a second.

use std::io::ErrorKind;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use concast_daemon::linkstate::StateFile;
use concast_linkemu::idle::{Idle, Wait};
use concast_linkemu::iobatch::IoMode;
use concast_linkemu::pump::Pump;

use crate::emu::{self, epoll_add, Emu, TAP_TOKEN_BASE};

type Job = Box<dyn FnOnce(&mut Emu) + Send>;

const TIMER: u64 = 0;
const WAKE: u64 = 1;

pub struct Shard {
    jobs: Sender<Job>,
    wake: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn arm(timer: RawFd, at: Option<u64>) {
    let at = at.map(|t| t.max(1)).unwrap_or(0); // 0 disarms
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: (at / 1_000_000_000) as _, tv_nsec: (at % 1_000_000_000) as _ },
    };
    unsafe { libc::timerfd_settime(timer, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
}

fn owned(fd: i32, what: &str) -> Result<OwnedFd, String> {
    if fd < 0 {
        return Err(format!("{what}: {}", std::io::Error::last_os_error()));
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn poke(fd: &OwnedFd) {
    let one: u64 = 1;
    unsafe { libc::write(fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
}

impl Shard {
    /// Start shard `index`; its thread inherits the caller's scheduling (SCHED_FIFO).
    pub fn spawn(index: usize, state: Option<Arc<Mutex<StateFile>>>, late_bound_ns: u64, spin_ns: u64, io: IoMode) -> Result<Shard, String> {
        let ep = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }, "epoll_create1")?;
        let timer = owned(unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) }, "timerfd_create")?;
        let wake = Arc::new(owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) }, "eventfd")?);
        epoll_add(ep.as_raw_fd(), timer.as_raw_fd(), TIMER).map_err(|e| format!("epoll: {e}"))?;
        epoll_add(ep.as_raw_fd(), wake.as_raw_fd(), WAKE).map_err(|e| format!("epoll: {e}"))?;
        let (jobs, rx) = mpsc::channel::<Job>();
        let stop = Arc::new(AtomicBool::new(false));
        let emu = Emu::new(ep.as_raw_fd(), state, late_bound_ns, io);
        let (w, s) = (wake.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("shard{index}"))
            .spawn(move || run(emu, ep, timer, w, rx, s, spin_ns))
            .map_err(|e| format!("shard thread: {e}"))?;
        Ok(Shard { jobs, wake, stop, thread: Some(thread) })
    }

    /// Run `f` on this shard's links between two of its rounds, and wait for the answer.
    pub fn call<R: Send + 'static>(&self, f: impl FnOnce(&mut Emu) -> R + Send + 'static) -> R {
        let (tx, rx) = mpsc::sync_channel(1);
        self.jobs
            .send(Box::new(move |emu: &mut Emu| {
                let _ = tx.send(f(emu));
            }))
            .expect("shard thread running");
        poke(&self.wake);
        rx.recv().expect("shard thread running")
    }
}

impl Drop for Shard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        poke(&self.wake);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The shard's side of `Idle`: epoll (the events it returns stay in `events[..n]` for the
/// loop) and the timerfd.
struct Epoll {
    epfd: i32,
    timer: i32,
    events: Vec<libc::epoll_event>,
    /// Events from the last wait (0 when it failed or was interrupted).
    n: i32,
    /// A failure other than EINTR: the loop ends.
    failed: Option<std::io::Error>,
}

impl Epoll {
    fn wait(&mut self, timeout_ms: i32) -> i32 {
        let n = unsafe { libc::epoll_wait(self.epfd, self.events.as_mut_ptr(), self.events.len() as i32, timeout_ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            self.n = 0;
            if e.kind() != ErrorKind::Interrupted {
                self.failed = Some(e);
            }
            return 0;
        }
        self.n = n;
        n
    }
}

impl Wait for Epoll {
    fn now(&mut self) -> u64 {
        emu::now_ns()
    }
    fn poll(&mut self) -> bool {
        self.wait(0) > 0 || self.failed.is_some()
    }
    fn arm(&mut self, at: Option<u64>) {
        arm(self.timer, at);
    }
    fn block(&mut self) {
        self.wait(1000);
    }
}

fn run(mut emu: Emu, ep: OwnedFd, timer: OwnedFd, wake: Arc<OwnedFd>, jobs: Receiver<Job>, stop: Arc<AtomicBool>, spin_ns: u64) {
    // The earliest due event when the last round ended.
    let mut next: Option<u64> = None;
    let mut pump = Pump::default();
    let mut idle = Idle::new(spin_ns);
    let mut io = Epoll { epfd: ep.as_raw_fd(), timer: timer.as_raw_fd(), events: vec![libc::epoll_event { events: 0, u64: 0 }; 256], n: 0, failed: None };
    while !stop.load(Ordering::Relaxed) {
        // Inputs still holding frames: only look for news. Otherwise poll a while, then sleep
        // until an input, a job or the timer (armed at the earliest due event) wakes us
        // (`idle.rs`).
        if pump.idle() {
            idle.wait(&mut io, next);
        } else {
            io.wait(0);
        }
        if io.failed.is_some() {
            break; // an epoll fd we own cannot fail otherwise
        }
        let woke = emu::now_ns();
        // How late the loop woke for the earliest due event (0 when nothing was due yet).
        if let Some(due) = next {
            emu.wake_late.record_ns(woke.saturating_sub(due));
        }
        for ev in &io.events[..io.n as usize] {
            let token = ev.u64; // a copy: epoll_event is packed
            match token {
                TIMER => {
                    let mut b = [0u8; 8];
                    unsafe { libc::read(timer.as_raw_fd(), b.as_mut_ptr() as *mut libc::c_void, 8) };
                }
                WAKE => {
                    let mut b = [0u8; 8];
                    unsafe { libc::read(wake.as_raw_fd(), b.as_mut_ptr() as *mut libc::c_void, 8) };
                    while let Ok(job) = jobs.try_recv() {
                        job(&mut emu);
                    }
                }
                t if t >= TAP_TOKEN_BASE => pump.ready((t - TAP_TOKEN_BASE) as usize),
                _ => {}
            }
        }
        io.n = 0;
        // Reads and the due writes between them; the due writes run even when nothing was read.
        pump.round(&mut emu);
        emu.busy.record_ns(emu::now_ns() - woke);
        next = emu.next_deadline();
    }
    // Jobs still queued are dropped with their reply channels; callers see the shard gone.
    drop(jobs);
    drop(emu); // closes the TAPs
    drop(ep);
}
