//! The C ABI for MTP (Python's `concast.hosts.mtp` loads it with ctypes), beside `ffi`'s CTP.
//!
//! Two opaque handles. A **server** (`mtp_server_new`) binds a UDP address and answers on its
//! own thread, through `mtp::udp::serve`, for objects registered in memory by name
//! (`mtp_server_put`), the files of a directory, and the generated `size:N` objects. A
//! **client** (`mtp_client_new`) holds the request options that matter to a user (window
//! rules, link-type hint, receive buffer, datagram size, repeat floor, expire time, largest
//! object) and one `mtp::udp::Endpoint` per server it has asked; `mtp_get` fetches one whole
//! object, driving the sans-IO client in the caller's thread until the object is there, the
//! transaction fails, or the call's timeout passes; `mtp_get_many` runs several transactions at
//! once the same way.
//!
//! Every call that can fail returns a negative `MTP_E_*` code (or null) and writes the reason,
//! NUL-terminated, into the caller's `err` buffer. Nothing panics across the boundary: every
//! body runs under `catch_unwind`, and a panic comes back as `MTP_E_PANIC` with its message.
//! A client handle must be used from one thread at a time; handles are independent.
//!
//! Safety, for every function: a handle comes from the matching `*_new` and is not yet freed;
//! strings are NUL-terminated; `data`/`len`, `name`/`name_len` and `err`/`cap` describe
//! readable or writable buffers of that many bytes; buffers and strings returned are freed
//! once, with `mtp_free_buf` / `mtp_free_str`.
use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cc;
use crate::ffi::{text, write_err};
use crate::mtp::client::NOBLE;
use crate::mtp::noble::LinkType;
use crate::mtp::server::{Answer, Query, Responder, Server, ServerStats};
use crate::mtp::tool::{stats_json, Files};
use crate::mtp::udp::{serve_server, Endpoint};
use crate::mtp::window::MtpWindow;
use crate::mtp::{Client, ClientConfig, Output, RequestOpts};

/// Success.
pub const MTP_OK: c_int = 0;
/// A bad argument or handle (the message says which).
pub const MTP_E_ARG: c_int = -1;
/// The transaction expired: no reply for its expire time (mtp.h `ERR_NET_EXPIRE`).
pub const MTP_E_EXPIRED: c_int = -2;
/// The call's own timeout passed first; the transaction was destroyed (`ABORT_DESTROY`).
pub const MTP_E_TIMEOUT: c_int = -3;
/// The server refused the request (no such object, ...); the message is its reason.
pub const MTP_E_REFUSED: c_int = -4;
/// The object is larger than the client's largest object.
pub const MTP_E_TOO_LARGE: c_int = -5;
/// The transaction ended without the whole object (stopped or finished early).
pub const MTP_E_ABORTED: c_int = -6;
/// A socket error.
pub const MTP_E_IO: c_int = -7;
/// A panic inside the library, caught at the boundary.
pub const MTP_E_PANIC: c_int = -8;

/// `mtp_get` flag: a single-datagram transaction (glossary): one request, no flow control, the
/// first valid reply is the whole response.
pub const MTP_SINGLE: u32 = 1;

/// The client's refusal of an object over `max_object` (client.rs `accept`), told apart from
/// the server's refusals by this text.
const TOO_LARGE_MARK: &str = "larger than max_object";

type Fail = (c_int, String);

fn arg(msg: impl Into<String>) -> Fail {
    (MTP_E_ARG, msg.into())
}

fn io_err(what: &str, e: io::Error) -> Fail {
    (MTP_E_IO, format!("{what}: {e}"))
}

/// Runs `f`; a panic becomes `MTP_E_PANIC` with its message.
fn guard<T>(f: impl FnOnce() -> Result<T, Fail>) -> Result<T, Fail> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
            Err((MTP_E_PANIC, format!("internal error (panic): {}", msg.unwrap_or_else(|| "unknown".into()))))
        }
    }
}

/// The code of `r`, with its reason written to `err`.
fn code(r: Result<(), Fail>, err: *mut c_char, cap: usize) -> c_int {
    match r {
        Ok(()) => MTP_OK,
        Err((c, msg)) => {
            write_err(err, cap, &msg);
            c
        }
    }
}

fn json_str(v: Value) -> *mut c_char {
    std::ffi::CString::new(v.to_string()).map_or(std::ptr::null_mut(), |c| c.into_raw())
}

fn bytes<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8], Fail> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(arg(format!("{what} is missing")));
    }
    // SAFETY: the caller passes `len` readable bytes
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

fn addr_of(s: &str) -> Result<SocketAddr, Fail> {
    s.to_socket_addrs().map_err(|e| arg(format!("address {s:?}: {e}")))?.next().ok_or_else(|| arg(format!("address {s:?} resolves to nothing")))
}

// ---------------------------------------------------------------------------------------------
// Server

/// Objects registered by name while the server runs, and live counters.
#[derive(Default)]
struct Shelf {
    named: RwLock<HashMap<Vec<u8>, Arc<Vec<u8>>>>,
    /// Channels that name objects (ch. V "Payload Suppression"): replies carry the channel,
    /// and clients leave the name out of later subrequests.
    channels: RwLock<HashMap<u8, Vec<u8>>>,
    queries: AtomicU64,
    refused: AtomicU64,
}

/// The server thread's responder: the shelf first, then the directory's files and `size:N`.
struct Store {
    shelf: Arc<Shelf>,
    files: Files,
}

impl Responder for Store {
    fn channel_of(&mut self, name: &[u8]) -> Option<u8> {
        let ch = self.shelf.channels.read().unwrap_or_else(|e| e.into_inner());
        ch.iter().find(|(_, n)| n.as_slice() == name).map(|(&c, _)| c)
    }

    fn name_of(&mut self, channel: u8) -> Option<Vec<u8>> {
        self.shelf.channels.read().unwrap_or_else(|e| e.into_inner()).get(&channel).cloned()
    }

    fn respond(&mut self, q: &Query) -> Answer {
        self.shelf.queries.fetch_add(1, Ordering::Relaxed);
        let obj = self.shelf.named.read().unwrap_or_else(|e| e.into_inner()).get(q.name).cloned();
        let a = match obj {
            Some(obj) => {
                let total = obj.len() as u32; // `mtp_server_put` keeps objects under 4 GiB
                if q.want_payload {
                    let start = (q.offset as usize).min(obj.len());
                    let end = start.saturating_add(q.len).min(obj.len());
                    Answer::Bytes { total: Some(total), data: obj[start..end].to_vec() }
                } else {
                    Answer::Size(total)
                }
            }
            None => self.files.respond(q),
        };
        if matches!(a, Answer::Refuse(_)) {
            self.shelf.refused.fetch_add(1, Ordering::Relaxed);
        }
        a
    }
}

