//! The state file routerd reads to see how busy each link direction is: a fixed-size file,
//! mapped shared, written with a seqlock per slot. Layout (little endian; docs/linkemu.md):
//!
//! header, 64 bytes: magic b"CCLQ0001", u32 version = 1, u32 slot_count, zeros.
//! slot i at 64 + 64*i: u64 seq (odd while written), u64 tx_free_at_ns (CLOCK_MONOTONIC),
//! u64 backlog_bytes, u32 backlog_pkts, u32 queue_limit_pkts, u64 rate_bps, u64 updated_ns,
//! 16 bytes zero.
//!
//! The emulator (`concast-linkemu`) writes it ([`StateFile`]); routerd maps it read-only ([`LinkState`]) and reads
//! each slot as a seqlock: sequence, fields, sequence again; a changed or odd sequence means
//! the writer was in the middle of it, and the read is retried.

use std::fs::{File, OpenOptions};
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

// SAFETY: the mapping belongs to this value alone and every slot write goes through atomics.
unsafe impl Send for StateFile {}

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
        self.publish_with(slot, s, || {});
    }

    /// [`StateFile::publish`], calling `between` between field stores (tests widen the
    /// window in which a reader could see a half-written slot).
    pub fn publish_with(&self, slot: u32, s: &Slot, between: impl Fn()) {
        let seq = self.u64_at(slot, 0);
        let v = seq.load(Ordering::Relaxed);
        seq.store(v | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.u64_at(slot, 8).store(s.tx_free_at_ns, Ordering::Relaxed);
        between();
        self.u64_at(slot, 16).store(s.backlog_bytes, Ordering::Relaxed);
        self.u32_at(slot, 24).store(s.backlog_pkts, Ordering::Relaxed);
        between();
        self.u32_at(slot, 28).store(s.queue_limit_pkts, Ordering::Relaxed);
        self.u64_at(slot, 32).store(s.rate_bps, Ordering::Relaxed);
        between();
        self.u64_at(slot, 40).store(s.updated_ns, Ordering::Relaxed);
        seq.store((v | 1) + 1, Ordering::Release);
    }

    /// Maps an existing state file for writing (tests and tools that fake a link), after
    /// checking it is one.
    pub fn open(path: &Path) -> io::Result<StateFile> {
        let slots = LinkState::open(path)?.slot_count();
        let len = HEADER_LEN + SLOT_LEN * slots as usize;
        let f = OpenOptions::new().read(true).write(true).open(path)?;
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, f.as_raw_fd(), 0)
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(StateFile { base: base as *mut u8, len, slots, free: Vec::new(), path: path.to_path_buf() })
    }
}

impl Drop for StateFile {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

// --- reading (routerd) ---------------------------------------------------------------

/// Reads retried this often before giving up on a slot (a writer stuck mid-update).
const RETRIES: usize = 64;

/// The state file, mapped read-only.
pub struct LinkState {
    base: *const u8,
    len: usize,
    slots: u32,
}

// SAFETY: the mapping is read-only and every read goes through atomics.
unsafe impl Send for LinkState {}

impl std::fmt::Debug for LinkState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LinkState({} slots, {} bytes)", self.slots, self.len)
    }
}

impl LinkState {
    pub fn open(path: &Path) -> io::Result<LinkState> {
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()));
        let file = File::open(path)?;
        let len = file.metadata()?.len() as usize;
        if len < HEADER_LEN {
            return Err(bad(format!("{len} bytes, shorter than the 64-byte header")));
        }
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut state = LinkState { base: base as *const u8, len, slots: 0 };
        // SAFETY: `len` >= 64 bytes are mapped.
        let header = unsafe { std::slice::from_raw_parts(state.base, HEADER_LEN) };
        if &header[..8] != MAGIC {
            return Err(bad("not a link state file (magic is not CCLQ0001)".into()));
        }
        let version = u32::from_le_bytes(header[8..12].try_into().unwrap());
        if version != VERSION {
            return Err(bad(format!("version {version}, this reader knows {VERSION}")));
        }
        let slots = u32::from_le_bytes(header[12..16].try_into().unwrap());
        let need = HEADER_LEN + SLOT_LEN * slots as usize;
        if len < need {
            return Err(bad(format!("{slots} slots need {need} bytes, the file has {len}")));
        }
        state.slots = slots;
        Ok(state)
    }

    pub fn slot_count(&self) -> u32 {
        self.slots
    }

    fn u64_at(&self, offset: usize) -> u64 {
        // SAFETY: callers stay inside the checked slots; offsets are 8-aligned in a
        // page-aligned mapping; the emulator writes these words atomically.
        u64::from_le(unsafe { (*(self.base.add(offset) as *const AtomicU64)).load(Ordering::Relaxed) })
    }

    fn u32_at(&self, offset: usize) -> u32 {
        // SAFETY: as `u64_at`, 4-aligned.
        u32::from_le(unsafe { (*(self.base.add(offset) as *const AtomicU32)).load(Ordering::Relaxed) })
    }

    /// Slot `index`, consistently read; `None` if there is no such slot or the writer kept
    /// it busy through every retry.
    pub fn read(&self, index: u32) -> Option<Slot> {
        if index >= self.slots {
            return None;
        }
        let at = HEADER_LEN + SLOT_LEN * index as usize;
        for _ in 0..RETRIES {
            let seq = self.u64_at(at);
            fence(Ordering::Acquire);
            if seq % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let slot = Slot {
                tx_free_at_ns: self.u64_at(at + 8),
                backlog_bytes: self.u64_at(at + 16),
                backlog_pkts: self.u32_at(at + 24),
                queue_limit_pkts: self.u32_at(at + 28),
                rate_bps: self.u64_at(at + 32),
                updated_ns: self.u64_at(at + 40),
            };
            fence(Ordering::Acquire);
            if self.u64_at(at) == seq {
                return Some(slot);
            }
        }
        None
    }
}

