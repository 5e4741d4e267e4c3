//! The open bundles' tags, oldest first (at most `MAX_BUNDLES`, so a small array).

use crate::config::MAX_BUNDLES;

pub struct Order {
    tags: [u8; MAX_BUNDLES],
    len: usize,
}

impl Order {
    pub const fn new() -> Order {
        Order {
            tags: [0; MAX_BUNDLES],
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.tags[..self.len].iter().copied()
    }

    pub fn contains(&self, tag: u8) -> bool {
        self.tags[..self.len].contains(&tag)
    }

    pub fn oldest(&self) -> Option<u8> {
        self.tags[..self.len].first().copied()
    }

    pub fn newest(&self) -> Option<u8> {
        self.tags[..self.len].last().copied()
    }

    /// A bundle opened (the caller keeps at most `MAX_BUNDLES` open).
    pub fn push(&mut self, tag: u8) {
        if self.len < MAX_BUNDLES {
            self.tags[self.len] = tag;
            self.len += 1;
        }
    }

    /// A bundle left (normally the oldest; any position works).
    pub fn remove(&mut self, tag: u8) {
        if let Some(i) = self.tags[..self.len].iter().position(|&t| t == tag) {
            self.tags.copy_within(i + 1..self.len, i);
            self.len -= 1;
        }
    }
}

impl Default for Order {
    fn default() -> Self {
        Self::new()
    }
}