pub struct MtpServer {
    addr: SocketAddr,
    dir: Option<PathBuf>,
    /// The response limit per request, bytes (0: none).
    limit: usize,
    shelf: Arc<Shelf>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<Server<Store>>>>,
    /// The serving loop's own counters, once it has stopped.
    last: Option<ServerStats>,
    /// Why the serving loop ended, if not by `mtp_server_stop`.
    failed: Option<String>,
}

impl MtpServer {
    fn start(addr: &str, dir: Option<PathBuf>, limit: usize) -> Result<MtpServer, Fail> {
        if let Some(d) = &dir {
            if !d.is_dir() {
                return Err(arg(format!("{} is not a directory", d.display())));
            }
        }
        let sock = UdpSocket::bind(addr_of(addr)?).map_err(|e| io_err(addr, e))?;
        let local = sock.local_addr().map_err(|e| io_err(addr, e))?;
        let shelf = Arc::new(Shelf::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut server = Server::new(Store { shelf: shelf.clone(), files: Files { dir: dir.clone() } });
        server.limit = (limit > 0).then_some(limit);
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("mtp-server".into())
            .spawn(move || serve_server(&sock, server, &flag, None))
            .map_err(|e| io_err("server thread", e))?;
        Ok(MtpServer { addr: local, dir, limit, shelf, stop, thread: Some(thread), last: None, failed: None })
    }

    /// Stops the serving loop (it checks the flag at least every 100 ms) and keeps its counters.
    fn halt(&mut self) -> Result<(), Fail> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            match t.join() {
                Ok(Ok(s)) => self.last = Some(s.stats),
                Ok(Err(e)) => self.failed = Some(format!("serving failed: {e}")),
                Err(_) => self.failed = Some("the server thread panicked".into()),
            }
        }
        match &self.failed {
            Some(f) => Err((MTP_E_IO, f.clone())),
            None => Ok(()),
        }
    }

    fn stats(&self) -> Value {
        let named = self.shelf.named.read().unwrap_or_else(|e| e.into_inner());
        let mut v = json!({
            "role": "server", "addr": self.addr.to_string(),
            "dir": self.dir.as_ref().map(|d| d.display().to_string()), "limit": self.limit,
            "running": self.thread.as_ref().is_some_and(|t| !t.is_finished()),
            "objects": named.len(), "object_bytes": named.values().map(|o| o.len()).sum::<usize>(),
            "channels": self.shelf.channels.read().unwrap_or_else(|e| e.into_inner()).iter()
                .map(|(c, n)| (c.to_string(), Value::from(String::from_utf8_lossy(n).into_owned()))).collect::<serde_json::Map<String, Value>>(),
            "queries": self.shelf.queries.load(Ordering::Relaxed),
            "refused": self.shelf.refused.load(Ordering::Relaxed), "failed": self.failed,
        });
        if let Some(s) = &self.last {
            v["final"] = json!({"requests": s.requests, "replies": s.replies, "refused": s.refused,
                                "malformed": s.malformed, "shed": s.shed, "by_channel": s.by_channel,
                                "channel_errors": s.channel_errors});
        }
        v
    }
}

impl Drop for MtpServer {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

fn server<'a>(h: *mut MtpServer) -> Result<&'a mut MtpServer, Fail> {
    // SAFETY: the caller passes a pointer from mtp_server_new, not yet freed
    unsafe { h.as_mut() }.ok_or_else(|| arg("null server handle"))
}

/// Bind `addr` ("host:port"; port 0 picks one) and start answering on a thread of its own, for
/// objects put by name, the files of `dir` (null: none) and `size:N`. `limit`: the server's
/// response limit per request in bytes (ch. V "Mechanisms"; 0: none). Null on error.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_server_new(addr: *const c_char, dir: *const c_char, limit: usize, err: *mut c_char, cap: usize) -> *mut MtpServer {
    let r = guard(|| {
        let addr = text(addr, "address").map_err(arg)?;
        let dir = if dir.is_null() { None } else { Some(PathBuf::from(text(dir, "directory").map_err(arg)?)) };
        MtpServer::start(addr, dir, limit)
    });
    match r {
        Ok(s) => Box::into_raw(Box::new(s)),
        Err((_, msg)) => {
            write_err(err, cap, &msg);
            std::ptr::null_mut()
        }
    }
}

/// The UDP port the server answers on; negative on error.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_server_port(h: *mut MtpServer, err: *mut c_char, cap: usize) -> c_int {
    match guard(|| server(h).map(|s| s.addr.port() as c_int)) {
        Ok(p) => p,
        Err((c, msg)) => {
            write_err(err, cap, &msg);
            c
        }
    }
}

/// Register (or replace) the object `name` with `len` bytes of `data` (copied); the running
/// server answers for it from its next request on.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_server_put(
    h: *mut MtpServer,
    name: *const u8,
    name_len: usize,
    data: *const u8,
    len: usize,
    err: *mut c_char,
    cap: usize,
) -> c_int {
    let r = guard(|| {
        let s = server(h)?;
        let name = bytes(name, name_len, "name")?;
        if name.is_empty() || name.len() > crate::mtp::wire::MAX_NAME {
            return Err(arg(format!("a name has 1 to {} bytes, got {}", crate::mtp::wire::MAX_NAME, name.len())));
        }
        if u32::try_from(len).is_err() {
            return Err(arg(format!("an object has at most {} bytes, got {len}", u32::MAX)));
        }
        let data = bytes(data, len, "data")?.to_vec();
        s.shelf.named.write().unwrap_or_else(|e| e.into_inner()).insert(name.to_vec(), Arc::new(data));
        Ok(())
    });
    code(r, err, cap)
}

