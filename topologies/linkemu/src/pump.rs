//! Which input to read next, and when to stop reading and write what has come due.
//!
//! The emulator's inputs are TAP fds registered edge-triggered: an input that epoll reported
//! joins a round-robin queue and stays in it until a read finds it empty. One round reads at
//! most `per_input` frames from each queued input in turn and at most `per_round` in all, and
//! before each input's batch it writes every frame whose due time has passed. So a due frame
//! waits for at most one input's batch (plus the writes due before it), not for a sweep over
//! every readable input; and an input that is always busy neither starves the others (it goes
//! to the back of the queue) nor the control socket (a round ends, epoll is asked again).
//!
//! No clock and no sockets: the daemon implements `Io` over its TAPs, and the tests drive it
//! in virtual time.

use std::collections::VecDeque;

/// Frames read from one input before the next input, or the due frames, get their turn.
pub const PER_INPUT: usize = 16;
/// Frames read in one round, at most, before the loop asks epoll again (control requests,
/// newly readable inputs).
pub const PER_ROUND: usize = 256;

/// What one read batch found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    pub frames: usize,
    /// The input is empty (a read would block) or gone: it leaves the queue until its next edge.
    pub drained: bool,
}

pub trait Io {
    /// Read at most `max` frames from input `i` into its link direction.
    fn read(&mut self, i: usize, max: usize) -> Batch;
    fn now(&mut self) -> u64;
    /// The earliest pending event (a frame due, a transmission ending), if any.
    fn next_due(&mut self) -> Option<u64>;
    /// Write every frame due by `now`.
    fn run_due(&mut self, now: u64);
}

pub struct Pump {
    queue: VecDeque<usize>,
    queued: Vec<bool>,
    per_input: usize,
    per_round: usize,
}

impl Default for Pump {
    fn default() -> Self {
        Pump::new(PER_INPUT, PER_ROUND)
    }
}

impl Pump {
    pub fn new(per_input: usize, per_round: usize) -> Pump {
        assert!(per_input > 0 && per_round >= per_input);
        Pump { queue: VecDeque::new(), queued: Vec::new(), per_input, per_round }
    }

    /// Input `i` became readable: it joins the back of the queue unless it is in it already.
    pub fn ready(&mut self, i: usize) {
        if i >= self.queued.len() {
            self.queued.resize(i + 1, false);
        }
        if !self.queued[i] {
            self.queued[i] = true;
            self.queue.push_back(i);
        }
    }

    /// No input is known to hold frames: the loop may block in epoll.
    pub fn idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// One round of reads, with the due frames written before each batch and at the end.
    /// Returns the frames read.
    pub fn round(&mut self, io: &mut impl Io) -> usize {
        let mut budget = self.per_round;
        let mut read = 0;
        // Ends: every visit either reads a frame (budget) or drops the input from the queue.
        while budget > 0 {
            let Some(i) = self.queue.pop_front() else { break };
            write_due(io);
            let b = io.read(i, self.per_input.min(budget));
            budget = budget.saturating_sub(b.frames);
            read += b.frames;
            if b.drained {
                self.queued[i] = false;
            } else {
                self.queue.push_back(i);
            }
        }
        write_due(io);
        read
    }
}

fn write_due(io: &mut impl Io) {
    let now = io.now();
    if io.next_due().is_some_and(|t| t <= now) {
        io.run_due(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1000;

    /// Inputs that always hold frames, each read costing `read_ns` of virtual time per frame;
    /// one frame due at `due`, written (and timed) by run_due.
    struct Busy {
        t: u64,
        read_ns: u64,
        reads: Vec<usize>,
        due: Option<u64>,
        written_at: Option<u64>,
        /// Inputs that run dry after this many frames (None: never).
        supply: Vec<Option<usize>>,
    }

    impl Busy {
        fn new(inputs: usize, read_ns: u64) -> Busy {
            Busy { t: 0, read_ns, reads: vec![0; inputs], due: None, written_at: None, supply: vec![None; inputs] }
        }
    }

    impl Io for Busy {
        fn read(&mut self, i: usize, max: usize) -> Batch {
            let left = self.supply[i].map(|s| s - self.reads[i]).unwrap_or(usize::MAX);
            let n = max.min(left);
            self.reads[i] += n;
            self.t += n as u64 * self.read_ns;
            Batch { frames: n, drained: n < max || left == n }
        }
        fn now(&mut self) -> u64 {
            self.t
        }
        fn next_due(&mut self) -> Option<u64> {
            self.due
        }
        fn run_due(&mut self, now: u64) {
            if self.due.is_some_and(|d| d <= now) {
                self.due = None;
                self.written_at = Some(now);
            }
        }
    }

    #[test]
    fn a_due_frame_waits_for_one_batch_not_for_every_busy_input() {
        // 256 busy TAPs at 2 us a frame (the old loop: 64 frames from each before writing,
        // so a frame due just after the sweep began waited 256 x 64 x 2 us = 33 ms).
        // Due at moments spread over many batches: each is written when the batch it fell
        // in ends.
        let mut io = Busy::new(256, 2 * US);
        let mut p = Pump::default();
        (0..256).for_each(|i| p.ready(i));
        for k in 0..50u64 {
            let due = io.t + 1 + k * 7 * US;
            io.due = Some(due);
            io.written_at = None;
            while io.written_at.is_none() {
                p.round(&mut io);
            }
            let late = io.written_at.unwrap() - due;
            assert!(late <= PER_INPUT as u64 * 2 * US, "frame {k} written {late} ns late");
        }
    }

    #[test]
    fn one_busy_input_is_read_in_batches_up_to_the_round_budget() {
        let mut io = Busy::new(1, US);
        let mut p = Pump::default();
        p.ready(0);
        io.due = Some(40 * US);
        assert_eq!(p.round(&mut io), PER_ROUND);
        // The frame due mid-round was written when its batch ended, not when the round did.
        assert_eq!(io.written_at, Some(48 * US));
    }

    #[test]
    fn a_round_is_bounded_and_busy_inputs_take_turns() {
        let mut io = Busy::new(100, US);
        let mut p = Pump::default();
        (0..100).for_each(|i| p.ready(i));
        for _ in 0..50 {
            let n = p.round(&mut io);
            assert_eq!(n, PER_ROUND, "every round reads its budget and no more");
        }
        // 50 rounds x 256 frames over 100 always-busy inputs, round robin: each got 128.
        let (lo, hi) = (io.reads.iter().min().unwrap(), io.reads.iter().max().unwrap());
        assert!(hi - lo <= PER_INPUT, "unfair: {lo}..{hi} frames per input");
        assert!(!p.idle());
    }

    #[test]
    fn drained_inputs_leave_the_queue_until_they_are_ready_again() {
        let mut io = Busy::new(3, US);
        io.supply = vec![Some(5), Some(40), Some(0)];
        let mut p = Pump::default();
        for i in [0, 1, 2, 1, 0] {
            p.ready(i); // repeated edges do not queue an input twice
        }
        // Input 1 comes round again within the round until it is empty.
        assert_eq!(p.round(&mut io), 5 + 16 + 16 + 8);
        assert_eq!(io.reads, vec![5, 40, 0]);
        assert!(p.idle(), "every input drained");
        assert_eq!(p.round(&mut io), 0);
        io.supply[2] = Some(3);
        p.ready(2);
        assert_eq!(p.round(&mut io), 3);
        assert!(p.idle());
    }
}
