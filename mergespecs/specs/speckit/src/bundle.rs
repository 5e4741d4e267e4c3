//! One open bundle of a flow: the payload being built, the sources in it, when it opened and
//! the timer armed for it. `multiplex` and `gather` keep exactly one per flow (their tag is
//! constant), so it lives in the spec value rather than in a per-slot state.

use concast_sdk::Host;

use crate::buf::FixedBuf;
use crate::sources::SourceSet;

#[derive(Clone, Default)]
pub struct Bundle<const N: usize, const SLOTS: usize> {
    /// The payload so far; a header reserved by [`Bundle::reset`] is written at build time.
    pub buf: FixedBuf<N>,
    /// Sources already in the bundle.
    pub sources: SourceSet<SLOTS>,
    /// Items (records, messages) in the bundle.
    pub items: u32,
    /// Largest TTL among the items (the TTL of what is emitted).
    pub max_ttl: u8,
    opened_at: Option<u64>,
    armed: Option<u64>,
}

impl<const N: usize, const SLOTS: usize> Bundle<N, SLOTS> {
    pub const fn new() -> Self {
        Bundle {
            buf: FixedBuf::new(),
            sources: SourceSet::new(),
            items: 0,
            max_ttl: 0,
            opened_at: None,
            armed: None,
        }
    }

    /// Starts an empty bundle: `header` bytes reserved, at most `limit` bytes in all.
    pub fn reset(&mut self, header: usize, limit: usize) {
        self.buf.reset(header, limit);
        self.sources.clear();
        self.items = 0;
        self.max_ttl = 0;
        self.opened_at = None;
        self.armed = None;
    }

    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// Records that an item arrived at `now`; the first one opens the bundle.
    pub fn note_arrival(&mut self, now: u64, ttl: u8) {
        self.opened_at.get_or_insert(now);
        self.items += 1;
        self.max_ttl = self.max_ttl.max(ttl);
    }

    /// When the first item arrived (the bundle has been held since then).
    pub fn opened_at(&self) -> Option<u64> {
        self.opened_at
    }

    /// Arms the state's timer at `at` unless it is already armed there (one host call saved
    /// per datagram when the deadline does not move).
    pub fn arm(&mut self, host: &mut impl Host, at: u64) {
        if self.armed != Some(at) {
            host.set_timer(at);
            self.armed = Some(at);
        }
    }
}
