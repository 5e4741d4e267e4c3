//! The one errno check for the daemons' raw system calls (sockets, ioctls, setsockopt).

use std::io;

/// A libc call's result: negative means failed, and errno says why.
pub fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}
