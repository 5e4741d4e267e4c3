//! Formatted log lines without an allocator: `format_args!` into a fixed buffer.

use core::fmt::Write;

use concast_sdk::{Host, Level};

/// Longest line kept; the rest is cut (the engine keeps 512 bytes at most anyway).
const LINE: usize = 160;

/// Logs `args`, for example `log(host, Level::Info, format_args!("{n} dropped"))`.
pub fn log(host: &mut impl Host, level: Level, args: core::fmt::Arguments<'_>) {
    let mut line = Line {
        buf: [0; LINE],
        len: 0,
    };
    let _ = line.write_fmt(args);
    host.log(level, line.as_str());
}

struct Line {
    buf: [u8; LINE],
    len: usize,
}

impl Line {
    fn as_str(&self) -> &str {
        match core::str::from_utf8(&self.buf[..self.len]) {
            Ok(s) => s,
            // A cut in the middle of a character: keep the whole ones.
            Err(e) => core::str::from_utf8(&self.buf[..e.valid_up_to()]).unwrap_or(""),
        }
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(LINE - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}
