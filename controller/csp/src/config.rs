//! Timer settings of one CSP node (docs/protocol.md section 2.8). All times in microseconds.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

#[derive(Clone, Debug)]
pub struct Config {
    /// Hold time this node asks of its upstream node and grants children who ask for 0.
    pub hold_s: u16,
    /// First JOIN retransmission delay; doubles on every try.
    pub join_retry_us: u64,
    pub join_tries: u32,
    /// Chunk request timeout and tries per chunk.
    pub chunk_timeout_us: u64,
    pub chunk_tries: u32,
    /// Chunk requests in flight at once during a spec transfer.
    pub chunk_window: u16,
    /// Most flows this node keeps (RESOURCE_LIMIT beyond).
    pub max_flows: usize,
    /// Most children per flow.
    pub max_children: usize,
    /// How long a child that sent LEAVE still counts (0 = removed at once). Data the child
    /// sent before its LEAVE can arrive after it (data planes reorder flows within a batch);
    /// meanwhile it still merges, with the fan-in that child was part of.
    pub leave_delay_us: u64,
    /// Take a spec only with R's valid signature (section 2.9). Off only for tests and
    /// receivers that predate signing: unsigned specs are then taken until a key is pinned.
    pub verify_specs: bool,
    /// Longest hold time granted to a child, in seconds: a JOIN asking for more gets this
    /// (the JOIN_ACK says so), so one JOIN cannot pin state here for up to 18 hours.
    pub max_hold_s: u16,
    /// Receivers' spec keys known in advance (section 2.9): a flow to such an R starts with
    /// its key pinned, so no first offer can pin another.
    pub receiver_keys: BTreeMap<Ipv4Addr, [u8; 32]>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hold_s: 30,
            join_retry_us: 1_000_000,
            join_tries: 5,
            chunk_timeout_us: 500_000,
            chunk_tries: 5,
            chunk_window: 16,
            max_flows: 10_000,
            max_children: 1024,
            leave_delay_us: 100_000,
            verify_specs: true,
            max_hold_s: 300,
            receiver_keys: BTreeMap::new(),
        }
    }
}

impl Config {
    pub fn hold_us(&self) -> u64 {
        u64::from(self.hold_s) * 1_000_000
    }

    /// Refreshes go out three times per hold time, so one lost refresh never expires state.
    pub fn refresh_us(&self) -> u64 {
        self.hold_us() / 3
    }

    /// The hold time granted for a join that asked for `asked` seconds (0 = default),
    /// at most `max_hold_s` (section 2.2).
    pub fn granted_hold_us(&self, asked: u16) -> u64 {
        let s = if asked == 0 { self.hold_s } else { asked };
        u64::from(s.min(self.max_hold_s.max(self.hold_s))) * 1_000_000
    }
}
