//! A memory-mapped receive ring for routerd's CPU port (AF_PACKET `PACKET_RX_RING`,
//! TPACKET_V2): the kernel copies each frame into a slot shared with routerd and flips the
//! slot's status word; routerd reads every ready slot without a system call and hands the
//! slots back by clearing the word. One poll() wake-up drains a whole burst.
//!
//! Why V2 and not V3: a V3 ring wakes its reader only when a block retires, full or at its
//! timeout, and that timeout is counted in whole milliseconds (1 ms at the least), fifty
//! times the 20 µs a concast hop may add (issue #26); a V2 ring marks and wakes per frame,
//! so a lone frame is read at once and a burst still costs one wake-up.
//!
//! Frames longer than a slot are not lost: with `PACKET_COPY_THRESH` set the kernel also
//! queues the whole frame on the socket and marks the slot `TP_STATUS_COPY`; the caller
//! reads it with recv() in its turn. The ring is attached before the socket is bound, so
//! the socket queue only ever holds such copies, in ring order.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

use concast_daemon::sys::check;

/// Bytes per slot: the V2 header and its padding (80 bytes before the Ethernet header on a
/// SOCK_RAW socket) plus a 1500-byte-MTU frame, rounded to a power of two.
pub const SLOT: usize = 2048;
/// Slots in the ring: 4 MiB, the CPU port socket's receive buffer in bytes; at the benchmark's
/// 400,000 frames/s it holds 5 ms of input while routerd is off its core.
pub const SLOTS: usize = 2048;
/// Slots per kernel allocation (a 64 KiB block; blocks are separate allocations).
const BLOCK: usize = 64 << 10;

/// One ready slot: where its frame is in the ring and what the kernel says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    /// Byte offset of the frame's first (Ethernet) byte in the mapping.
    pub offset: usize,
    /// Bytes of the frame in the slot.
    pub snaplen: usize,
    /// Bytes of the frame on the wire (more than `snaplen` when it did not fit).
    pub len: usize,
    /// The whole frame is also queued on the socket (it did not fit the slot).
    pub copied: bool,
    /// When the kernel put the frame in the ring (CLOCK_REALTIME, ns).
    pub stamp_ns: u64,
}

pub struct RxRing {
    base: *mut u8,
    map_len: usize,
    slots: usize,
    /// Next slot to read, in ring order.
    head: usize,
    /// Slots read but not yet handed back (from `head - held`).
    held: usize,
}

// The mapping is owned by one RxRing and only touched through &self/&mut self.
unsafe impl Send for RxRing {}

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, value: &T) -> io::Result<()> {
    check(unsafe {
        libc::setsockopt(fd, libc::SOL_PACKET, opt, value as *const T as *const libc::c_void, std::mem::size_of::<T>() as libc::socklen_t)
    })
    .map(drop)
}

impl RxRing {
    /// Gives `fd` (an AF_PACKET socket, not yet bound) a ring of `slots` slots and maps it.
    pub fn attach(fd: RawFd, slots: usize) -> io::Result<RxRing> {
        let per_block = BLOCK / SLOT;
        let slots = slots.div_ceil(per_block).max(1) * per_block;
        setsockopt(fd, libc::PACKET_VERSION, &(libc::tpacket_versions::TPACKET_V2 as libc::c_int))?;
        // Any frame longer than a slot is queued whole as well (the threshold's value is not
        // used by the kernel beyond being non-zero).
        setsockopt(fd, libc::PACKET_COPY_THRESH, &(SLOT as libc::c_int))?;
        let req = libc::tpacket_req {
            tp_block_size: BLOCK as u32,
            tp_block_nr: (slots / per_block) as u32,
            tp_frame_size: SLOT as u32,
            tp_frame_nr: slots as u32,
        };
        setsockopt(fd, libc::PACKET_RX_RING, &req)?;
        let map_len = slots * SLOT;
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_POPULATE, fd, 0)
        };
        if base == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // Take the ring off again: frames would land in it, unread, instead of the
            // socket queue the caller falls back to.
            let none = libc::tpacket_req { tp_block_size: 0, tp_block_nr: 0, tp_frame_size: 0, tp_frame_nr: 0 };
            setsockopt(fd, libc::PACKET_RX_RING, &none)?;
            return Err(e);
        }
        Ok(RxRing { base: base as *mut u8, map_len, slots, head: 0, held: 0 })
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    fn status(&self, slot: usize) -> &AtomicU32 {
        // tp_status is the first field of struct tpacket2_hdr, at the slot's start; the kernel
        // writes the frame before it sets TP_STATUS_USER (smp_wmb), so an acquire load
        // orders our reads of the frame after it.
        unsafe { &*(self.base.add(slot * SLOT) as *const AtomicU32) }
    }

    /// The next slot in ring order if the kernel has filled it, marking it held (it stays
    /// ours until [`RxRing::release`]); None when the ring is empty or every slot is held.
    pub fn next(&mut self) -> Option<Ready> {
        if self.held == self.slots {
            return None;
        }
        let status = self.status(self.head).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let h = unsafe { std::ptr::read_unaligned(self.base.add(self.head * SLOT) as *const libc::tpacket2_hdr) };
        let ready = Ready {
            offset: self.head * SLOT + usize::from(h.tp_mac),
            snaplen: (h.tp_snaplen as usize).min(SLOT.saturating_sub(usize::from(h.tp_mac))),
            len: h.tp_len as usize,
            copied: status & libc::TP_STATUS_COPY != 0,
            stamp_ns: u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec),
        };
        self.head = (self.head + 1) % self.slots;
        self.held += 1;
        Some(ready)
    }

    /// Whether [`RxRing::next`] would return a slot now (a look at one status word: what a
    /// busy-polling loop spins on).
    pub fn ready(&self) -> bool {
        self.held < self.slots && self.status(self.head).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// The bytes of a slot [`RxRing::next`] returned (valid while it is held).
    pub fn bytes(&self, r: &Ready) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.base.add(r.offset), r.snaplen) }
    }

    /// Hands every held slot back to the kernel.
    pub fn release(&mut self) {
        for k in 0..self.held {
            let slot = (self.head + self.slots - self.held + k) % self.slots;
            self.status(slot).store(libc::TP_STATUS_KERNEL, Ordering::Release);
        }
        self.held = 0;
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_holds_a_full_mtu_frame_after_the_v2_header() {
        // SOCK_RAW: the network header starts at TPACKET_ALIGN(TPACKET2_HDRLEN + 16), the
        // Ethernet header 14 bytes before it (net/packet/af_packet.c, tpacket_rcv).
        let net = unsafe { libc::TPACKET_ALIGN(libc::TPACKET2_HDRLEN + 16) };
        assert!(net - 14 + 1514 <= SLOT, "a 1500-byte-MTU frame must fit a slot");
        assert_eq!(BLOCK % SLOT, 0);
        assert_eq!(BLOCK % 4096, 0, "blocks are whole pages");
        assert_eq!(SLOT % libc::TPACKET_ALIGNMENT, 0);
    }
}