/// Name an object by `channel` (1-255; ch. V "Payload Suppression"): replies for `name` carry
/// the channel, and a request without a name on that channel asks for `name`. `name_len` 0
/// forgets the channel (a request naming it then gets a channel error and the client sends
/// the name again). A channel names one object; naming another replaces it.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_server_channel(h: *mut MtpServer, channel: u32, name: *const u8, name_len: usize, err: *mut c_char, cap: usize) -> c_int {
    let r = guard(|| {
        let s = server(h)?;
        let c = u8::try_from(channel).ok().filter(|&c| c > 0).ok_or_else(|| arg(format!("a channel is 1 to 255, got {channel}")))?;
        let name = bytes(name, name_len, "name")?;
        if name.len() > crate::mtp::wire::MAX_NAME {
            return Err(arg(format!("a name has 1 to {} bytes, got {}", crate::mtp::wire::MAX_NAME, name.len())));
        }
        let mut ch = s.shelf.channels.write().unwrap_or_else(|e| e.into_inner());
        if name.is_empty() {
            ch.remove(&c);
        } else {
            ch.retain(|_, n| n.as_slice() != name);
            ch.insert(c, name.to_vec());
        }
        Ok(())
    });
    code(r, err, cap)
}

/// Unregister the object `name`; `MTP_E_ARG` when there is none.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_server_remove(h: *mut MtpServer, name: *const u8, name_len: usize, err: *mut c_char, cap: usize) -> c_int {
    let r = guard(|| {
        let s = server(h)?;
        let name = bytes(name, name_len, "name")?;
        match s.shelf.named.write().unwrap_or_else(|e| e.into_inner()).remove(name) {
            Some(_) => Ok(()),
            None => Err(arg(format!("no object named {:?}", String::from_utf8_lossy(name)))),
        }
    });
    code(r, err, cap)
}

/// Stop answering (waits up to ~100 ms for the thread); the counters stay readable. Calling it
/// again is harmless.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_server_stop(h: *mut MtpServer, err: *mut c_char, cap: usize) -> c_int {
    code(guard(|| server(h)?.halt()), err, cap)
}

/// The server's counters as a JSON object (free with `mtp_free_str`); null for a null handle.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_server_stats(h: *mut MtpServer) -> *mut c_char {
    guard(|| Ok(json_str(server(h)?.stats()))).unwrap_or(std::ptr::null_mut())
}

/// Stop the server if it runs and release it.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_server_free(h: *mut MtpServer) {
    if !h.is_null() {
        // SAFETY: `h` comes from mtp_server_new and is freed once
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(h) })));
    }
}

// ---------------------------------------------------------------------------------------------
// Client

/// What the last transaction's flow looked like (sampled at its start and as its prefix grew:
/// the state is freed with the transaction).
#[derive(Clone, Debug, Default)]
struct Sample {
    window: f64,
    window_bytes: Option<usize>,
    peak_window: f64,
    datagram_size: usize,
    flowtimeout_bytes: Option<i64>,
    repeat_interval_us: u64,
    min_rtt_us: Option<u64>,
    mean_rtt_us: Option<u64>,
    transit_bytes: Option<usize>,
    in_flight: u32,
}

impl Sample {
    fn take(&mut self, c: &Client, id: u32, per_transaction: bool) {
        // an ended transaction's state is gone: keep the last sample
        let Some(transit) = c.transit(id) else { return };
        self.transit_bytes = Some(transit);
        match c.flow(id) {
            Some(f) => {
                self.window = f.window as f64 / f.size.max(1) as f64;
                self.window_bytes = Some(f.window);
                self.datagram_size = f.size;
                self.flowtimeout_bytes = Some(f.flowtimeout);
                self.repeat_interval_us = f.repeat_us;
                self.min_rtt_us = Some(f.min_rtt_us).filter(|&r| r > 0);
                self.mean_rtt_us = Some(f.mean_rtt_us()).filter(|&r| r > 0);
            }
            None if per_transaction => {
                // a single-datagram transaction: one request, no window (glossary)
                self.window = 1.0;
                self.datagram_size = c.datagram_size();
                self.repeat_interval_us = c.flowtimeout_us();
            }
            None => {
                self.window = c.window();
                self.datagram_size = c.datagram_size();
                self.repeat_interval_us = c.flowtimeout_us();
            }
        }
        self.in_flight = c.in_flight();
        self.peak_window = self.peak_window.max(self.window);
    }
}

pub struct MtpClient {
    cfg: ClientConfig,
    link: LinkType,
    /// The local address its sockets bind (None: the wildcard, a port picked).
    bind: Option<SocketAddr>,
    /// One endpoint (socket and sans-IO client) per server asked.
    eps: HashMap<SocketAddr, Endpoint>,
    last: Option<SocketAddr>,
    sample: Sample,
    gets: u64,
    done: u64,
    failed: u64,
    bytes: u64,
    last_error: Option<String>,
    /// The channel the last completed transaction's replies named (ch. V "Channel
    /// Identifiers": handed back for reuse).
    last_channel: Option<u8>,
}

/// A client configuration from the caller's options; 0 or null keeps a default.
#[allow(clippy::too_many_arguments)]
fn client_config(
    window: Option<&str>,
    link: Option<&str>,
    rcvbuf: usize,
    max_size: usize,
    repeat_floor_ms: u32,
    expire_ms: u32,
    max_object: u32,
) -> Result<(ClientConfig, LinkType), Fail> {
    let mut cfg = ClientConfig::default();
    if let Some(w) = window {
        if w != NOBLE && MtpWindow::by_name(w).is_none() && cc::by_name(w, 1e7).is_err() {
            return Err(arg(format!("unknown window rule {w:?}: mtp, mtp-cubic, mtp-halve or one of {}", cc::NAMES.join(", "))));
        }
        cfg.cc = w.to_string();
    }
    let link = match link {
        None => LinkType::Unknown,
        Some(l) => LinkType::by_name(l).ok_or_else(|| {
            let names: Vec<&str> = LinkType::ALL.iter().map(|l| l.name()).collect();
            arg(format!("unknown link type {l:?}: {}", names.join(", ")))
        })?,
    };
    cfg = cfg.link(link);
    if rcvbuf > 0 {
        cfg.rcvbuf = rcvbuf;
    }
    if max_size > 0 {
        cfg.max_size = max_size;
        cfg.min_size = cfg.min_size.min(max_size);
    }
    if repeat_floor_ms > 0 {
        cfg.repeat_floor_us = repeat_floor_ms as u64 * 1000;
    }
    if expire_ms > 0 {
        cfg.expire_us = expire_ms as u64 * 1000;
    }
    if max_object > 0 {
        cfg.max_object = max_object;
    }
    cfg.seed = std::process::id() as u64 ^ (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64));
    // the client checks sizes, buffer and window itself; a bad value is its error here
    Client::new(cfg.clone()).map_err(arg)?;
    Ok((cfg, link))
}

