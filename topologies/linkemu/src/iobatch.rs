//! How the TAP frames are moved (`--io`), and what a batch of io_uring completions means.
//!
//! `Syscalls` is one read() or write() per frame. `Uring` queues a whole batch (the reads of
//! one pump batch, or the writes a direction has due) on an io_uring and enters the kernel
//! once for it (docs/linkemu.md, "Batched TAP I/O"). Each read is issued with RWF_NOWAIT, so
//! an empty TAP completes it at once with EAGAIN instead of parking it until a frame comes:
//! the batch never outlives the call, and the pump's edge-triggered policy stays as it is.
//!
//! No sockets here: the daemon's ring hands the raw completion results in, in submission
//! order, and the tests make them up.

/// Frames moved per io_uring entry into the kernel, at most: the ring's size. A direction with
/// more frames due is written in several entries.
pub const RING_ENTRIES: u32 = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMode {
    Syscalls,
    Uring,
}

impl IoMode {
    pub fn parse(s: &str) -> Result<IoMode, String> {
        match s {
            "syscalls" => Ok(IoMode::Syscalls),
            "uring" => Ok(IoMode::Uring),
            _ => Err(format!("io {s:?}: want uring or syscalls")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            IoMode::Syscalls => "syscalls",
            IoMode::Uring => "uring",
        }
    }
}

/// One read's completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// A frame of this many bytes.
    Frame(usize),
    /// Nothing was waiting (EAGAIN).
    Empty,
    /// The fd does not take RWF_NOWAIT (EOPNOTSUPP): read it without the flag (O_NONBLOCK then
    /// gives EAGAIN, since such a file cannot park a read).
    NoNowait,
    /// Any other error (errno): the TAP is gone, as a failed read() says today.
    Failed(i32),
}

pub fn read_result(res: i32) -> Read {
    match res {
        n if n >= 0 => Read::Frame(n as usize),
        n if n == -libc::EAGAIN => Read::Empty,
        n if n == -libc::EOPNOTSUPP => Read::NoNowait,
        n => Read::Failed(-n),
    }
}

/// What a batch of reads from one TAP found, its completions taken in submission order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadScan {
    /// (index into the batch, length) of every frame, in the order the kernel handed them out.
    pub frames: Vec<(usize, usize)>,
    /// A read found the TAP empty: it leaves the pump's queue until its next edge. A frame that
    /// came after that read still arrived, is still taken, and raised its own edge.
    pub drained: bool,
    /// The first error other than EAGAIN, if any.
    pub failed: Option<i32>,
    /// Some read refused RWF_NOWAIT: the whole batch must be read again without it.
    pub no_nowait: bool,
}

pub fn scan_reads(results: &[i32]) -> ReadScan {
    let mut s = ReadScan::default();
    for (k, &r) in results.iter().enumerate() {
        match read_result(r) {
            Read::Frame(n) => s.frames.push((k, n)),
            Read::Empty => s.drained = true,
            Read::NoNowait => s.no_nowait = true,
            Read::Failed(e) => {
                s.failed.get_or_insert(e);
            }
        }
    }
    s
}

/// How many reads to queue for an input whose last batch found `last` frames: twice that (a
/// TAP that had k frames waiting likely has about as many again), at least 2 (one frame and
/// the EAGAIN that shows it was the last, so the input can leave the pump's queue after one
/// entry), at most `max` (the pump's batch). A read that finds the TAP empty is not free
/// (the kernel's tun read path, about 0.1-0.2 µs), so a fixed 16 would spend 15 of them on
/// every wake-up that brings one frame, the common case when the emulator keeps up.
pub fn reads_for(last: usize, max: usize) -> usize {
    last.saturating_mul(2).max(2).min(max)
}

