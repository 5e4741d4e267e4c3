//! Waiting with microsecond precision: routerd and hostd sleep until the merge engine's next
//! timer, and a millisecond `poll(2)` timeout would round a 1 ms MaxLocalDelay up to 2 ms.
//! `ppoll(2)` takes a timespec; a 1 ns timer slack stops the kernel from deferring the
//! wake-up by its default 50 µs to batch it with others.

use std::io;

/// Sets this thread's timer slack to 1 ns (`PR_SET_TIMERSLACK`). Call once from the
/// thread that waits; harmless if refused.
pub fn fine_timer_slack() {
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// How long to wait for `deadline_us` at `now_us` (µs of one clock): `None` = no deadline,
/// so at most `cap_us`.
pub fn timeout_us(deadline_us: Option<u64>, now_us: u64, cap_us: u64) -> u64 {
    deadline_us.map_or(cap_us, |d| d.saturating_sub(now_us).min(cap_us))
}

/// `poll(2)` with a timeout in microseconds (0: just look). A signal ends the wait early
/// (not an error); returns how many descriptors are ready.
pub fn poll_us(fds: &mut [libc::pollfd], timeout_us: u64) -> io::Result<usize> {
    let ts = libc::timespec {
        tv_sec: (timeout_us / 1_000_000) as libc::time_t,
        tv_nsec: ((timeout_us % 1_000_000) * 1_000) as libc::c_long,
    };
    let n = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn timeouts_are_capped_and_never_negative() {
        assert_eq!(timeout_us(None, 5, 100_000), 100_000);
        assert_eq!(timeout_us(Some(1_250), 1_000, 100_000), 250);
        assert_eq!(timeout_us(Some(900), 1_000, 100_000), 0);
        assert_eq!(timeout_us(Some(10_000_000), 0, 100_000), 100_000);
    }

    #[test]
    fn a_sub_millisecond_wait_returns_with_nothing_ready() {
        fine_timer_slack();
        let (r, _w) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsRawFd;
        let mut fds = [libc::pollfd { fd: r.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        let t = Instant::now();
        assert_eq!(poll_us(&mut fds, 300).unwrap(), 0);
        // Only that it waited at all (not a speed claim: the machine may be slow).
        assert!(t.elapsed().as_micros() >= 300);
    }
}