impl MtpClient {
    fn get(&mut self, server: SocketAddr, name: &[u8], opts: RequestOpts, timeout: Duration) -> Result<Vec<u8>, Fail> {
        self.get_many(server, &[name], opts, timeout)?.pop().expect("one name, one result")
    }

    /// Fetches every name at once, one transaction each (each its own window under the
    /// dissertation's rules), until all have ended or `timeout` passes (the rest are destroyed).
    /// The outer error is one that stops them all (a bad argument, a socket error).
    fn get_many(&mut self, server: SocketAddr, names: &[&[u8]], opts: RequestOpts, timeout: Duration) -> Result<Vec<Result<Vec<u8>, Fail>>, Fail> {
        if names.is_empty() {
            return Err(arg("no names to fetch"));
        }
        for n in names {
            if n.is_empty() || n.len() > crate::mtp::wire::MAX_NAME {
                return Err(arg(format!("a name has 1 to {} bytes, got {}", crate::mtp::wire::MAX_NAME, n.len())));
            }
        }
        let ep = match self.eps.entry(server) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                if let Some(b) = self.bind.filter(|b| b.port() != 0) {
                    if let Some(other) = self.last {
                        return Err(arg(format!("bound to port {}, this client already asks {other}: one server per client", b.port())));
                    }
                }
                let c = Client::new(self.cfg.clone()).map_err(arg)?;
                let ep = match self.bind {
                    Some(b) => Endpoint::bound(c, server, b),
                    None => Endpoint::new(c, server),
                };
                v.insert(ep.map_err(|e| io_err("client socket", e))?)
            }
        };
        self.last = Some(server);
        self.gets += names.len() as u64;
        let noble = self.cfg.noble();
        let expire_ms = opts.expire_us.unwrap_or(self.cfg.expire_us) / 1000;
        let mut ids = Vec::with_capacity(names.len());
        for n in names {
            let now = ep.now();
            match ep.client.request(now, n, RequestOpts { update: Some(1), ..opts.clone() }) {
                Ok(id) => ids.push(id),
                Err(e) => {
                    for id in ids {
                        let _ = ep.client.abort(now, id, crate::mtp::Abort::Destroy);
                    }
                    return Err(arg(e));
                }
            }
        }
        let mut sample = Sample::default();
        sample.take(&ep.client, ids[0], noble);
        let mut got: Vec<Option<Result<Vec<u8>, Fail>>> = vec![None; ids.len()];
        let mut left = ids.len();
        let mut channel_of = None;
        let run = ep.run(timeout, |c, _, o| {
            let (tx, r) = match o {
                Output::Progress { tx, .. } => {
                    if ids.contains(&tx) {
                        sample.take(c, tx, noble);
                    }
                    return false;
                }
                Output::Done { tx, object, channel, .. } => {
                    if ids.contains(&tx) {
                        channel_of = Some(channel);
                    }
                    (tx, Ok(object))
                }
                Output::Failed { tx, reason } => {
                    let code = if reason.contains(TOO_LARGE_MARK) { MTP_E_TOO_LARGE } else { MTP_E_REFUSED };
                    let what = if code == MTP_E_REFUSED { "refused" } else { "too large" };
                    (tx, Err((code, format!("{what}: {reason}"))))
                }
                Output::Expired { tx } => (tx, Err((MTP_E_EXPIRED, format!("expired: no reply for the expire time ({expire_ms} ms)")))),
                Output::Finished { tx, prefix, complete: false } | Output::Stopped { tx, prefix } => {
                    (tx, Err((MTP_E_ABORTED, format!("aborted with {} bytes of the object", prefix.len()))))
                }
                Output::Finished { tx, prefix, complete: true } => (tx, Ok(prefix)),
                _ => return false,
            };
            if let Some(k) = ids.iter().position(|&i| i == tx) {
                if got[k].is_none() {
                    got[k] = Some(r);
                    left -= 1;
                }
            }
            left == 0
        });
        // whatever is still open (the timeout, or a socket error) is destroyed
        let now = ep.now();
        for (k, &id) in ids.iter().enumerate() {
            if got[k].is_none() {
                let _ = ep.client.abort(now, id, crate::mtp::Abort::Destroy);
            }
        }
        run.map_err(|e| io_err("client socket", e))?;
        self.sample = sample;
        self.last_channel = channel_of.or(self.last_channel);
        let out: Vec<Result<Vec<u8>, Fail>> = got
            .into_iter()
            .map(|g| g.unwrap_or_else(|| Err((MTP_E_TIMEOUT, format!("timed out after {} ms; transaction destroyed", timeout.as_millis())))))
            .collect();
        for r in &out {
            match r {
                Ok(o) => {
                    self.done += 1;
                    self.bytes += o.len() as u64;
                    self.last_error = None;
                }
                Err((_, m)) => {
                    self.failed += 1;
                    self.last_error = Some(m.clone());
                }
            }
        }
        Ok(out)
    }

    fn stats(&self) -> Value {
        let s = &self.sample;
        let mut v = json!({
            "role": "client", "cc": self.cfg.cc, "link": self.link.name(), "bind": self.bind.map(|b| b.to_string()), "rcvbuf": self.cfg.rcvbuf,
            "max_size": self.cfg.max_size, "repeat_floor_us": self.cfg.repeat_floor_us,
            "expire_us": self.cfg.expire_us, "max_object": self.cfg.max_object,
            "gets": self.gets, "done": self.done, "failed": self.failed, "bytes": self.bytes,
            "last_error": self.last_error, "server": self.last.map(|a| a.to_string()),
            "channel": self.last_channel,
            "servers": self.eps.keys().map(|a| a.to_string()).collect::<Vec<_>>(),
            "window": s.window, "window_bytes": s.window_bytes, "peak_window": s.peak_window,
            "datagram_size": s.datagram_size, "flowtimeout_bytes": s.flowtimeout_bytes,
            "repeat_interval_us": s.repeat_interval_us, "min_rtt_us": s.min_rtt_us,
            "mean_rtt_us": s.mean_rtt_us, "transit_bytes": s.transit_bytes, "in_flight": s.in_flight,
        });
        if let Some(ep) = self.last.and_then(|a| self.eps.get(&a)) {
            let st = ep.client.stats();
            let (mean_window, mean_in_flight) = ep.client.occupancy();
            v["losses"] = json!(st.timeouts + st.fast_repeats);
            v["mean_window"] = json!(mean_window);
            v["mean_in_flight"] = json!(mean_in_flight);
            v["foreign"] = json!(ep.foreign);
            // the socket's own view (ch. V's receive-buffer watch): the buffer the kernel gave,
            // datagrams it dropped for a full buffer, and the watch's window cuts
            v["kernel_rcvbuf"] = json!(ep.kernel_rcvbuf);
            v["rcvbuf_drops"] = json!(ep.overflow_drops());
            v["watch_cuts"] = json!(ep.watch_cuts);
            v["counters"] = stats_json(&st);
        }
        v
    }
}

