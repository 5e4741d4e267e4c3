//! The management socket behind `concast router status|flows|stats NODE`: a Unix stream
//! socket; a client writes one command line and reads one JSON document back.

use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Mgmt {
    listener: UnixListener,
    path: PathBuf,
}

impl Mgmt {
    pub fn bind(path: &Path) -> io::Result<Mgmt> {
        Ok(Mgmt { listener: concast_daemon::bind_unix(path)?, path: path.to_path_buf() })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }

    /// Answers every waiting client with `answer(command)`.
    pub fn serve(&self, mut answer: impl FnMut(&str) -> serde_json::Value) {
        loop {
            let (stream, _) = match self.listener.accept() {
                Ok(c) => c,
                Err(_) => return, // WouldBlock: nobody else waiting
            };
            let _ = handle(stream, &mut answer);
        }
    }
}

fn handle(stream: UnixStream, answer: &mut impl FnMut(&str) -> serde_json::Value) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    // A client that never writes must not stall the packet loop.
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let reply = answer(line.trim());
    let mut w = &stream;
    writeln!(w, "{reply}")?;
    Ok(())
}

impl Drop for Mgmt {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