impl Drop for LinkState {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// CLOCK_MONOTONIC now, in ns (the clock the emulator publishes in).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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

#[cfg(test)]
mod reader_tests {
    use super::*;

    fn create(path: &Path, slots: u32) -> io::Result<()> {
        StateFile::create(path, slots).map(drop)
    }
    use StateFile as Writer;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tmp"));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(format!("{name}-{}", std::process::id()))
    }

    fn slot(k: u64) -> Slot {
        Slot { tx_free_at_ns: k, backlog_bytes: k * 2, backlog_pkts: k as u32, queue_limit_pkts: (k as u32).wrapping_mul(5), rate_bps: k * 3, updated_ns: k }
    }

    #[test]
    fn reads_what_was_published_and_refuses_foreign_files() {
        let p = scratch("linkstate-basic");
        create(&p, 3).unwrap();
        let w = Writer::open(&p).unwrap();
        w.publish(2, &slot(7));
        let s = LinkState::open(&p).unwrap();
        assert_eq!(s.slot_count(), 3);
        assert_eq!(s.read(2), Some(slot(7)));
        assert_eq!(s.read(0).unwrap().tx_free_at_ns, 0, "never written: idle");
        assert_eq!(s.read(3), None, "no such slot");
        w.publish(2, &slot(9));
        assert_eq!(s.read(2), Some(slot(9)), "a shared mapping sees updates");

        std::fs::write(&p, b"CCLQ0002 and then some bytes to make up sixty-four of them......").unwrap();
        assert!(LinkState::open(&p).unwrap_err().to_string().contains("magic"));
        let mut short = vec![0u8; 64];
        short[..8].copy_from_slice(MAGIC);
        short[8..12].copy_from_slice(&1u32.to_le_bytes());
        short[12..16].copy_from_slice(&4u32.to_le_bytes());
        std::fs::write(&p, &short).unwrap();
        assert!(LinkState::open(&p).unwrap_err().to_string().contains("4 slots"));
        short[8..12].copy_from_slice(&2u32.to_le_bytes());
        std::fs::write(&p, &short).unwrap();
        assert!(LinkState::open(&p).unwrap_err().to_string().contains("version 2"));
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_reader_racing_a_writer_never_sees_a_torn_slot() {
        const WRITES: u64 = 5_000;
        let p = scratch("linkstate-race");
        create(&p, 1).unwrap();
        let w = Writer::open(&p).unwrap();
        // A slow writer: a reader without the sequence check sees torn slots at once.
        let writer = std::thread::spawn(move || {
            for k in 1..=WRITES {
                w.publish_with(0, &slot(k), || (0..50).for_each(|_| std::hint::spin_loop()));
            }
        });
        let s = LinkState::open(&p).unwrap();
        // Read until the last update is seen, however the two threads get scheduled.
        let (mut reads, mut distinct, mut last) = (0u64, 0u64, 0);
        loop {
            if let Some(got) = s.read(0) {
                assert_eq!(got, slot(got.tx_free_at_ns), "every field from one update");
                reads += 1;
                if got.tx_free_at_ns != last {
                    distinct += 1;
                    last = got.tx_free_at_ns;
                }
                if last == WRITES {
                    break;
                }
            }
        }
        writer.join().unwrap();
        assert!(reads >= distinct && distinct >= 1, "{reads} reads, {distinct} values");
        std::fs::remove_file(&p).unwrap();
    }
}
