//! Frames waiting to be sent in one batch, back to back in one buffer that lives as long as
//! routerd's loop: queueing a frame is one copy and no allocation once the buffer has grown
//! to a turn's worth (a `Vec<Vec<u8>>` cost a malloc and a free per frame routerd wrote).

#[derive(Debug, Default)]
pub struct FrameQueue {
    bytes: Vec<u8>,
    /// Where each frame ends in `bytes` (frame `i` starts where frame `i - 1` ends).
    ends: Vec<usize>,
}

impl FrameQueue {
    pub fn push(&mut self, frame: &[u8]) {
        self.bytes.extend_from_slice(frame);
        self.ends.push(self.bytes.len());
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The queued frames, in the order they were pushed.
    pub fn frames(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).map(|(s, e)| &self.bytes[s..e])
    }

    /// Empties the queue, keeping its memory for the next turn.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_back_whole_and_in_order_and_clear_keeps_the_memory() {
        let mut q = FrameQueue::default();
        assert!(q.is_empty());
        q.push(b"first");
        q.push(b"");
        q.push(b"third frame");
        assert_eq!(q.len(), 3);
        let got: Vec<&[u8]> = q.frames().collect();
        assert_eq!(got, [&b"first"[..], b"", b"third frame"]);
        let cap = q.bytes.capacity();
        q.clear();
        assert!(q.is_empty() && q.frames().next().is_none());
        assert_eq!(q.bytes.capacity(), cap);
        q.push(b"again");
        assert_eq!(q.frames().collect::<Vec<_>>(), [&b"again"[..]]);
    }
}
