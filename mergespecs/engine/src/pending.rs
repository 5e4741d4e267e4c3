//! The pending-datagram queue of one flow: the rest of the batch being ingested. The spec may
//! count, peek and take from it (its own flow only), which lets a bundling spec fill a bundle
//! from datagrams that are already here, with no added delay.

use std::collections::VecDeque;

/// A datagram's place in the batch arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    len: u32,
}

impl Span {
    pub fn len(self) -> usize {
        self.len as usize
    }
}

#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// The batch's datagrams, back to back; kept until the next batch so spans stay valid.
    bytes: Vec<u8>,
    queue: VecDeque<Span>,
    current: Option<Span>,
}

impl Pending {
    /// Replaces the queue with a new batch.
    pub fn load<D: AsRef<[u8]>>(&mut self, batch: &[D]) {
        self.bytes.clear();
        self.queue.clear();
        self.current = None;
        for datagram in batch {
            let datagram = datagram.as_ref();
            let start = self.bytes.len() as u32;
            self.bytes.extend_from_slice(datagram);
            self.queue.push_back(Span {
                start,
                len: datagram.len() as u32,
            });
        }
    }

    /// Empties the queue (timer callbacks and flushes run with nothing pending).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.current = None;
    }

    /// Makes the next datagram current; returns it.
    pub fn advance(&mut self) -> Option<Span> {
        self.current = self.queue.pop_front();
        self.current
    }

    pub fn current(&self) -> Option<Span> {
        self.current
    }

    pub fn bytes(&self, span: Span) -> &[u8] {
        &self.bytes[span.start as usize..(span.start + span.len) as usize]
    }

    pub fn count(&self) -> usize {
        self.queue.len()
    }

    pub fn peek(&self, index: usize) -> Option<Span> {
        self.queue.get(index).copied()
    }

    pub fn take(&mut self, index: usize) -> Option<Span> {
        self.queue.remove(index)
    }

    /// Removes and returns everything still queued (fail-open forwarding).
    pub fn drain(&mut self) -> impl Iterator<Item = Span> + '_ {
        self.queue.drain(..)
    }
}