/// A write's completion: whether the whole frame of `len` bytes went out.
pub fn write_ok(res: i32, len: usize) -> bool {
    res >= 0 && res as usize == len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_name_round_trip() {
        for m in [IoMode::Syscalls, IoMode::Uring] {
            assert_eq!(IoMode::parse(m.name()), Ok(m));
        }
        assert!(IoMode::parse("epoll").unwrap_err().contains("uring or syscalls"));
    }

    #[test]
    fn a_batch_yields_its_frames_in_order_and_says_when_the_tap_ran_dry() {
        let s = scan_reads(&[64, 1500, 60, -libc::EAGAIN, -libc::EAGAIN]);
        assert_eq!(s.frames, vec![(0, 64), (1, 1500), (2, 60)]);
        assert!(s.drained && s.failed.is_none() && !s.no_nowait);
        // A full batch: the TAP may hold more, it stays queued.
        let s = scan_reads(&[64; 16]);
        assert_eq!(s.frames.len(), 16);
        assert!(!s.drained);
        // A frame that arrived between two reads is taken, and the TAP counts as drained.
        let s = scan_reads(&[64, -libc::EAGAIN, 90]);
        assert_eq!(s.frames, vec![(0, 64), (2, 90)]);
        assert!(s.drained);
    }

    /// A TAP in virtual time: `backlog[v]` frames wait at visit v. Each visit queues
    /// `reads_for` reads; the reads past the backlog find it empty.
    fn visits(backlog: &[usize], max: usize) -> (usize, usize, Vec<bool>) {
        let (mut last, mut reads, mut frames, mut drained) = (0, 0, 0, Vec::new());
        let mut left = 0;
        for &b in backlog {
            left += b;
            let n = reads_for(last, max);
            let results: Vec<i32> = (0..n).map(|k| if k < left { 64 } else { -libc::EAGAIN }).collect();
            let scan = scan_reads(&results);
            left -= scan.frames.len();
            reads += n;
            frames += scan.frames.len();
            drained.push(scan.drained);
            last = scan.frames.len();
        }
        (reads, frames, drained)
    }

    #[test]
    fn read_batches_follow_the_backlog_and_never_strand_a_frame() {
        // One frame per wake-up (the emulator keeps up): two reads each, not sixteen.
        let (reads, frames, drained) = visits(&[1; 100], 16);
        assert_eq!((reads, frames), (200, 100));
        assert!(drained.iter().all(|&d| d), "each wake-up ends empty and leaves the queue");
        // A flood: the batch grows to the pump's 16 within a few visits and stays there.
        let (reads, frames, drained) = visits(&[40; 50], 16);
        assert_eq!(frames, 2 + 4 + 8 + 47 * 16, "every visit after the ramp reads a full batch");
        assert_eq!(reads, frames, "no read wasted while the TAP holds frames");
        assert!(drained.iter().all(|&d| !d), "a TAP that still holds frames stays queued");
        // Whatever the pattern, a visit that leaves frames behind never says drained.
        let pattern: Vec<usize> = (0..300).map(|v| (v * 7919) % 23).collect();
        let mut left = 0;
        let mut last = 0;
        for &b in &pattern {
            left += b;
            let n = reads_for(last, 16);
            let got = n.min(left);
            left -= got;
            let results: Vec<i32> = (0..n).map(|k| if k < got { 64 } else { -libc::EAGAIN }).collect();
            assert!(!scan_reads(&results).drained || left == 0, "stranded {left} frames");
            last = got;
        }
        assert_eq!(reads_for(9, 1), 1, "the pump's budget is the limit");
    }

    #[test]
    fn errors_are_told_apart() {
        let s = scan_reads(&[64, -libc::EBADFD, -libc::EIO]);
        assert_eq!(s.frames, vec![(0, 64)]);
        assert_eq!(s.failed, Some(libc::EBADFD), "the first error is the one reported");
        let s = scan_reads(&[-libc::EOPNOTSUPP, -libc::EOPNOTSUPP]);
        assert!(s.no_nowait && s.frames.is_empty() && !s.drained);
        assert_eq!(read_result(0), Read::Frame(0));
        assert!(write_ok(64, 64));
        assert!(!write_ok(60, 64), "a short write is a failed frame");
        assert!(!write_ok(-libc::EIO, 64));
    }
}
