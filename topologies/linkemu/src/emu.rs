//! The links the daemon holds and the per-frame work: frames read from one end's TAP go
//! through that direction's model and are written to the other end's TAP when due. One
//! heap of (due time, direction) tells the event loop when to wake up next. Which TAP is read
//! when is `concast_linkemu::pump`'s policy; `Emu` is its `Io`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

use concast_daemon::log::{emit, Level};
use concast_linkemu::hist::{Hist, Lateness};
use concast_linkemu::iobatch::{reads_for, write_ok, IoMode};
use concast_linkemu::kind::DropBooks;
use concast_linkemu::model::{Direction, Drop};
use concast_linkemu::pump::{self, Batch};
use concast_daemon::linkstate::{Slot, StateFile};

use crate::tap;
use crate::uring::{self, Uring};

/// epoll tokens below this are the timer, the listener and clients' base. A TAP's token is
/// this plus its input number, `link index << 1 | end`.
pub const TAP_TOKEN_BASE: u64 = 1 << 20;

pub struct End {
    pub name: String,
    pub netns: String,
    pub fd: Option<OwnedFd>,
    /// How the TAP hands written frames to its stack (`tap::RxApplied::name`).
    pub rx: &'static str,
    /// The TAP's transmit queue, frames (what its stack may send ahead of our reads).
    pub tap_queue: u32,
}

pub struct Link {
    pub id: String,
    pub ends: [End; 2],
    /// dirs[0] carries what end a transmits to end b; dirs[1] the reverse.
    pub dirs: [Direction<Vec<u8>>; 2],
    /// What each direction's drops carried (ACKs in bundles, pure ACKs, CSP, other).
    pub drops: [DropBooks; 2],
    /// How late each direction's frames left against their due time.
    pub late: [Lateness; 2],
    pub slots: [u32; 2],
    /// The due time the heap holds for each direction (u64::MAX: none).
    scheduled: [u64; 2],
    generation: u32,
}

pub struct Emu {
    pub epfd: RawFd,
    links: Vec<Option<Link>>,
    by_id: HashMap<String, usize>,
    heap: BinaryHeap<Reverse<(u64, u32, u8, u32)>>,
    generation: u32,
    pool: Vec<Vec<u8>>,
    scratch: Vec<u8>,
    /// `--io uring`: the TAPs' reads and writes go in batches over this ring (None: one
    /// syscall per frame, asked for or fallen back to).
    uring: Option<Box<Uring>>,
    /// A direction's due frames, gathered for one batch of writes (kept for its capacity).
    outbox: Vec<Vec<u8>>,
    /// Frames each input's last read batch found, by input number (`iobatch::reads_for`).
    last_read: Vec<u16>,
    /// Shared by the shards (each publishes only its own links' slots).
    pub state: Option<Arc<Mutex<StateFile>>>,
    pub write_errors: u64,
    /// How late frames left against their due time (the loop's own jitter), all links,
    /// every frame written (an on-time frame counts as 0).
    pub lateness: Hist,
    /// A frame later than this is over the fidelity bound (`--late-bound-us`).
    pub late_bound_ns: u64,
    /// How long each TAP write took (the receiving namespace's stack runs inside it).
    pub write_time: Hist,
    /// Per loop iteration: how late it woke for its earliest due event, and how long its
    /// work took (reads, writes, control requests).
    pub wake_late: Hist,
    pub busy: Hist,
}

pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The ring `--io` asks for, or None: syscalls asked for, or no ring to be had (logged as
/// `io_fallback` with the reason; the daemon goes on with syscalls).
fn ring_for(io: IoMode, open: impl FnOnce() -> Result<Uring, String>) -> Option<Box<Uring>> {
    match io {
        IoMode::Syscalls => None,
        IoMode::Uring => match open() {
            Ok(u) => Some(Box::new(u)),
            Err(why) => {
                emit(Level::Warn, "io_fallback", &[("asked", &"uring"), ("using", &"syscalls"), ("reason", &why)]);
                None
            }
        },
    }
}

pub fn epoll_add(epfd: RawFd, fd: RawFd, token: u64) -> std::io::Result<()> {
    epoll_add_with(epfd, fd, token, libc::EPOLLIN as u32)
}

/// Edge-triggered: the TAPs, which the pump keeps reading until a read would block.
fn epoll_add_edge(epfd: RawFd, fd: RawFd, token: u64) -> std::io::Result<()> {
    epoll_add_with(epfd, fd, token, (libc::EPOLLIN | libc::EPOLLET) as u32)
}

fn epoll_add_with(epfd: RawFd, fd: RawFd, token: u64, events: u32) -> std::io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: token };
    if unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

pub fn epoll_del(epfd: RawFd, fd: RawFd) {
    unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
}

