//! A byte buffer filled up to a run-time `limit` (for example what the path MTU leaves for a
//! payload) inside a fixed capacity: [`FixedBuf`] keeps its bytes inline (small buffers, known
//! at compile time), [`ArenaBuf`] in an [`Arena`] sized at init (a bundle as large as the path
//! MTU, which would not fit on the Wasm stack).

use crate::arena::Arena;

/// Where a [`Buf`] keeps its bytes.
pub trait Storage {
    fn bytes(&self) -> &[u8];
    fn bytes_mut(&mut self) -> &mut [u8];
}

impl<const N: usize> Storage for [u8; N] {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

impl Storage for Arena<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

#[derive(Clone)]
pub struct Buf<S> {
    bytes: S,
    len: usize,
    limit: usize,
}

/// Capacity `N`, inline.
pub type FixedBuf<const N: usize> = Buf<[u8; N]>;
/// Capacity chosen at run time, in fresh arena pages.
pub type ArenaBuf = Buf<Arena<u8>>;

impl<const N: usize> Default for Buf<[u8; N]> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Buf<[u8; N]> {
    pub const fn new() -> Self {
        Buf {
            bytes: [0; N],
            len: 0,
            limit: N,
        }
    }

    /// The whole backing array, for a host call that copies into it (`pending_peek`).
    pub fn storage(&mut self) -> &mut [u8; N] {
        &mut self.bytes
    }
}

impl Buf<Arena<u8>> {
    /// An empty buffer of `capacity` bytes (zero pages: nothing is written at init).
    pub fn zeroed(capacity: usize) -> Result<ArenaBuf, &'static str> {
        Ok(Buf::from_arena(Arena::zeroed(capacity)?))
    }

    /// An empty buffer over `bytes` (zeroed, for example carved from a larger arena).
    pub fn from_arena(bytes: Arena<u8>) -> ArenaBuf {
        let limit = bytes.len();
        Buf {
            bytes,
            len: 0,
            limit,
        }
    }
}

impl<S: Storage> Buf<S> {
    /// Bytes the buffer can ever hold.
    pub fn capacity(&self) -> usize {
        self.bytes.bytes().len()
    }

    /// Empties the buffer, keeps `reserved` zeroed bytes at its start (a header written at
    /// build time) and sets how far it may be filled (at most the capacity).
    pub fn reset(&mut self, reserved: usize, limit: usize) {
        self.limit = limit.min(self.capacity());
        self.len = reserved.min(self.limit);
        self.bytes.bytes_mut()[..self.len].fill(0);
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
        Some(&mut self.bytes.bytes_mut()[start..self.len])
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
        &self.bytes.bytes()[..self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes.bytes_mut()[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::{ArenaBuf, FixedBuf};

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

    #[test]
    fn buffers_carved_from_one_arena_are_disjoint() {
        let mut pool = crate::arena::Arena::<u8>::zeroed(3 * 100).unwrap();
        let mut a = ArenaBuf::from_arena(pool.carve(100).unwrap());
        let mut b = ArenaBuf::from_arena(pool.carve(100).unwrap());
        assert_eq!((a.capacity(), b.capacity(), pool.len()), (100, 100, 100));
        assert!(a.push(&[7; 100]) && b.push(&[9; 100]));
        assert_eq!((a.as_slice()[99], b.as_slice()[0]), (7, 9));
        assert!(pool.carve(101).is_err(), "only 100 left");
    }

    #[test]
    fn an_arena_buffer_behaves_the_same_with_its_run_time_capacity() {
        let mut b = ArenaBuf::zeroed(9000).unwrap();
        assert_eq!((b.capacity(), b.limit()), (9000, 9000));
        b.reset(16, 100_000);
        assert_eq!(b.limit(), 9000, "never past the capacity");
        assert!(b.reserve(8984).is_some());
        assert!(!b.push(&[1]));
        assert_eq!(b.as_slice()[..16], [0; 16]);
    }
}
