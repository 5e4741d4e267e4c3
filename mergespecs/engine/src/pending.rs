//! The pending-datagram queue of one flow: the rest of the batch being ingested. The spec may
//! count, peek and take from it (its own flow only), which lets a bundling spec fill a bundle
//! from datagrams that are already here, with no added delay.
//!
//! Datagrams keep their index in the batch (ABI v2 names them by it in the batch area);
//! each is queued, processed (it is or was the current one) or taken.

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Queued,
    Processed,
    Taken,
}

#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// The batch's datagrams, back to back; kept until the next batch so spans stay valid.
    bytes: Vec<u8>,
    spans: Vec<Span>,
    marks: Vec<Mark>,
    /// Index of the first datagram after the current one.
    next: usize,
    current: Option<usize>,
    /// Queued datagrams at `next` or later.
    left: usize,
}

impl Pending {
    /// Replaces the queue with a new batch.
    pub fn load<D: AsRef<[u8]>>(&mut self, batch: &[D]) {
        self.bytes.clear();
        self.spans.clear();
        self.marks.clear();
        self.current = None;
        self.next = 0;
        for datagram in batch {
            let datagram = datagram.as_ref();
            let start = self.bytes.len() as u32;
            self.bytes.extend_from_slice(datagram);
            self.spans.push(Span {
                start,
                len: datagram.len() as u32,
            });
            self.marks.push(Mark::Queued);
        }
        self.left = self.spans.len();
    }

    /// Empties the queue (timer callbacks and flushes run with nothing pending).
    pub fn clear(&mut self) {
        for i in self.next..self.marks.len() {
            if self.marks[i] == Mark::Queued {
                self.marks[i] = Mark::Processed;
            }
        }
        self.next = self.marks.len();
        self.left = 0;
        self.current = None;
    }

    /// Makes the next queued datagram current; returns it.
    pub fn advance(&mut self) -> Option<Span> {
        while self.next < self.marks.len() && self.marks[self.next] != Mark::Queued {
            self.next += 1;
        }
        if self.next == self.marks.len() {
            self.current = None;
            return None;
        }
        self.set_current(self.next);
        self.current()
    }

    /// Makes datagram `index` current: every queued one before it counts as processed
    /// (ABI v2: the spec went through them in one run). Never moves back.
    pub fn set_current(&mut self, index: usize) {
        if index >= self.marks.len() || index + 1 < self.next {
            return;
        }
        for i in self.next..=index {
            if self.marks[i] == Mark::Queued {
                self.marks[i] = Mark::Processed;
                self.left -= 1;
            }
        }
        self.next = self.next.max(index + 1);
        self.current = Some(index);
    }

    pub fn current(&self) -> Option<Span> {
        self.current.map(|i| self.spans[i])
    }

    pub fn current_index(&self) -> Option<usize> {
        self.current
    }

    pub fn bytes(&self, span: Span) -> &[u8] {
        &self.bytes[span.start as usize..(span.start + span.len) as usize]
    }

    /// Datagram `index` of the batch.
    pub fn span(&self, index: usize) -> Span {
        self.spans[index]
    }

    pub fn was_taken(&self, index: usize) -> bool {
        self.marks[index] == Mark::Taken
    }

    /// Queued datagrams from `index` on, in order, while `f` accepts them (ABI v2 layout).
    pub fn queued_from(&self, index: usize) -> impl Iterator<Item = usize> + '_ {
        (index..self.marks.len()).filter(|&i| self.marks[i] == Mark::Queued)
    }

    pub fn count(&self) -> usize {
        self.left
    }

    /// Batch indices of the pending datagrams, in queue order (0 = next).
    pub fn queued(&self) -> impl Iterator<Item = usize> + '_ {
        self.queued_from(self.next).take(self.left)
    }

    /// Batch index of pending datagram `index` (0 = next).
    fn nth(&self, index: usize) -> Option<usize> {
        if index >= self.left {
            return None;
        }
        self.queued_from(self.next).nth(index)
    }

    pub fn peek(&self, index: usize) -> Option<Span> {
        self.nth(index).map(|i| self.spans[i])
    }

    /// Takes pending datagram `index`; returns its batch index and span.
    pub fn take(&mut self, index: usize) -> Option<(usize, Span)> {
        let i = self.nth(index)?;
        self.marks[i] = Mark::Taken;
        self.left -= 1;
        Some((i, self.spans[i]))
    }

    /// Removes and returns everything still queued (fail-open forwarding).
    pub fn drain(&mut self) -> impl Iterator<Item = Span> + '_ {
        let from = self.next;
        self.next = self.marks.len();
        self.left = 0;
        self.current = None;
        let (marks, spans) = (&mut self.marks, &self.spans);
        (from..marks.len()).filter_map(move |i| {
            (marks[i] == Mark::Queued).then(|| {
                marks[i] = Mark::Processed;
                spans[i]
            })
        })
    }
}