impl Link {
    /// A frame read from `end` joins its direction, or is counted as dropped and its buffer
    /// goes back to `pool`.
    fn take_frame(&mut self, end: usize, arrived: u64, buf: Vec<u8>, pool: &mut Vec<Vec<u8>>) {
        let len = buf.len() as u32;
        if let Err((cause, buf)) = self.dirs[end].offer(arrived, len, buf) {
            self.drops[end].record(cause, &buf);
            pool.push(buf);
        }
    }

    /// The interface was deleted under us (Mininet's teardown): stop reading it.
    fn tap_gone(&mut self, epfd: RawFd, end: usize, fd: RawFd, e: &std::io::Error) {
        emit(Level::Warn, "tap_gone", &[("link", &self.id), ("iface", &self.ends[end].name), ("error", e)]);
        epoll_del(epfd, fd);
        self.ends[end].fd = None;
    }
}

impl Emu {
    pub fn new(epfd: RawFd, state: Option<Arc<Mutex<StateFile>>>, late_bound_ns: u64, io: IoMode) -> Emu {
        let uring = ring_for(io, uring::open);
        Emu {
            epfd,
            links: Vec::new(),
            by_id: HashMap::new(),
            heap: BinaryHeap::new(),
            generation: 0,
            pool: Vec::new(),
            scratch: vec![0u8; uring::FRAME_MAX],
            uring,
            outbox: Vec::new(),
            last_read: Vec::new(),
            state,
            write_errors: 0,
            lateness: Hist::default(),
            late_bound_ns,
            write_time: Hist::default(),
            wake_late: Hist::default(),
            busy: Hist::default(),
        }
    }

    /// How this shard moves frames now.
    pub fn io(&self) -> IoMode {
        if self.uring.is_some() { IoMode::Uring } else { IoMode::Syscalls }
    }

    /// A batch stalled in the ring: one syscall per frame from now on. The ring is kept (not
    /// closed) and so are the buffers it may still use; this happens at most once.
    fn uring_stalled(&mut self, e: &std::io::Error, lent: Vec<Vec<u8>>) {
        emit(Level::Error, "io_fallback", &[("asked", &"uring"), ("using", &"syscalls"), ("reason", &e)]);
        if let Some(u) = self.uring.take() {
            Box::leak(u);
        }
        std::mem::forget(lent);
    }

