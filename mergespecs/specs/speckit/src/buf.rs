//! A byte buffer of fixed capacity `N` that is filled up to a run-time `limit` (for example
//! what the path MTU leaves for a payload).

#[derive(Clone)]
pub struct FixedBuf<const N: usize> {
    bytes: [u8; N],
    len: usize,
    limit: usize,
}

impl<const N: usize> Default for FixedBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> FixedBuf<N> {
    pub const fn new() -> Self {
        FixedBuf {
            bytes: [0; N],
            len: 0,
            limit: N,
        }
    }

    /// Empties the buffer, keeps `reserved` zeroed bytes at its start (a header written at
    /// build time) and sets how far it may be filled (at most `N`).
    pub fn reset(&mut self, reserved: usize, limit: usize) {
        self.limit = limit.min(N);
        self.len = reserved.min(self.limit);
        self.bytes[..self.len].fill(0);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes that can still be appended.
    pub fn remaining(&self) -> usize {
        self.limit - self.len
    }

    /// Appends `n` bytes and returns them to be filled in; `None` (nothing changed) if they
    /// do not fit.
    pub fn reserve(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.remaining() {
            return None;
        }
        let start = self.len;
        self.len += n;
        Some(&mut self.bytes[start..self.len])
    }

    /// Appends a copy of `data`; false (nothing changed) if it does not fit.
    pub fn push(&mut self, data: &[u8]) -> bool {
        match self.reserve(data.len()) {
            Some(out) => {
                out.copy_from_slice(data);
                true
            }
            None => false,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[..self.len]
    }

    /// The whole backing array, for a host call that copies into it (`pending_peek`).
    pub fn storage(&mut self) -> &mut [u8; N] {
        &mut self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::FixedBuf;

    #[test]
    fn fills_up_to_the_limit_only() {
        let mut b = FixedBuf::<8>::new();
        b.reset(2, 6);
        assert_eq!((b.len(), b.remaining()), (2, 4));
        assert!(b.push(&[1, 2, 3]));
        assert!(!b.push(&[4, 5]), "6 bytes is the limit");
        assert_eq!(b.as_slice(), &[0, 0, 1, 2, 3]);
        b.reserve(1).unwrap()[0] = 9;
        assert_eq!(b.remaining(), 0);
        b.reset(0, 100);
        assert_eq!(b.limit(), 8, "never past the capacity");
        assert!(b.is_empty());
    }
}
