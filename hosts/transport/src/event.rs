//! Events, their arguments, and the queue of delayed (cancellable) raisings.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::composite::MicroId;

/// The CTP events. Handlers bind to them at a priority; lower numbers run first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Event {
    MsgFromUser,
    SegmentFromUser,
    SegmentToNet,
    SendSegment,
    SegmentSent,
    SegmentFromNet,
    MsgFromNet,
    SegmentReceived,
    SegmentTimeout,
    SegmentLost,
    SegmentDone,
    OpenSession,
    CloseSession,
    /// A microprotocol's private timer: delivered only to the microprotocol that armed it.
    Timer(MicroId),
}

/// Timer tag of the end-of-batch flush `Session::end_batch` raises for Positive ACK (beside
/// its delayed-ACK timer's 0).
pub const FLUSH: u64 = u64::MAX;

/// Timer tag under which `Session::cc_control` hands the application's messages to the
/// congestion-control host (beside the pacing timer's 0).
pub const LOCAL_CC: u64 = u64::MAX - 1;

/// What an event is about: a segment, a user message, or a tag chosen by whoever raised it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arg {
    pub seg: Option<SegId>,
    pub msg: u64,
    pub tag: u64,
}

impl Arg {
    pub fn seg(id: SegId) -> Arg {
        Arg { seg: Some(id), ..Arg::default() }
    }
    pub fn tag(tag: u64) -> Arg {
        Arg { tag, ..Arg::default() }
    }
}

/// A segment's handle in its session's segment table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegId(pub u64);

/// Per-segment barriers. Any microprotocol may hold one; the framework acts when the last
/// holder releases it: Send -> SEND SEGMENT, Done -> SEGMENT DONE, Dealloc -> the segment is freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    Send = 0,
    Done = 1,
    Dealloc = 2,
}

/// Handle of a delayed raising, for cancelling it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId(pub u64);

/// Delayed raisings ordered by due time, then by the order they were made.
#[derive(Default)]
pub struct Delayed {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    live: HashMap<u64, (Event, Arg)>,
    next: u64,
}

impl Delayed {
    pub fn push(&mut self, at: u64, ev: Event, arg: Arg) -> TimerId {
        self.next += 1;
        self.heap.push(Reverse((at, self.next)));
        self.live.insert(self.next, (ev, arg));
        TimerId(self.next)
    }

    /// True when the raising was still pending.
    pub fn cancel(&mut self, id: TimerId) -> bool {
        self.live.remove(&id.0).is_some()
    }

    pub fn next_due(&mut self) -> Option<u64> {
        while let Some(Reverse((at, id))) = self.heap.peek().copied() {
            if self.live.contains_key(&id) {
                return Some(at);
            }
            self.heap.pop(); // cancelled: drop lazily
        }
        None
    }

    /// The earliest raising due at or before `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<(Event, Arg)> {
        let at = self.next_due()?;
        if at > now {
            return None;
        }
        let Reverse((_, id)) = self.heap.pop()?;
        self.live.remove(&id)
    }

    pub fn pending(&self) -> usize {
        self.live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delayed_fire_in_time_order_and_cancelled_never_fire() {
        let mut d = Delayed::default();
        let a = d.push(30, Event::SegmentTimeout, Arg::tag(1));
        d.push(10, Event::SegmentTimeout, Arg::tag(2));
        d.push(20, Event::SegmentTimeout, Arg::tag(3));
        assert!(d.cancel(a));
        assert!(!d.cancel(a));
        assert_eq!(d.next_due(), Some(10));
        assert!(d.pop_due(5).is_none());
        assert_eq!(d.pop_due(100).unwrap().1.tag, 2);
        assert_eq!(d.pop_due(100).unwrap().1.tag, 3);
        assert!(d.pop_due(100).is_none());
        assert_eq!(d.pending(), 0);
    }
}
