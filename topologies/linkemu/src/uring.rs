//! The TAPs' batched I/O over io_uring (`--io uring`): the reads of one pump batch, or the
//! writes one direction has due, go to the kernel in one `io_uring_enter`, where the
//! syscall path makes one read() or write() per frame. What the completions mean is
//! `concast_linkemu::iobatch`'s; this is the ring.
//!
//! Every batch is complete when the call returns: reads carry RWF_NOWAIT (an empty TAP
//! answers EAGAIN at once), a TAP write does not block, so no buffer is ever lent to the
//! kernel past the call, and the event loop (epoll, timerfd, pump) is the one of the
//! syscall path.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use concast_linkemu::iobatch::{self, ReadScan, RING_ENTRIES};
use io_uring::{opcode, types, IoUring, Probe};

/// The largest frame a read takes (what the syscall path's scratch buffer holds).
pub const FRAME_MAX: usize = 65536;

/// Longest wait for a batch's completions. They are all in when the entry returns (nothing
/// in a batch can park); one still missing after this means the kernel parked an entry, and
/// the shard goes back to syscalls rather than stall its links.
const STALL: Duration = Duration::from_millis(200);

/// The position argument meaning "the file's own", as read() and write() use.
const CUR_POS: u64 = u64::MAX;

pub struct Uring {
    ring: IoUring,
    /// One buffer per read of a batch.
    bufs: Vec<Vec<u8>>,
    /// The last batch's completion results, by submission index.
    results: Vec<i32>,
    /// Reads carry RWF_NOWAIT until a TAP refuses it (a file without FMODE_NOWAIT, whose
    /// O_NONBLOCK then gives EAGAIN by itself).
    nowait: bool,
}

/// A ring, or why this kernel (or its seccomp policy, or io_uring_disabled) gives none.
pub fn open() -> Result<Uring, String> {
    let ring = IoUring::new(RING_ENTRIES).map_err(|e| format!("io_uring_setup: {e}"))?;
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe).map_err(|e| format!("io_uring probe: {e}"))?;
    for (code, name) in [(opcode::Read::CODE, "READ"), (opcode::Write::CODE, "WRITE")] {
        if !probe.is_supported(code) {
            return Err(format!("io_uring without IORING_OP_{name}"));
        }
    }
    Ok(Uring { ring, bufs: Vec::new(), results: Vec::new(), nowait: true })
}

impl Uring {
    /// Read at most `max` frames from `fd` in one entry. The frames the scan lists are in
    /// `frame(k)`. Err only when the batch stalled (see `STALL`).
    pub fn read(&mut self, fd: RawFd, max: usize) -> io::Result<ReadScan> {
        let max = max.clamp(1, RING_ENTRIES as usize);
        while self.bufs.len() < max {
            self.bufs.push(vec![0u8; FRAME_MAX]);
        }
        loop {
            let flags = if self.nowait { libc::RWF_NOWAIT } else { 0 };
            {
                let mut sq = self.ring.submission();
                for (k, b) in self.bufs[..max].iter_mut().enumerate() {
                    let e = opcode::Read::new(types::Fd(fd), b.as_mut_ptr(), b.len() as u32).offset(CUR_POS).rw_flags(flags).build().user_data(k as u64);
                    // The queue is empty between batches and a batch is at most its size.
                    unsafe { sq.push(&e) }.expect("room in the submission queue");
                }
            }
            self.results.clear();
            self.complete(max)?;
            let scan = iobatch::scan_reads(&self.results);
            if scan.no_nowait && self.nowait && scan.frames.is_empty() {
                self.nowait = false;
                continue;
            }
            return Ok(scan);
        }
    }

    /// Frame `k` of the last read batch (its length is in the scan).
    pub fn frame(&self, k: usize) -> &[u8] {
        &self.bufs[k]
    }

    /// Write `frames` to `fd`, in order, in as few entries as the ring's size allows; each
    /// frame's completion result, by index. Err only when a batch stalled: then whether its
    /// frames went out is unknown, and the kernel may still read them.
    pub fn write<F: AsRef<[u8]>>(&mut self, fd: RawFd, frames: &[F]) -> io::Result<&[i32]> {
        self.results.clear();
        for chunk in frames.chunks(RING_ENTRIES as usize) {
            let base = self.results.len();
            {
                let mut sq = self.ring.submission();
                for (k, f) in chunk.iter().enumerate() {
                    let f = f.as_ref();
                    let e = opcode::Write::new(types::Fd(fd), f.as_ptr(), f.len() as u32).offset(CUR_POS).build().user_data((base + k) as u64);
                    unsafe { sq.push(&e) }.expect("room in the submission queue");
                }
            }
            self.complete(chunk.len())?;
        }
        Ok(&self.results)
    }