    pub fn get(&self, id: &str) -> Option<&Link> {
        self.by_id.get(id).and_then(|&i| self.links[i].as_ref())
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Link> {
        let i = *self.by_id.get(id)?;
        self.links[i].as_mut()
    }

    pub fn links(&self) -> impl Iterator<Item = &Link> {
        self.links.iter().flatten()
    }

    /// Take over a link whose TAPs exist; its fds go into the event loop.
    pub fn insert(&mut self, id: String, ends: [End; 2], dirs: [Direction<Vec<u8>>; 2], slots: [u32; 2]) -> Result<(), String> {
        let idx = self.links.iter().position(|l| l.is_none()).unwrap_or(self.links.len());
        for (e, end) in ends.iter().enumerate() {
            let fd = end.fd.as_ref().expect("new link with open TAPs").as_raw_fd();
            let token = TAP_TOKEN_BASE + ((idx as u64) << 1 | e as u64);
            epoll_add_edge(self.epfd, fd, token).map_err(|e| format!("epoll: {e}"))?;
        }
        self.generation = self.generation.wrapping_add(1);
        let link = Link { id: id.clone(), ends, dirs, drops: Default::default(), late: Default::default(), slots, scheduled: [u64::MAX; 2], generation: self.generation };
        if idx == self.links.len() {
            self.links.push(Some(link));
        } else {
            self.links[idx] = Some(link);
        }
        self.by_id.insert(id, idx);
        let now = now_ns();
        self.publish(idx, 0, now);
        self.publish(idx, 1, now);
        Ok(())
    }

    /// Drop a link: its TAPs close (and vanish), its slots are freed.
    pub fn remove(&mut self, id: &str) -> Option<Link> {
        let idx = self.by_id.remove(id)?;
        let mut link = self.links[idx].take()?;
        for end in &link.ends {
            if let Some(fd) = &end.fd {
                epoll_del(self.epfd, fd.as_raw_fd());
            }
        }
        for d in &mut link.dirs {
            self.pool.extend(d.drain());
        }
        if let Some(st) = &self.state {
            let mut st = st.lock().unwrap_or_else(|e| e.into_inner());
            st.release(link.slots[0]);
            st.release(link.slots[1]);
        }
        Some(link)
    }

    /// Publish a direction's queue state (after any change to it).
    pub fn publish(&mut self, idx: usize, d: usize, now: u64) {
        let (Some(st), Some(link)) = (&self.state, &self.links[idx]) else { return };
        let dir = &link.dirs[d];
        let (bytes, pkts) = dir.backlog();
        st.lock().unwrap_or_else(|e| e.into_inner()).publish(
            link.slots[d],
            &Slot {
                tx_free_at_ns: dir.tx_free_at(),
                backlog_bytes: bytes,
                backlog_pkts: pkts,
                queue_limit_pkts: dir.params.queue,
                rate_bps: dir.params.rate_bps,
                updated_ns: now,
            },
        );
    }

    pub fn republish(&mut self, id: &str) {
        if let Some(&idx) = self.by_id.get(id) {
            let now = now_ns();
            self.service(idx, 0, now);
            self.service(idx, 1, now);
        }
    }

    /// Read at most `max` frames from input `i` (`link index << 1 | end`) into its
    /// direction, then write what that direction has due (a zero-delay frame leaves now).
    pub fn read_input(&mut self, i: usize, max: usize) -> Batch {
        let (idx, end) = (i >> 1, i & 1);
        let gone = Batch { frames: 0, drained: true };
        let Some(link) = self.links.get_mut(idx).and_then(|l| l.as_mut()) else { return gone };
        let Some(fd) = link.ends[end].fd.as_ref().map(|f| f.as_raw_fd()) else { return gone };
        let mut batch = Batch { frames: 0, drained: false };
        // One arrival time per batch (at most 16 reads, tens of µs): a frame's true arrival is
        // when the kernel queued it in the TAP, which a clock read at its own read misses too.
        let arrived = now_ns();
        if let Some(u) = self.uring.as_mut() {
            if self.last_read.len() <= i {
                self.last_read.resize(i + 1, 0);
            }
            match u.read(fd, reads_for(self.last_read[i] as usize, max)) {
                Ok(scan) => {
                    for &(k, n) in &scan.frames {
                        let mut buf = self.pool.pop().unwrap_or_default();
                        buf.clear();
                        buf.extend_from_slice(&u.frame(k)[..n]);
                        batch.frames += 1;
                        link.take_frame(end, arrived, buf, &mut self.pool);
                    }
                    self.last_read[i] = batch.frames as u16;
                    // A batch that read nothing leaves the queue, so the pump always moves on.
                    batch.drained = scan.drained || batch.frames == 0;
                    if let Some(errno) = scan.failed {
                        link.tap_gone(self.epfd, end, fd, &std::io::Error::from_raw_os_error(errno));
                        batch.drained = true;
                    }
                }
                Err(e) => {
                    // Reads lend only the ring's own buffers; they stay with the leaked ring.
                    self.uring_stalled(&e, Vec::new());
                    return Batch { frames: 0, drained: false };
                }
            }
            if batch.frames > 0 {
                self.service(idx, end, now_ns());
            }
            return batch;
        }
        while batch.frames < max {
            let mut buf = self.pool.pop().unwrap_or_default();
            match tap::read_frame(fd, &mut buf, &mut self.scratch) {
                Ok(true) => {
                    batch.frames += 1;
                    link.take_frame(end, arrived, buf, &mut self.pool);
                }
                Ok(false) => {
                    self.pool.push(buf);
                    batch.drained = true;
                    break;
                }
                Err(e) => {
                    link.tap_gone(self.epfd, end, fd, &e);
                    self.pool.push(buf);
                    batch.drained = true;
                    break;
                }
            }
        }
        if batch.frames > 0 {
            self.service(idx, end, now_ns());
        }
        batch
    }

    /// Deliver what is due in one direction, publish its state and schedule its next event.
    fn service(&mut self, idx: usize, d: usize, now: u64) {
        let Some(link) = self.links[idx].as_mut() else { return };
        let out = link.ends[1 - d].fd.as_ref().map(|f| f.as_raw_fd());
        let dir = &mut link.dirs[d];
        dir.retire(now);
        if let Some(u) = self.uring.as_mut() {
            // Every due frame in one batch of writes. One clock reading stands for all their
            // write times: the batch enters the kernel once, right after it.
            let mut outbox = std::mem::take(&mut self.outbox);
            let at = now_ns();
            while let Some((frame, up, due)) = dir.pop_due(now) {
                let late_ns = at.saturating_sub(due);
                self.lateness.record_ns(late_ns);
                link.late[d].record_ns(late_ns, self.late_bound_ns);
                if up {
                    outbox.push(frame);
                } else {
                    dir.account(frame.len() as u32, false); // carrier went down in flight
                    link.drops[d].record(Drop::Down, &frame);
                    self.pool.push(frame);
                }
            }
            let mut stalled = None;
            if !outbox.is_empty() {
                match out {
                    Some(fd) => match u.write(fd, &outbox) {
                        Ok(results) => {
                            for (f, &r) in outbox.iter().zip(results) {
                                if write_ok(r, f.len()) {
                                    dir.account(f.len() as u32, true);
                                } else {
                                    self.write_errors += 1;
                                }
                            }
                            // The batch's time shared out over its frames.
                            let each = now_ns().saturating_sub(at) / outbox.len() as u64;
                            for _ in 0..outbox.len() {
                                self.write_time.record_ns(each);
                            }
                        }
                        Err(e) => {
                            self.write_errors += outbox.len() as u64;
                            stalled = Some(e);
                        }
                    },
                    None => self.write_errors += outbox.len() as u64,
                }
            }
            if let Some(e) = stalled {
                // The kernel may still read these frames: they are never reused.
                self.uring_stalled(&e, std::mem::take(&mut outbox));
            } else {
                self.pool.extend(outbox.drain(..));
            }
            self.outbox = outbox;
            self.schedule(idx, d, now);
            return;
        }
        // When the write in progress began: the next clock reading ends it.
        let mut writing: Option<u64> = None;
        while let Some((frame, up, due)) = dir.pop_due(now) {
            // Lateness is taken when the frame is written, not when the batch began: a frame
            // behind slow writes of its batch is late too.
            let at = now_ns();
            if let Some(w) = writing.take() {
                self.write_time.record_ns(at - w);
            }
            let late_ns = at.saturating_sub(due);
            self.lateness.record_ns(late_ns);
            link.late[d].record_ns(late_ns, self.late_bound_ns);
            if !up {
                dir.account(frame.len() as u32, false); // carrier went down in flight
                link.drops[d].record(Drop::Down, &frame);
            } else if out.is_some_and(|fd| tap::write_frame(fd, &frame).is_ok()) {
                dir.account(frame.len() as u32, true);
                // A TAP write runs the receiving stack in this thread: how long it took
                // tells loop stalls from slow writes.
                writing = Some(at);
            } else {
                self.write_errors += 1;
            }
            self.pool.push(frame);
        }
        if let Some(w) = writing {
            self.write_time.record_ns(now_ns().saturating_sub(w));
        }
        self.schedule(idx, d, now);
    }

    /// After a direction's service: its next event into the heap, its state published.
    fn schedule(&mut self, idx: usize, d: usize, now: u64) {
        let Some(link) = self.links[idx].as_mut() else { return };
        let dir = &link.dirs[d];
        if let Some(t) = dir.next_event() {
            if t < link.scheduled[d] {
                link.scheduled[d] = t;
                self.heap.push(Reverse((t, idx as u32, d as u8, link.generation)));
            }
        }
        self.publish(idx, d, now);
    }

    /// Service every direction whose event is due by `now`.
    pub fn run_due(&mut self, now: u64) {
        while let Some(&Reverse((t, idx, d, gen))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            let (idx, d) = (idx as usize, d as usize);
            match self.links[idx].as_mut() {
                Some(l) if l.generation == gen && l.scheduled[d] == t => l.scheduled[d] = u64::MAX,
                _ => continue, // stale: the link is gone or a sooner event replaced this one
            }
            self.service(idx, d, now);
        }
    }

    /// When the loop must wake up next, if anything is pending.
    pub fn next_deadline(&mut self) -> Option<u64> {
        while let Some(&Reverse((t, idx, d, gen))) = self.heap.peek() {
            match self.links[idx as usize].as_ref() {
                Some(l) if l.generation == gen && l.scheduled[d as usize] == t => return Some(t),
                _ => {
                    self.heap.pop();
                }
            }
        }
        None
    }
}

impl pump::Io for Emu {
    fn read(&mut self, i: usize, max: usize) -> Batch {
        self.read_input(i, max)
    }
    fn now(&mut self) -> u64 {
        now_ns()
    }
    fn next_due(&mut self) -> Option<u64> {
        self.next_deadline()
    }
    fn run_due(&mut self, now: u64) {
        Emu::run_due(self, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_that_cannot_be_had_falls_back_to_syscalls() {
        let refused = || Err("io_uring_setup: Operation not permitted (os error 1)".to_string());
        let emu = Emu { uring: ring_for(IoMode::Uring, refused), ..Emu::new(-1, None, 0, IoMode::Syscalls) };
        assert_eq!(emu.io(), IoMode::Syscalls);
        assert!(ring_for(IoMode::Syscalls, || panic!("syscalls never try a ring")).is_none());
        // Where this kernel gives a ring, asking for one gets it.
        if let Ok(u) = uring::open() {
            assert!(ring_for(IoMode::Uring, || Ok(u)).is_some());
        }
    }
}
