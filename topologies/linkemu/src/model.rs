//! One direction of a link in virtual time: random loss at the entrance, a drop-tail FIFO in
//! front of a transmitter at a fixed rate, then a propagation delay. No clock and no sockets:
//! the daemon passes the time in, and the tests drive it with made-up times.
//!
//! The queue holds the frames the transmitter has not finished sending (the one being sent
//! included), so a burst into an idle link keeps exactly `queue` frames and drops the rest.

use std::collections::VecDeque;

use crate::hist::Hist;
use crate::params::Params;
use crate::rng::Rng;

/// Frames waiting out the propagation delay, per direction, at most (memory bound when the
/// rate is unlimited and nothing else limits them).
pub const LINE_CAP: usize = 200_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drop {
    Down,
    Loss,
    Queue,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub frames_in: u64,
    pub bytes_in: u64,
    pub delivered: u64,
    pub bytes_delivered: u64,
    pub dropped_queue: u64,
    pub dropped_loss: u64,
    pub dropped_down: u64,
    pub max_backlog: u32,
}

pub struct Direction<F> {
    pub params: Params,
    pub up: bool,
    rng: Rng,
    /// When the transmitter will have sent everything queued (ns).
    tx_free_at: u64,
    /// (time its transmission ends, length) of each frame in the drop-tail queue.
    txq: VecDeque<(u64, u32)>,
    backlog_bytes: u64,
    /// (delivery time, frame), in delivery order.
    line: VecDeque<(u64, F)>,
    last_delivery: u64,
    pub counters: Counters,
    pub qdelay: Hist,
}

fn serialisation_ns(len: u32, rate_bps: u64) -> u64 {
    if rate_bps == 0 {
        return 0;
    }
    (len as u128 * 8 * 1_000_000_000).div_ceil(rate_bps as u128) as u64
}

impl<F> Direction<F> {
    pub fn new(params: Params, seed: u64) -> Self {
        Direction {
            params,
            up: true,
            rng: Rng::new(seed),
            tx_free_at: 0,
            txq: VecDeque::new(),
            backlog_bytes: 0,
            line: VecDeque::new(),
            last_delivery: 0,
            counters: Counters::default(),
            qdelay: Hist::default(),
        }
    }

    /// A frame of `len` bytes arrives at `now`: queued for delivery, or handed back with why
    /// it was dropped (the caller recycles its buffer).
    pub fn offer(&mut self, now: u64, len: u32, frame: F) -> Result<(), (Drop, F)> {
        let c = &mut self.counters;
        c.frames_in += 1;
        c.bytes_in += len as u64;
        if !self.up {
            c.dropped_down += 1;
            return Err((Drop::Down, frame));
        }
        if self.params.loss > 0.0 && self.rng.next_f64() < self.params.loss {
            c.dropped_loss += 1;
            return Err((Drop::Loss, frame));
        }
        self.retire(now);
        let sent = if self.params.rate_bps > 0 {
            if self.txq.len() >= self.params.queue as usize {
                self.counters.dropped_queue += 1;
                return Err((Drop::Queue, frame));
            }
            let start = self.tx_free_at.max(now);
            self.qdelay.record_ns(start - now);
            self.tx_free_at = start + serialisation_ns(len, self.params.rate_bps);
            self.txq.push_back((self.tx_free_at, len));
            self.backlog_bytes += len as u64;
            self.counters.max_backlog = self.counters.max_backlog.max(self.txq.len() as u32);
            self.tx_free_at
        } else {
            now
        };
        if self.line.len() >= LINE_CAP {
            self.counters.dropped_queue += 1;
            return Err((Drop::Queue, frame));
        }
        // A link never reorders, even when `set` shortens the delay under frames in flight.
        let at = (sent + self.params.delay_ns).max(self.last_delivery);
        self.last_delivery = at;
        self.line.push_back((at, frame));
        Ok(())
    }

    /// Forget the frames whose transmission has ended by `now`.
    pub fn retire(&mut self, now: u64) {
        while let Some(&(done, len)) = self.txq.front() {
            if done > now {
                break;
            }
            self.txq.pop_front();
            self.backlog_bytes -= len as u64;
        }
    }

    /// The next frame due by `now`, whether it may be delivered (the link is up) and when it
    /// was due (so the daemon can measure how late it is).
    pub fn pop_due(&mut self, now: u64) -> Option<(F, bool, u64)> {
        match self.line.front() {
            Some(&(at, _)) if at <= now => {
                let (_, f) = self.line.pop_front().unwrap();
                Some((f, self.up, at))
            }
            _ => None,
        }
    }

    /// Count a frame pop_due handed out: delivered, or dropped because the link went down.
    pub fn account(&mut self, len: u32, delivered: bool) {
        if delivered {
            self.counters.delivered += 1;
            self.counters.bytes_delivered += len as u64;
        } else {
            self.counters.dropped_down += 1;
        }
    }

    /// When something next changes: a transmission ends or a frame is due.
    pub fn next_event(&self) -> Option<u64> {
        let tx = self.txq.front().map(|&(t, _)| t);
        let line = self.line.front().map(|&(t, _)| t);
        match (tx, line) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn tx_free_at(&self) -> u64 {
        self.tx_free_at
    }

    pub fn backlog(&self) -> (u64, u32) {
        (self.backlog_bytes, self.txq.len() as u32)
    }

    pub fn in_flight(&self) -> usize {
        self.line.len()
    }

    /// Hand back every frame still held (link deleted), so buffers can be reused.
    pub fn drain(&mut self) -> impl Iterator<Item = F> + '_ {
        self.txq.clear();
        self.backlog_bytes = 0;
        self.line.drain(..).map(|(_, f)| f)
    }
}