fn client<'a>(h: *mut MtpClient) -> Result<&'a mut MtpClient, Fail> {
    // SAFETY: the caller passes a pointer from mtp_client_new, not yet freed
    unsafe { h.as_mut() }.ok_or_else(|| arg("null client handle"))
}

/// A client. `window`: the window rules, "mtp" (the dissertation's, per transaction; null
/// means this), "mtp-cubic", "mtp-halve" or a crate algorithm (comparison only); `link`: an
/// mtp.h link-type hint by name (null: unknown); `rcvbuf` the receive buffer the window caps
/// assume (bytes); `max_size` the largest payload asked for; `repeat_floor_ms` the repeat
/// interval's floor; `expire_ms` the default expire time; `max_object` the largest object
/// accepted; `bind` the local address of its sockets ("ip:port"; null: the wildcard, port 0 picks
/// one; a fixed port allows one server per client). Each number 0 keeps its default. Null on
/// error.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mtp_client_new(
    window: *const c_char,
    link: *const c_char,
    rcvbuf: usize,
    max_size: usize,
    repeat_floor_ms: u32,
    expire_ms: u32,
    max_object: u32,
    bind: *const c_char,
    err: *mut c_char,
    cap: usize,
) -> *mut MtpClient {
    let r = guard(|| {
        let window = if window.is_null() { None } else { Some(text(window, "window rule").map_err(arg)?) };
        let link = if link.is_null() { None } else { Some(text(link, "link type").map_err(arg)?) };
        let (cfg, link) = client_config(window, link, rcvbuf, max_size, repeat_floor_ms, expire_ms, max_object)?;
        let bind = if bind.is_null() {
            None
        } else {
            let b = text(bind, "bind address").map_err(arg)?;
            Some(b.parse::<SocketAddr>().map_err(|e| arg(format!("bind address {b:?}: {e} (want ip:port)")))?)
        };
        Ok(MtpClient {
            cfg,
            link,
            bind,
            eps: HashMap::new(),
            last: None,
            sample: Sample::default(),
            gets: 0,
            done: 0,
            failed: 0,
            bytes: 0,
            last_error: None,
            last_channel: None,
        })
    });
    match r {
        Ok(c) => Box::into_raw(Box::new(c)),
        Err((_, msg)) => {
            write_err(err, cap, &msg);
            std::ptr::null_mut()
        }
    }
}

/// Fetch the whole object `name` (`name_len` bytes) from `server` ("host:port"), waiting up to
/// `timeout_ms`. `expire_ms` 0 keeps the client's expire time; `flags`: `MTP_SINGLE`. On
/// success returns `MTP_OK` with the object in `*out` (`*out_len` bytes; free it with
/// `mtp_free_buf`; null when empty); else a negative `MTP_E_*` code with the reason in `err`.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mtp_get(
    h: *mut MtpClient,
    server: *const c_char,
    name: *const u8,
    name_len: usize,
    expire_ms: u32,
    flags: u32,
    timeout_ms: u32,
    out: *mut *mut u8,
    out_len: *mut usize,
    err: *mut c_char,
    cap: usize,
) -> c_int {
    // SAFETY: as the caller's
    unsafe { mtp_get_channel(h, server, name, name_len, 0, expire_ms, flags, timeout_ms, out, out_len, std::ptr::null_mut(), err, cap) }
}

/// `mtp_get` on a channel: the request carries `channel` (0-255; ch. V "Channel Identifiers",
/// e.g. one a server handed back before), and `*channel_out` (when not null) receives the
/// channel the server's replies named, for reuse.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mtp_get_channel(
    h: *mut MtpClient,
    server: *const c_char,
    name: *const u8,
    name_len: usize,
    channel: u32,
    expire_ms: u32,
    flags: u32,
    timeout_ms: u32,
    out: *mut *mut u8,
    out_len: *mut usize,
    channel_out: *mut u32,
    err: *mut c_char,
    cap: usize,
) -> c_int {
    write_err(err, cap, "");
    let r = guard(|| {
        // SAFETY: the caller passes writable out-pointers (or null, an error)
        let (Some(out), Some(out_len)) = (unsafe { out.as_mut() }, unsafe { out_len.as_mut() }) else {
            return Err(arg("out and out_len must not be null"));
        };
        let channel = u8::try_from(channel).map_err(|_| arg(format!("a channel is 0 to 255, got {channel}")))?;
        *out = std::ptr::null_mut();
        *out_len = 0;
        let c = client(h)?;
        if flags & !MTP_SINGLE != 0 {
            return Err(arg(format!("unknown flags {:#x}", flags & !MTP_SINGLE)));
        }
        let server = addr_of(text(server, "server address").map_err(arg)?)?;
        let name = bytes(name, name_len, "name")?;
        let opts = RequestOpts {
            expire_us: (expire_ms > 0).then_some(expire_ms as u64 * 1000),
            single: flags & MTP_SINGLE != 0,
            channel,
            ..RequestOpts::default()
        };
        let obj = c.get(server, name, opts, Duration::from_millis(timeout_ms as u64))?;
        // SAFETY: null or writable
        if let (Some(co), Some(ch)) = (unsafe { channel_out.as_mut() }, c.last_channel) {
            *co = ch as u32;
        }
        if !obj.is_empty() {
            *out_len = obj.len();
            *out = Box::into_raw(obj.into_boxed_slice()) as *mut u8;
        }
        Ok(())
    });
    code(r, err, cap)
}

