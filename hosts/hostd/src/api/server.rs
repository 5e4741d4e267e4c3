//! The API's Unix stream socket: many clients at once, each a stream of JSON lines both ways
//! (requests in; replies and events out). Nothing blocks the loop: reads and writes are
//! non-blocking, and what a client does not read yet waits in its queue, up to a limit past
//! which its events are dropped and counted (never its replies).

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use crate::reactor::{PollSet, Token};

/// The longest request line: a 1 MiB spec in hex, with room for the rest of the object.
pub const MAX_LINE: usize = 2 * concast_csp::MAX_SPEC_SIZE + 4096;
/// Output a client may leave unread before its events are dropped.
pub const MAX_QUEUE: usize = 16 << 20;

pub type ClientId = u64;

struct Client {
    stream: UnixStream,
    input: Vec<u8>,
    output: Vec<u8>,
    /// Events dropped since the client last had room; reported to it when it has again.
    dropped: u64,
    gone: bool,
}

pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    clients: BTreeMap<ClientId, Client>,
    next_id: ClientId,
}

impl Server {
    pub fn bind(path: &Path) -> io::Result<Server> {
        let listener = concast_daemon::bind_unix(path)?;
        Ok(Server { listener, path: path.to_path_buf(), clients: BTreeMap::new(), next_id: 1 })
    }

    pub fn register(&self, set: &mut PollSet) {
        set.add(self.listener.as_raw_fd(), Token::Listener, false);
        for (id, c) in &self.clients {
            set.add(c.stream.as_raw_fd(), Token::Client(*id), !c.output.is_empty());
        }
    }

    pub fn accept(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let id = self.next_id;
            self.next_id += 1;
            self.clients.insert(id, Client { stream, input: Vec::new(), output: Vec::new(), dropped: 0, gone: false });
        }
    }

    /// Reads what client `id` sent; returns its complete lines. A client that closed, erred
    /// or sent a line longer than [`MAX_LINE`] is marked gone (a final error line is queued
    /// for the last case).
    pub fn read_lines(&mut self, id: ClientId) -> Vec<String> {
        let Some(c) = self.clients.get_mut(&id) else { return Vec::new() };
        let mut buf = [0u8; 65536];
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    c.gone = true;
                    break;
                }
                Ok(n) => c.input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    c.gone = true;
                    break;
                }
            }
        }
        let mut lines = Vec::new();
        while let Some(end) = c.input.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = c.input.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).trim().to_string();
            if !text.is_empty() {
                lines.push(text);
            }
        }
        if c.input.len() > MAX_LINE {
            c.input.clear();
            let msg = serde_json::json!({"ok": false, "error": format!("request line longer than {MAX_LINE} bytes; closing")});
            c.output.extend_from_slice(format!("{msg}\n").as_bytes());
            let _ = flush(c);
            c.gone = true;
        }
        lines
    }

    /// Queues a reply: always kept, whatever the queue holds.
    pub fn reply(&mut self, id: ClientId, line: &str) {
        if let Some(c) = self.clients.get_mut(&id) {
            c.output.extend_from_slice(line.as_bytes());
            c.output.push(b'\n');
        }
    }

    /// Queues an event; returns false (the event is dropped) if the client's queue is full.
    pub fn event(&mut self, id: ClientId, line: &str) -> bool {
        let Some(c) = self.clients.get_mut(&id) else { return true };
        if c.output.len() + line.len() > MAX_QUEUE {
            c.dropped += 1;
            return false;
        }
        if c.dropped > 0 {
            let note = serde_json::json!({"event": "dropped", "events": c.dropped, "why": "the client did not read fast enough"});
            c.output.extend_from_slice(format!("{note}\n").as_bytes());
            c.dropped = 0;
        }
        c.output.extend_from_slice(line.as_bytes());
        c.output.push(b'\n');
        true
    }

    /// Writes what every client can take now.
    pub fn flush_all(&mut self) {
        for c in self.clients.values_mut() {
            if !c.output.is_empty() && flush(c).is_err() {
                c.gone = true;
            }
        }
    }

    /// Forgets clients that went away; returns their ids.
    pub fn reap(&mut self) -> Vec<ClientId> {
        let gone: Vec<ClientId> = self.clients.iter().filter(|(_, c)| c.gone).map(|(id, _)| *id).collect();
        for id in &gone {
            self.clients.remove(id);
        }
        gone
    }

    /// Last chance to write queued output before exit (bounded, non-blocking).
    pub fn flush_before_exit(&mut self) {
        for _ in 0..50 {
            self.flush_all();
            if self.clients.values().all(|c| c.output.is_empty() || c.gone) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

fn flush(c: &mut Client) -> io::Result<()> {
    while !c.output.is_empty() {
        match c.stream.write(&c.output) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => {
                c.output.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
