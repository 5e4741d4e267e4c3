//! Downstream nodes that joined a flow here, each with its soft-state hold timer.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// A JOIN (or a REFRESH taken as one) not answered yet: what an answer copies (2.1-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Asked {
    pub seq: u32,
    /// The type of the message answered: 1 (JOIN) or 3 (REFRESH).
    pub typ: u8,
}

#[derive(Clone, Debug)]
pub struct Child {
    pub expires_at: u64,
    /// The JOIN (or REFRESH taken as a JOIN) not yet answered.
    pub unanswered: Option<Asked>,
    /// It sent LEAVE; `expires_at` is then the end of its leave delay.
    pub left: bool,
    /// Hold time granted to it, in seconds (what its JOIN_ACK says).
    pub hold_s: u16,
    /// Its JOIN said it reads signature trailers (section 2.2's S flag): offers to it carry
    /// R's signature; without the flag they go unsigned, as a node from before 2.9 expects.
    pub signed: bool,
}

impl Child {
    pub fn joined(expires_at: u64, unanswered: Option<Asked>, hold_s: u16, signed: bool) -> Child {
        Child { expires_at, unanswered, left: false, hold_s, signed }
    }
}

#[derive(Default, Debug)]
pub struct Children {
    map: BTreeMap<Ipv4Addr, Child>,
}

impl Children {
    pub fn upsert(&mut self, addr: Ipv4Addr, child: Child) {
        self.map.insert(addr, child);
    }

    pub fn contains(&self, addr: &Ipv4Addr) -> bool {
        self.map.contains_key(addr)
    }

    pub fn remove(&mut self, addr: &Ipv4Addr) -> bool {
        self.map.remove(addr).is_some()
    }

    /// A LEAVE from `addr`: it goes `delay` µs from `now` (at once for 0). Returns whether
    /// it was removed now.
    pub fn leave(&mut self, addr: &Ipv4Addr, now: u64, delay: u64) -> bool {
        if delay == 0 {
            return self.remove(addr);
        }
        if let Some(c) = self.map.get_mut(addr) {
            c.expires_at = c.expires_at.min(now + delay);
            c.left = true;
        }
        false
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Ipv4Addr, &Child)> {
        self.map.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Ipv4Addr, &mut Child)> {
        self.map.iter_mut()
    }

    /// Drops children whose hold time (or leave delay) ran out; returns them and whether
    /// each had left.
    pub fn expire(&mut self, now: u64) -> Vec<(Ipv4Addr, bool)> {
        let gone: Vec<(Ipv4Addr, bool)> =
            self.map.iter().filter(|(_, c)| c.expires_at <= now).map(|(a, c)| (*a, c.left)).collect();
        for (a, _) in &gone {
            self.map.remove(a);
        }
        gone
    }

    pub fn next_expiry(&self) -> Option<u64> {
        self.map.values().map(|c| c.expires_at).min()
    }

    pub fn addrs(&self) -> Vec<Ipv4Addr> {
        self.map.keys().copied().collect()
    }
}