/// Fetch `n` objects from `server` at once, one transaction each, waiting up to `timeout_ms`
/// for all of them. `names[i]`/`name_lens[i]` name object i; on return `outs[i]`/`out_lens[i]`
/// hold it (free each with `mtp_free_buf`), `codes[i]` is its `MTP_OK` or `MTP_E_*` code and
/// `reasons[i]` null or its reason (free with `mtp_free_str`). Returns `MTP_OK` when every
/// object came, the number that did not (> 0), or a negative code with the reason in `err`
/// when nothing was fetched (a bad argument, a socket error).
///
/// # Safety
/// See the module documentation; the six arrays have `n` elements.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mtp_get_many(
    h: *mut MtpClient,
    server: *const c_char,
    names: *const *const u8,
    name_lens: *const usize,
    n: usize,
    expire_ms: u32,
    flags: u32,
    timeout_ms: u32,
    outs: *mut *mut u8,
    out_lens: *mut usize,
    codes: *mut c_int,
    reasons: *mut *mut c_char,
    err: *mut c_char,
    cap: usize,
) -> c_int {
    write_err(err, cap, "");
    let r = guard(|| {
        if n == 0 {
            return Err(arg("no names to fetch"));
        }
        if [names as usize, name_lens as usize, outs as usize, out_lens as usize, codes as usize, reasons as usize].contains(&0) {
            return Err(arg("names, name_lens, outs, out_lens, codes and reasons must not be null"));
        }
        // SAFETY: the caller passes arrays of `n` elements
        let (names, name_lens) = unsafe { (std::slice::from_raw_parts(names, n), std::slice::from_raw_parts(name_lens, n)) };
        let (outs, out_lens) = unsafe { (std::slice::from_raw_parts_mut(outs, n), std::slice::from_raw_parts_mut(out_lens, n)) };
        let (codes, reasons) = unsafe { (std::slice::from_raw_parts_mut(codes, n), std::slice::from_raw_parts_mut(reasons, n)) };
        for k in 0..n {
            (outs[k], out_lens[k], codes[k], reasons[k]) = (std::ptr::null_mut(), 0, MTP_E_ARG, std::ptr::null_mut());
        }
        let c = client(h)?;
        if flags & !MTP_SINGLE != 0 {
            return Err(arg(format!("unknown flags {:#x}", flags & !MTP_SINGLE)));
        }
        let server = addr_of(text(server, "server address").map_err(arg)?)?;
        let names = (0..n).map(|k| bytes(names[k], name_lens[k], "name")).collect::<Result<Vec<_>, _>>()?;
        let opts = RequestOpts {
            expire_us: (expire_ms > 0).then_some(expire_ms as u64 * 1000),
            single: flags & MTP_SINGLE != 0,
            ..RequestOpts::default()
        };
        let results = c.get_many(server, &names, opts, Duration::from_millis(timeout_ms as u64))?;
        let mut missing = 0;
        for (k, r) in results.into_iter().enumerate() {
            match r {
                Ok(obj) => {
                    codes[k] = MTP_OK;
                    if !obj.is_empty() {
                        out_lens[k] = obj.len();
                        outs[k] = Box::into_raw(obj.into_boxed_slice()) as *mut u8;
                    }
                }
                Err((code, why)) => {
                    missing += 1;
                    codes[k] = code;
                    reasons[k] = std::ffi::CString::new(why.replace('\0', " ")).map_or(std::ptr::null_mut(), |s| s.into_raw());
                }
            }
        }
        Ok(missing)
    });
    match r {
        Ok(missing) => missing,
        Err((c, msg)) => {
            write_err(err, cap, &msg);
            c
        }
    }
}

/// Give back an object from `mtp_get`.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_free_buf(p: *mut u8, len: usize) {
    if !p.is_null() {
        // SAFETY: `p` and `len` come from mtp_get, which made them from a boxed slice
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) });
    }
}

/// The client's options, counters and the last transaction's flow as a JSON object (free
/// with `mtp_free_str`); null for a null handle.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_client_stats(h: *mut MtpClient) -> *mut c_char {
    guard(|| Ok(json_str(client(h)?.stats()))).unwrap_or(std::ptr::null_mut())
}

/// Release a client and its sockets (its transactions ended with each `mtp_get`).
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_client_free(h: *mut MtpClient) {
    if !h.is_null() {
        // SAFETY: `h` comes from mtp_client_new and is freed once
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(h) })));
    }
}

