//! The state file routerd reads to see how busy each link direction is: a fixed-size file,
//! mapped shared, written with a seqlock per slot. Layout (little endian; docs/linkemu.md):
//!
//! header, 64 bytes: magic b"CCLQ0001", u32 version = 1, u32 slot_count, zeros.
//! slot i at 64 + 64*i: u64 seq (odd while written), u64 tx_free_at_ns (CLOCK_MONOTONIC),
//! u64 backlog_bytes, u32 backlog_pkts, u32 queue_limit_pkts, u64 rate_bps, u64 updated_ns,
//! 16 bytes zero.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

pub const MAGIC: &[u8; 8] = b"CCLQ0001";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 64;
pub const SLOT_LEN: usize = 64;

/// What one slot says about one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub tx_free_at_ns: u64,
    pub backlog_bytes: u64,
    pub backlog_pkts: u32,
    pub queue_limit_pkts: u32,
    pub rate_bps: u64,
    pub updated_ns: u64,
}

pub struct StateFile {
    base: *mut u8,
    len: usize,
    slots: u32,
    free: Vec<u32>,
    path: PathBuf,
}

impl StateFile {
    /// Create (or replace) `path` with `slots` empty slots.
    pub fn create(path: &Path, slots: u32) -> io::Result<StateFile> {
        if slots == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "state file needs at least one slot"));
        }
        let len = HEADER_LEN + SLOT_LEN * slots as usize;
        let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        f.set_len(len as u64)?;
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, f.as_raw_fd(), 0)
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base as *mut u8;
        unsafe {
            std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), base, 8);
            std::ptr::copy_nonoverlapping(VERSION.to_le_bytes().as_ptr(), base.add(8), 4);
            std::ptr::copy_nonoverlapping(slots.to_le_bytes().as_ptr(), base.add(12), 4);
        }
        Ok(StateFile { base, len, slots, free: (0..slots).rev().collect(), path: path.to_path_buf() })
    }

    pub fn slot_count(&self) -> u32 {
        self.slots
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A free slot (lowest first), or None when all are taken.
    pub fn alloc(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Give a slot back, zeroed (an idle direction), with its sequence kept even.
    pub fn release(&mut self, slot: u32) {
        self.publish(slot, &Slot::default());
        self.free.push(slot);
        self.free.sort_unstable_by(|a, b| b.cmp(a));
    }

    fn u64_at(&self, slot: u32, off: usize) -> &AtomicU64 {
        assert!(slot < self.slots);
        unsafe { &*(self.base.add(HEADER_LEN + SLOT_LEN * slot as usize + off) as *const AtomicU64) }
    }

    fn u32_at(&self, slot: u32, off: usize) -> &AtomicU32 {
        assert!(slot < self.slots);
        unsafe { &*(self.base.add(HEADER_LEN + SLOT_LEN * slot as usize + off) as *const AtomicU32) }
    }

    /// Write one slot under its seqlock (x86 and ARM both keep these little endian).
    pub fn publish(&self, slot: u32, s: &Slot) {
        let seq = self.u64_at(slot, 0);
        let v = seq.load(Ordering::Relaxed);
        seq.store(v | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.u64_at(slot, 8).store(s.tx_free_at_ns, Ordering::Relaxed);
        self.u64_at(slot, 16).store(s.backlog_bytes, Ordering::Relaxed);
        self.u32_at(slot, 24).store(s.backlog_pkts, Ordering::Relaxed);
        self.u32_at(slot, 28).store(s.queue_limit_pkts, Ordering::Relaxed);
        self.u64_at(slot, 32).store(s.rate_bps, Ordering::Relaxed);
        self.u64_at(slot, 40).store(s.updated_ns, Ordering::Relaxed);
        seq.store((v | 1) + 1, Ordering::Release);
    }
}

impl Drop for StateFile {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le64(b: &[u8], off: usize) -> u64 {
        u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
    }

    #[test]
    fn layout_matches_the_documented_one() {
        let path = std::env::temp_dir().join(format!("cclq-test-{}", std::process::id()));
        let mut st = StateFile::create(&path, 3).unwrap();
        assert_eq!(st.alloc(), Some(0));
        assert_eq!(st.alloc(), Some(1));
        let s = Slot { tx_free_at_ns: 11, backlog_bytes: 22, backlog_pkts: 3, queue_limit_pkts: 4, rate_bps: 55, updated_ns: 66 };
        st.publish(1, &s);
        st.publish(1, &s);
        let b = std::fs::read(&path).unwrap();
        assert_eq!(b.len(), 64 + 3 * 64);
        assert_eq!(&b[0..8], b"CCLQ0001");
        assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 3);
        assert!(b[16..64].iter().all(|&x| x == 0));
        let o = 64 + 64;
        assert_eq!(le64(&b, o), 4, "two writes: seq 0 -> 2 -> 4");
        assert_eq!([le64(&b, o + 8), le64(&b, o + 16)], [11, 22]);
        assert_eq!(u32::from_le_bytes(b[o + 24..o + 28].try_into().unwrap()), 3);
        assert_eq!(u32::from_le_bytes(b[o + 28..o + 32].try_into().unwrap()), 4);
        assert_eq!([le64(&b, o + 32), le64(&b, o + 40)], [55, 66]);
        assert!(b[o + 48..o + 64].iter().all(|&x| x == 0));
        st.release(0);
        assert_eq!(st.alloc(), Some(0), "released slots are reused, lowest first");
        assert_eq!(st.alloc(), Some(2));
        assert_eq!(st.alloc(), None);
        std::fs::remove_file(&path).unwrap();
    }
}
