//! Reads the link emulator's shared transmitter state (docs/multiplex.md "Queue access"):
//! a file, normally in /dev/shm, that the emulator updates for every link direction and
//! routerd maps read-only. Layout (little endian, 8-byte aligned):
//!
//! ```text
//! header, 64 bytes:  magic "CCLQ0001" | u32 version = 1 | u32 slot_count | zeros
//! slot i at 64 + 64 i: u64 seq (odd while written) | u64 tx_free_at_ns (CLOCK_MONOTONIC) |
//!   u64 backlog_bytes | u32 backlog_pkts | u32 queue_limit_pkts | u64 rate_bps |
//!   u64 updated_ns | 16 bytes zero
//! ```
//!
//! A slot is read as a seqlock: sequence, fields, sequence again; a changed or odd sequence
//! means the writer was in the middle of it, and the read is retried.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

pub const MAGIC: &[u8; 8] = b"CCLQ0001";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 64;
pub const SLOT_LEN: usize = 64;
/// Reads retried this often before giving up on a slot (a writer stuck mid-update).
const RETRIES: usize = 64;

/// One link direction's transmitter, as last published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// CLOCK_MONOTONIC ns at which everything queued will have been sent (<= now: idle).
    pub tx_free_at_ns: u64,
    pub backlog_bytes: u64,
    pub backlog_pkts: u32,
    pub queue_limit_pkts: u32,
    pub rate_bps: u64,
    pub updated_ns: u64,
}

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
            return Err(bad(format!("version {version}, this routerd reads {VERSION}")));
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

/// Writes a state file in the emulator's layout (tests, and tools that fake a link).
pub mod writer {
    use super::*;
    use std::io::Write;

    /// A fresh file with `slots` zeroed slots.
    pub fn create(path: &Path, slots: u32) -> io::Result<()> {
        let mut bytes = vec![0u8; HEADER_LEN + SLOT_LEN * slots as usize];
        bytes[..8].copy_from_slice(MAGIC);
        bytes[8..12].copy_from_slice(&VERSION.to_le_bytes());
        bytes[12..16].copy_from_slice(&slots.to_le_bytes());
        File::create(path)?.write_all(&bytes)
    }

    /// A read-write mapping of such a file, publishing slots with the seqlock protocol.
    pub struct Writer {
        base: *mut u8,
        len: usize,
    }

    unsafe impl Send for Writer {}

    impl Writer {
        pub fn open(path: &Path) -> io::Result<Writer> {
            let file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
            let len = file.metadata()?.len() as usize;
            let base = unsafe {
                libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, file.as_raw_fd(), 0)
            };
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            Ok(Writer { base: base as *mut u8, len })
        }

        fn word(&self, offset: usize) -> &AtomicU64 {
            assert!(offset + 8 <= self.len);
            unsafe { &*(self.base.add(offset) as *const AtomicU64) }
        }

        fn half(&self, offset: usize) -> &AtomicU32 {
            assert!(offset + 4 <= self.len);
            unsafe { &*(self.base.add(offset) as *const AtomicU32) }
        }

        pub fn publish(&self, index: u32, s: &Slot) {
            self.publish_with(index, s, || {});
        }

        /// [`Writer::publish`] calling `between` between field stores (tests widen the
        /// window in which a reader could see a half-written slot).
        pub fn publish_with(&self, index: u32, s: &Slot, between: impl Fn()) {
            let at = HEADER_LEN + SLOT_LEN * index as usize;
            let seq = self.word(at);
            let odd = u64::from_le(seq.load(Ordering::Relaxed)) | 1;
            seq.store(odd.to_le(), Ordering::Relaxed);
            fence(Ordering::Release);
            self.word(at + 8).store(s.tx_free_at_ns.to_le(), Ordering::Relaxed);
            between();
            self.word(at + 16).store(s.backlog_bytes.to_le(), Ordering::Relaxed);
            self.half(at + 24).store(s.backlog_pkts.to_le(), Ordering::Relaxed);
            between();
            self.half(at + 28).store(s.queue_limit_pkts.to_le(), Ordering::Relaxed);
            self.word(at + 32).store(s.rate_bps.to_le(), Ordering::Relaxed);
            between();
            self.word(at + 40).store(s.updated_ns.to_le(), Ordering::Relaxed);
            fence(Ordering::Release);
            seq.store((odd + 1).to_le(), Ordering::Relaxed);
        }
    }

    impl Drop for Writer {
        fn drop(&mut self) {
            unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::writer::{create, Writer};
    use super::*;

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