/// Give back a string from `mtp_*_stats` or `mtp_get_many`'s reasons.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn mtp_free_str(p: *mut c_char) {
    if !p.is_null() {
        // SAFETY: `p` comes from mtp_*_stats
        drop(unsafe { std::ffi::CString::from_raw(p) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{CStr, CString};

    struct ErrBuf([c_char; 256]);
    impl ErrBuf {
        fn new() -> ErrBuf {
            ErrBuf([0; 256])
        }
        fn p(&mut self) -> *mut c_char {
            self.0.as_mut_ptr()
        }
        fn msg(&self) -> String {
            unsafe { CStr::from_ptr(self.0.as_ptr()) }.to_string_lossy().into_owned()
        }
    }

    fn new_client(window: &str, link: &str, max_object: u32, e: &mut ErrBuf) -> *mut MtpClient {
        let (w, l) = (CString::new(window).unwrap(), CString::new(link).unwrap());
        unsafe { mtp_client_new(w.as_ptr(), l.as_ptr(), 0, 0, 0, 0, max_object, std::ptr::null(), e.p(), 256) }
    }

    fn get(c: *mut MtpClient, server: &str, name: &[u8], expire_ms: u32, flags: u32, timeout_ms: u32, e: &mut ErrBuf) -> (c_int, Vec<u8>) {
        let s = CString::new(server).unwrap();
        let (mut out, mut len) = (std::ptr::null_mut(), 0usize);
        let r = unsafe { mtp_get(c, s.as_ptr(), name.as_ptr(), name.len(), expire_ms, flags, timeout_ms, &mut out, &mut len, e.p(), 256) };
        let v = if out.is_null() { Vec::new() } else { unsafe { std::slice::from_raw_parts(out, len) }.to_vec() };
        unsafe { mtp_free_buf(out, len) };
        (r, v)
    }

    fn serve_loopback() -> (*mut MtpServer, String) {
        let mut e = ErrBuf::new();
        let a = CString::new("127.0.0.1:0").unwrap();
        let s = unsafe { mtp_server_new(a.as_ptr(), std::ptr::null(), 0, e.p(), 256) };
        assert!(!s.is_null(), "{}", e.msg());
        let port = unsafe { mtp_server_port(s, e.p(), 256) };
        assert!(port > 0);
        (s, format!("127.0.0.1:{port}"))
    }

    #[test]
    fn bad_client_options_are_errors_with_a_reason() {
        let mut e = ErrBuf::new();
        assert!(new_client("warp", "unknown", 0, &mut e).is_null());
        assert!(e.msg().contains("unknown window rule \"warp\""), "{}", e.msg());
        assert!(new_client("mtp", "carrier-pigeon", 0, &mut e).is_null());
        assert!(e.msg().contains("unknown link type") && e.msg().contains("ethernet"), "{}", e.msg());
        let c = unsafe { mtp_client_new(std::ptr::null(), std::ptr::null(), 100, 0, 0, 0, 0, std::ptr::null(), e.p(), 256) };
        assert!(c.is_null());
        assert!(e.msg().contains("rcvbuf"), "{}", e.msg());
        let c = unsafe { mtp_client_new(std::ptr::null(), std::ptr::null(), 0, 100_000, 0, 0, 0, std::ptr::null(), e.p(), 256) };
        assert!(c.is_null() && e.msg().contains("max_size"), "{}", e.msg());
        let b = CString::new("localhost").unwrap();
        let c = unsafe { mtp_client_new(std::ptr::null(), std::ptr::null(), 0, 0, 0, 0, 0, b.as_ptr(), e.p(), 256) };
        assert!(c.is_null() && e.msg().contains("bind address \"localhost\""), "{}", e.msg());
        for w in ["mtp", "mtp-cubic", "mtp-halve", "newreno"] {
            let c = new_client(w, "fast", 0, &mut e);
            assert!(!c.is_null(), "{w}: {}", e.msg());
            unsafe { mtp_client_free(c) };
        }
    }

    #[test]
    fn null_handles_and_bad_arguments_return_codes_not_panics() {
        let mut e = ErrBuf::new();
        assert_eq!(unsafe { mtp_server_port(std::ptr::null_mut(), e.p(), 256) }, MTP_E_ARG);
        assert_eq!(e.msg(), "null server handle");
        assert_eq!(unsafe { mtp_server_stop(std::ptr::null_mut(), e.p(), 256) }, MTP_E_ARG);
        assert!(unsafe { mtp_server_stats(std::ptr::null_mut()) }.is_null());
        assert!(unsafe { mtp_client_stats(std::ptr::null_mut()) }.is_null());
        unsafe { mtp_server_free(std::ptr::null_mut()) };
        unsafe { mtp_client_free(std::ptr::null_mut()) };
        assert_eq!(get(std::ptr::null_mut(), "127.0.0.1:1", b"x", 0, 0, 10, &mut e).0, MTP_E_ARG);
        assert_eq!(e.msg(), "null client handle");
        let c = new_client("mtp", "unknown", 0, &mut e);
        assert_eq!(get(c, "not an address", b"x", 0, 0, 10, &mut e).0, MTP_E_ARG);
        assert!(e.msg().contains("not an address"), "{}", e.msg());
        assert_eq!(get(c, "127.0.0.1:1", b"", 0, 0, 10, &mut e).0, MTP_E_ARG);
        assert_eq!(e.msg(), "a name has 1 to 1024 bytes, got 0");
        assert_eq!(get(c, "127.0.0.1:1", &[b'n'; 2000], 0, 0, 10, &mut e).0, MTP_E_ARG);
        assert_eq!(e.msg(), "a name has 1 to 1024 bytes, got 2000");
        assert_eq!(get(c, "127.0.0.1:1", b"x", 0, 0x80, 10, &mut e).0, MTP_E_ARG);
        let s = CString::new("127.0.0.1:1").unwrap();
        let r = unsafe { mtp_get(c, s.as_ptr(), b"x".as_ptr(), 1, 0, 0, 10, std::ptr::null_mut(), std::ptr::null_mut(), e.p(), 256) };
        assert_eq!(r, MTP_E_ARG);
        let r = unsafe { mtp_get(c, std::ptr::null(), b"x".as_ptr(), 1, 0, 0, 10, &mut std::ptr::null_mut(), &mut 0, e.p(), 256) };
        assert_eq!((r, e.msg()), (MTP_E_ARG, "server address is missing".to_string()));
        unsafe { mtp_client_free(c) };
        let a = CString::new("127.0.0.1:0").unwrap();
        let d = CString::new("/nonexistent/dir").unwrap();
        assert!(unsafe { mtp_server_new(a.as_ptr(), d.as_ptr(), 0, e.p(), 256) }.is_null());
        assert!(e.msg().contains("not a directory"), "{}", e.msg());
        let bad = CString::new("999.0.0.1:0").unwrap();
        assert!(unsafe { mtp_server_new(bad.as_ptr(), std::ptr::null(), 0, e.p(), 256) }.is_null());
        assert!(!e.msg().is_empty());
    }

    #[test]
    fn a_fixed_local_port_serves_one_server_and_the_response_limit_reaches_the_client() {
        let mut e = ErrBuf::new();
        let (s1, a1) = serve_loopback();
        let (s2, a2) = serve_loopback();
        let a = CString::new("127.0.0.1:0").unwrap();
        let limited = unsafe { mtp_server_new(a.as_ptr(), std::ptr::null(), 600, e.p(), 256) };
        let a3 = format!("127.0.0.1:{}", unsafe { mtp_server_port(limited, e.p(), 256) });
        let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let b = CString::new(format!("127.0.0.1:{port}")).unwrap();
        let c = unsafe { mtp_client_new(std::ptr::null(), std::ptr::null(), 0, 0, 0, 0, 0, b.as_ptr(), e.p(), 256) };
        assert!(!c.is_null(), "{}", e.msg());
        let want = crate::mtp::server::pattern(0, 5000);
        assert_eq!(get(c, &a1, b"size:5000", 0, 0, 10_000, &mut e), (MTP_OK, want.clone()));
        assert_eq!(get(c, &a1, b"size:5000", 0, 0, 10_000, &mut e), (MTP_OK, want.clone()));
        assert_eq!(get(c, &a2, b"size:5000", 0, 0, 10_000, &mut e).0, MTP_E_ARG);
        assert!(e.msg().contains("one server per client"), "{}", e.msg());
        unsafe { mtp_client_free(c) };
        let c = new_client("mtp", "unknown", 0, &mut e);
        assert_eq!(get(c, &a3, b"size:5000", 0, 0, 10_000, &mut e), (MTP_OK, want));
        assert!(unsafe { &*c }.eps.values().all(|ep| ep.client.stats().server_limited > 0));
        unsafe { mtp_client_free(c) };
        for s in [s1, s2, limited] {
            unsafe { mtp_server_free(s) };
        }
    }

    #[test]
    fn get_many_runs_transactions_at_once_and_codes_each() {
        let mut e = ErrBuf::new();
        let (s, addr) = serve_loopback();
        let c = new_client("mtp", "unknown", 0, &mut e);
        let names: [&[u8]; 3] = [b"size:300000", b"missing", b"size:700"];
        let ptrs: Vec<*const u8> = names.iter().map(|n| n.as_ptr()).collect();
        let lens: Vec<usize> = names.iter().map(|n| n.len()).collect();
        let (mut outs, mut out_lens, mut codes, mut reasons) = ([std::ptr::null_mut(); 3], [0usize; 3], [99 as c_int; 3], [std::ptr::null_mut(); 3]);
        let srv = CString::new(addr.clone()).unwrap();
        let call = |outs: &mut [*mut u8; 3], out_lens: &mut [usize; 3], codes: &mut [c_int; 3], reasons: &mut [*mut c_char; 3], e: &mut ErrBuf, n: usize| unsafe {
            mtp_get_many(c, srv.as_ptr(), ptrs.as_ptr(), lens.as_ptr(), n, 0, 0, 20_000, outs.as_mut_ptr(), out_lens.as_mut_ptr(), codes.as_mut_ptr(), reasons.as_mut_ptr(), e.p(), 256)
        };
        assert_eq!(call(&mut outs, &mut out_lens, &mut codes, &mut reasons, &mut e, 3), 1, "{}", e.msg());
        assert_eq!(codes, [MTP_OK, MTP_E_REFUSED, MTP_OK]);
        for (k, want) in [(0, crate::mtp::server::pattern(0, 300_000)), (2, crate::mtp::server::pattern(0, 700))] {
            assert_eq!(unsafe { std::slice::from_raw_parts(outs[k], out_lens[k]) }, &want[..]);
            assert!(reasons[k].is_null());
            unsafe { mtp_free_buf(outs[k], out_lens[k]) };
        }
        assert!(outs[1].is_null());
        let why = unsafe { CStr::from_ptr(reasons[1]) }.to_string_lossy().into_owned();
        assert!(why.contains("no object named \"missing\""), "{why}");
        unsafe { mtp_free_str(reasons[1]) };
        assert_eq!(call(&mut outs, &mut out_lens, &mut codes, &mut reasons, &mut e, 0), MTP_E_ARG);
        assert_eq!(e.msg(), "no names to fetch");
        unsafe { mtp_client_free(c) };
        unsafe { mtp_server_free(s) };
    }

    #[test]
    fn a_panic_is_caught_and_named() {
        let r: Result<(), Fail> = guard(|| panic!("boom"));
        assert_eq!(r, Err((MTP_E_PANIC, "internal error (panic): boom".into())));
    }

    #[test]
    fn refused_too_large_expired_and_timed_out_have_their_codes() {
        let mut e = ErrBuf::new();
        let (s, addr) = serve_loopback();
        let name = b"small";
        assert_eq!(unsafe { mtp_server_put(s, name.as_ptr(), name.len(), b"hello".as_ptr(), 5, e.p(), 256) }, MTP_OK);
        assert_eq!(unsafe { mtp_server_put(s, name.as_ptr(), 0, b"x".as_ptr(), 1, e.p(), 256) }, MTP_E_ARG);
        let c = new_client("mtp", "ethernet", 10_000, &mut e);
        assert_eq!(get(c, &addr, b"small", 0, 0, 10_000, &mut e), (MTP_OK, b"hello".to_vec()));
        assert_eq!(get(c, &addr, b"small", 0, MTP_SINGLE, 10_000, &mut e), (MTP_OK, b"hello".to_vec()));
        assert_eq!(get(c, &addr, b"missing", 0, 0, 10_000, &mut e).0, MTP_E_REFUSED);
        assert!(e.msg().starts_with("refused: no object named \"missing\""), "{}", e.msg());
        assert_eq!(get(c, &addr, b"size:20000", 0, 0, 10_000, &mut e).0, MTP_E_TOO_LARGE);
        assert!(e.msg().contains(TOO_LARGE_MARK), "{}", e.msg());
        assert_eq!(unsafe { mtp_server_remove(s, name.as_ptr(), name.len(), e.p(), 256) }, MTP_OK);
        assert_eq!(unsafe { mtp_server_remove(s, name.as_ptr(), name.len(), e.p(), 256) }, MTP_E_ARG);
        assert_eq!(get(c, &addr, b"small", 0, 0, 10_000, &mut e).0, MTP_E_REFUSED);
        assert_eq!(unsafe { mtp_server_stop(s, e.p(), 256) }, MTP_OK);
        assert_eq!(unsafe { mtp_server_stop(s, e.p(), 256) }, MTP_OK);
        // nobody answers now: the expire time or the call's timeout, whichever is first
        assert_eq!(get(c, &addr, b"size:10", 200, 0, 10_000, &mut e).0, MTP_E_EXPIRED);
        assert!(e.msg().starts_with("expired"), "{}", e.msg());
        assert_eq!(get(c, &addr, b"size:10", 0, 0, 200, &mut e).0, MTP_E_TIMEOUT);
        let st = unsafe { mtp_client_stats(c) };
        let v: Value = serde_json::from_str(unsafe { CStr::from_ptr(st) }.to_str().unwrap()).unwrap();
        unsafe { mtp_free_str(st) };
        assert_eq!((v["gets"].as_u64(), v["done"].as_u64(), v["failed"].as_u64()), (Some(7), Some(2), Some(5)));
        let st = unsafe { mtp_server_stats(s) };
        let v: Value = serde_json::from_str(unsafe { CStr::from_ptr(st) }.to_str().unwrap()).unwrap();
        unsafe { mtp_free_str(st) };
        assert_eq!(v["running"], json!(false));
        assert!(v["final"]["refused"].as_u64().unwrap() >= 2, "{v}");
        unsafe { mtp_client_free(c) };
        unsafe { mtp_server_free(s) };
    }
}