    /// Submit what is queued and wait for its `n` completions, appended to `results` by
    /// their index.
    fn complete(&mut self, n: usize) -> io::Result<()> {
        let base = self.results.len();
        self.results.resize(base + n, i32::MIN);
        let ts = types::Timespec::from(STALL);
        let args = types::SubmitArgs::new().timespec(&ts);
        let mut got = 0;
        loop {
            let waited = self.ring.submitter().submit_with_args(n - got, &args);
            for cqe in self.ring.completion() {
                let k = cqe.user_data() as usize;
                if let Some(r) = self.results.get_mut(k) {
                    *r = cqe.result();
                    got += 1;
                }
            }
            if got >= n {
                return Ok(());
            }
            match waited {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, format!("{} of {n} io_uring completions after {STALL:?}", got)))
                }
                Err(e) => return Err(e),
                Ok(_) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Over a SOCK_SEQPACKET socket pair, which keeps frame boundaries and says EAGAIN when
    //! empty as a TAP does; needs no root. Skipped (with the reason) where there is no ring.
    use super::*;
    use concast_linkemu::iobatch::write_ok;

    fn pair() -> (RawFd, RawFd) {
        let mut fds = [0; 2];
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
        assert_eq!(r, 0, "socketpair: {}", io::Error::last_os_error());
        (fds[0], fds[1])
    }

    fn ring() -> Option<Uring> {
        match open() {
            Ok(u) => Some(u),
            Err(why) => {
                eprintln!("skipped: no io_uring here ({why})");
                None
            }
        }
    }

    fn frame(i: usize) -> Vec<u8> {
        (0..60 + i * 7).map(|b| (b + i) as u8).collect()
    }

    #[test]
    fn a_read_batch_takes_every_waiting_frame_in_order_and_stops_at_empty() {
        let Some(mut u) = ring() else { return };
        let (a, b) = pair();
        for i in 0..5 {
            let f = frame(i);
            assert_eq!(unsafe { libc::write(a, f.as_ptr() as *const _, f.len()) }, f.len() as isize);
        }
        let scan = u.read(b, 16).unwrap();
        assert_eq!(scan.frames.len(), 5);
        assert!(scan.drained && scan.failed.is_none());
        for (i, &(k, n)) in scan.frames.iter().enumerate() {
            assert_eq!(&u.frame(k)[..n], &frame(i)[..], "frame {i}");
        }
        // A full batch leaves the rest for the next one.
        for i in 0..20 {
            let f = frame(i);
            unsafe { libc::write(a, f.as_ptr() as *const _, f.len()) };
        }
        let first = u.read(b, 16).unwrap();
        assert_eq!((first.frames.len(), first.drained), (16, false));
        let rest = u.read(b, 16).unwrap();
        assert_eq!((rest.frames.len(), rest.drained), (4, true));
        assert_eq!(&u.frame(rest.frames[3].0)[..rest.frames[3].1], &frame(19)[..]);
        // An empty socket: nothing, drained, and the call did not wait.
        let empty = u.read(b, 16).unwrap();
        assert!(empty.frames.is_empty() && empty.drained);
        unsafe { libc::close(a) };
        unsafe { libc::close(b) };
    }

    #[test]
    fn a_write_batch_larger_than_the_ring_arrives_whole_and_in_order() {
        let Some(mut u) = ring() else { return };
        let (a, b) = pair();
        let n = RING_ENTRIES as usize + 44;
        let frames: Vec<Vec<u8>> = (0..n).map(|i| frame(i % 50)).collect();
        // The socket's buffer must hold them all: they are read only afterwards.
        let big: libc::c_int = 8 << 20;
        unsafe { libc::setsockopt(a, libc::SOL_SOCKET, libc::SO_SNDBUF, &big as *const _ as *const _, 4) };
        unsafe { libc::setsockopt(b, libc::SOL_SOCKET, libc::SO_RCVBUF, &big as *const _ as *const _, 4) };
        let res = u.write(a, &frames).unwrap().to_vec();
        assert_eq!(res.len(), n);
        let ok = res.iter().zip(&frames).filter(|(&r, f)| write_ok(r, f.len())).count();
        let mut buf = vec![0u8; FRAME_MAX];
        for (i, f) in frames.iter().enumerate().take(ok) {
            let got = unsafe { libc::read(b, buf.as_mut_ptr() as *mut _, buf.len()) };
            assert_eq!(&buf[..got as usize], &f[..], "frame {i} out of order or damaged");
        }
        assert_eq!(ok, n, "every frame written (results {:?})", &res[..8]);
        unsafe { libc::close(a) };
        unsafe { libc::close(b) };
    }

    #[test]
    fn a_bad_fd_is_an_error_not_a_frame() {
        // What a TAP deleted under the daemon looks like to the loop.
        let Some(mut u) = ring() else { return };
        // No such fd (a closed one could be reused by a test running beside this one).
        let b: RawFd = 999_999;
        let scan = u.read(b, 4).unwrap();
        assert!(scan.frames.is_empty());
        assert_eq!(scan.failed, Some(libc::EBADF));
        assert_eq!(u.write(b, &[frame(0)]).unwrap(), &[-libc::EBADF]);
    }
}
