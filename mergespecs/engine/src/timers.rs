//! A hashed timer wheel driven by the caller's clock (real time in daemons, virtual time in
//! tests and the offline runner). One timer per merge state; timers fire exactly at or after
//! their deadline, in deadline order, when the caller advances the clock past it.

/// Which state a timer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TimerKey {
    pub flow: u32,
    pub slot: u32,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    deadline: u64,
    /// The tick this entry is filed under (its deadline's tick, or the current one if that
    /// had already passed when it was set).
    tick: u64,
    key: TimerKey,
}

pub(crate) struct TimerWheel {
    slot_us: u64,
    buckets: Vec<Vec<Entry>>,
    /// Every tick before this one has been swept.
    cursor: u64,
    len: usize,
}

const BUCKETS: usize = 1024;

impl TimerWheel {
    pub fn new(slot_us: u64, now: u64) -> TimerWheel {
        let slot_us = slot_us.max(1);
        TimerWheel {
            slot_us,
            buckets: vec![Vec::new(); BUCKETS],
            cursor: now / slot_us,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Files a timer; returns the tick it is filed under (needed to cancel it).
    pub fn insert(&mut self, key: TimerKey, deadline: u64) -> u64 {
        let tick = (deadline / self.slot_us).max(self.cursor);
        self.buckets[(tick % BUCKETS as u64) as usize].push(Entry {
            deadline,
            tick,
            key,
        });
        self.len += 1;
        tick
    }

    pub fn cancel(&mut self, key: TimerKey, tick: u64) {
        let bucket = &mut self.buckets[(tick % BUCKETS as u64) as usize];
        if let Some(i) = bucket.iter().position(|e| e.key == key) {
            bucket.swap_remove(i);
            self.len -= 1;
        }
    }

    /// Removes every timer due at `now` and returns them in (deadline, key) order.
    pub fn expire(&mut self, now: u64, due: &mut Vec<(u64, TimerKey)>) {
        due.clear();
        let target = now / self.slot_us;
        if self.len > 0 && target >= self.cursor {
            let ticks = (target - self.cursor + 1).min(BUCKETS as u64);
            for t in self.cursor..self.cursor + ticks {
                let bucket = &mut self.buckets[(t % BUCKETS as u64) as usize];
                let mut i = 0;
                while i < bucket.len() {
                    if bucket[i].deadline <= now {
                        let e = bucket.swap_remove(i);
                        due.push((e.deadline, e.key));
                    } else {
                        i += 1;
                    }
                }
            }
            self.len -= due.len();
            due.sort_unstable();
        }
        // The current tick stays unswept: later deadlines in it are not due yet.
        self.cursor = self.cursor.max(target);
    }

    /// The earliest deadline, exact (scans at most one revolution plus, if nothing is that
    /// close, every entry).
    pub fn next_deadline(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        for t in self.cursor..self.cursor + BUCKETS as u64 {
            let bucket = &self.buckets[(t % BUCKETS as u64) as usize];
            if let Some(d) = bucket
                .iter()
                .filter(|e| e.tick == t)
                .map(|e| e.deadline)
                .min()
            {
                return Some(d);
            }
        }
        self.buckets.iter().flatten().map(|e| e.deadline).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(slot: u32) -> TimerKey {
        TimerKey { flow: 0, slot }
    }

    #[test]
    fn fires_in_deadline_order_across_revolutions() {
        let mut w = TimerWheel::new(100, 0);
        w.insert(key(1), 250_000); // several revolutions away
        w.insert(key(2), 150);
        let t3 = w.insert(key(3), 149);
        w.insert(key(4), 10);
        let mut due = Vec::new();
        assert_eq!(w.next_deadline(), Some(10));
        w.expire(149, &mut due);
        assert_eq!(due, vec![(10, key(4)), (149, key(3))]);
        assert_eq!(w.next_deadline(), Some(150));
        w.cancel(key(2), 1);
        assert_eq!(w.next_deadline(), Some(250_000));
        w.expire(249_999, &mut due);
        assert!(due.is_empty());
        w.expire(1_000_000, &mut due);
        assert_eq!(due, vec![(250_000, key(1))]);
        assert_eq!(w.len(), 0);
        let _ = t3;
    }

    #[test]
    fn a_past_deadline_fires_on_the_next_sweep() {
        let mut w = TimerWheel::new(100, 5_000);
        w.insert(key(7), 10);
        assert_eq!(w.next_deadline(), Some(10));
        let mut due = Vec::new();
        w.expire(5_000, &mut due);
        assert_eq!(due, vec![(10, key(7))]);
    }
}
