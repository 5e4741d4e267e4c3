//! The sending-period gate of the congestion hosts (Windowed and Rate-based Congestion): one
//! segment may leave every period, the algorithm's `pkt_snd_period_us`.
//!
//! A slot is due one period (the current one) after the last, so a period that shrinks (an
//! RTT sample, a rate message) takes effect at once. Credit for missed slots depends on why
//! they were missed. While a ready segment waited for its slot, a wake-up later than the slot
//! is the scheduler's lateness (a timed wait ends late, the process is not run at once): the
//! missed slots are sent at once, up to `CATCH_UP_US` of them, as UDT's sender carries its
//! lateness into the next intervals. With one period of credit a sender woken every period +
//! 50 µs sent at 2/3 of 300 Mbit/s (UDP Blast, issue #23). After the sender stopped for
//! anything else (nothing to send, a full window), one period: idle time banks no burst.
use crate::composite::MicroId;
use crate::event::TimerId;
use crate::session::Cx;

/// The most lateness a paced sender catches up (*ours*): a burst of at most 2 ms at the
/// sending rate after a late wake-up.
pub const CATCH_UP_US: f64 = 2_000.0;

pub struct Pacer {
    owner: MicroId,
    last_slot: f64,
    /// When the pending pacing timer fires.
    due_at: f64,
    timer: Option<TimerId>,
    /// A ready segment waits for its slot, and nothing else has stopped the sending since.
    backlog: bool,
}

impl Pacer {
    pub fn new(owner: MicroId) -> Pacer {
        Pacer { owner, last_slot: f64::NEG_INFINITY, due_at: 0.0, timer: None, backlog: false }
    }

    /// May a ready segment leave now, at `period` µs a segment? If so its slot is taken; if
    /// not, a timer is armed (or kept, when it fires sooner) for the owner at the slot.
    pub fn admit(&mut self, period: f64, cx: &mut Cx) -> bool {
        let now = cx.now as f64;
        let due = self.last_slot + period;
        if now < due {
            if self.timer.is_none() || due < self.due_at {
                if let Some(t) = self.timer.take() {
                    cx.cancel(t);
                }
                let wait = (due - now).ceil() as u64;
                self.timer = Some(cx.timer(self.owner, wait, 0));
                self.due_at = now + wait as f64;
            }
            self.backlog = true;
            return false;
        }
        let credit = if self.backlog { CATCH_UP_US.max(period) } else { period };
        self.last_slot = due.max(now - credit);
        true
    }

    /// The sender stopped for something other than its period: until a segment waits for a
    /// slot again, the time is idle, not lateness.
    pub fn stopped(&mut self) {
        self.backlog = false;
    }

    /// The owner's pacing timer fired (its other timers carry their own tags).
    pub fn fired(&mut self) {
        self.timer = None;
    }
}
