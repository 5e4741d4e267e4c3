//! Downstream nodes that joined a flow here, each with its soft-state hold timer.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

#[derive(Clone, Debug)]
pub struct Child {
    pub expires_at: u64,
    /// Sequence number of a JOIN not yet answered.
    pub unanswered: Option<u32>,
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

    /// Drops children whose hold time ran out; returns them.
    pub fn expire(&mut self, now: u64) -> Vec<Ipv4Addr> {
        let gone: Vec<Ipv4Addr> =
            self.map.iter().filter(|(_, c)| c.expires_at <= now).map(|(a, _)| *a).collect();
        for a in &gone {
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
