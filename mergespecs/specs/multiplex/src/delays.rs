//! The MplexHdr delay fields of a bundle (docs/protocol.md section 3.2) and the deadline
//! they set at this node.

use concast_sdk::wire::mplex::HeaderRepr;

/// The delay fields one arriving packet brings (a plain datagram brings the flow's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delays {
    pub max_total: u32,
    pub delayed_so_far: u32,
    pub max_local: u32,
}

/// The packet with the least remaining time, remembered with when it arrived here.
#[derive(Debug, Clone, Copy)]
struct Tightest {
    /// When its total budget runs out, on this node's clock.
    deadline: u64,
    arrived: u64,
    max_total: u32,
    delayed_so_far: u32,
}

/// The delay fields of an open bundle, folded packet by packet.
#[derive(Debug, Clone, Copy)]
pub struct BundleDelays {
    max_local: u32,
    tightest: Option<Tightest>,
}

impl Default for BundleDelays {
    fn default() -> Self {
        Self::new()
    }
}

impl BundleDelays {
    pub const fn new() -> BundleDelays {
        BundleDelays {
            max_local: u32::MAX,
            tightest: None,
        }
    }

    /// Folds in a packet that arrived at `now`. Remaining times are compared as absolute
    /// deadlines, so packets that arrived at different times compare fairly; ties keep the
    /// first.
    pub fn fold(&mut self, d: Delays, now: u64) {
        self.max_local = self.max_local.min(d.max_local);
        let deadline = now + u64::from(d.max_total.saturating_sub(d.delayed_so_far));
        if self.tightest.is_none_or(|t| deadline < t.deadline) {
            self.tightest = Some(Tightest {
                deadline,
                arrived: now,
                max_total: d.max_total,
                delayed_so_far: d.delayed_so_far,
            });
        }
    }

    /// When the bundle, open since `opened_at`, must leave: MaxLocalDelay after it opened or
    /// when the tightest packet's total budget is spent, whichever is first.
    pub fn deadline(&self, opened_at: u64) -> u64 {
        let local = opened_at.saturating_add(u64::from(self.max_local));
        self.tightest.map_or(local, |t| local.min(t.deadline))
    }

    /// When the tightest packet's total budget is spent (the latest the bundle may leave).
    pub fn budget_deadline(&self) -> Option<u64> {
        self.tightest.map(|t| t.deadline)
    }

    /// The MplexHdr of the bundle sent at `now`: DelayedSoFar grows by the time the tightest
    /// packet was held here.
    pub fn header(&self, now: u64, initial_ttl: u8) -> HeaderRepr {
        let t = self.tightest.unwrap_or(Tightest {
            deadline: now,
            arrived: now,
            max_total: 0,
            delayed_so_far: 0,
        });
        let held = u32::try_from(now.saturating_sub(t.arrived)).unwrap_or(u32::MAX);
        HeaderRepr {
            initial_ttl,
            max_total_delay: t.max_total,
            delayed_so_far: t.delayed_so_far.saturating_add(held),
            max_local_delay: if self.tightest.is_some() {
                self.max_local
            } else {
                0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn d(max_total: u32, delayed_so_far: u32, max_local: u32) -> Delays {
        Delays {
            max_total,
            delayed_so_far,
            max_local,
        }
    }

    #[test]
    fn local_is_the_minimum_and_total_comes_from_the_least_remaining() {
        let mut b = BundleDelays::new();
        b.fold(d(10_000, 1_000, 5_000), 100); // 9,000 left: runs out at 9,100
        b.fold(d(8_000, 500, 3_000), 400); // 7,500 left: runs out at 7,900 (tightest)
        b.fold(d(20_000, 12_600, 4_000), 500); // 7,400 left: runs out at 7,900 too (tie: first)
        assert_eq!(b.deadline(100), 100 + 3_000);
        let h = b.header(2_400, 60);
        assert_eq!(
            (
                h.max_local_delay,
                h.max_total_delay,
                h.delayed_so_far,
                h.initial_ttl
            ),
            (3_000, 8_000, 500 + 2_000, 60)
        );
    }

    #[test]
    fn the_total_budget_can_be_the_earlier_deadline() {
        let mut b = BundleDelays::new();
        b.fold(d(5_000, 4_900, 2_000), 1_000);
        assert_eq!(b.deadline(1_000), 1_100);
        b.fold(d(5_000, 6_000, 2_000), 1_050); // overdue upstream: leave at once
        assert_eq!(b.deadline(1_000), 1_050);
        assert_eq!(b.header(1_050, 1).delayed_so_far, 6_000);
    }
}
