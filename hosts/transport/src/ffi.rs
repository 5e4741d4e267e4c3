//! The C ABI for other languages (Python's `concast.hosts.ctp` loads it with ctypes).
//!
//! An endpoint is an opaque pointer: a client (one session on its own socket, `udp::Conn`) or a
//! server (sessions by peer address, `udp::Server`). Every call that can fail returns a negative
//! number or null and writes the reason, NUL-terminated, into the caller's `err` buffer. Calls
//! that wait take a timeout in milliseconds and pump the endpoint's socket meanwhile; nothing
//! runs in the background, so an endpoint only makes progress inside a call. An endpoint must
//! be used from one thread at a time; different endpoints are independent.
//!
//! Messages received are queued inside the endpoint until `ctp_recv` takes them; the queue's
//! length is the application backlog XON/XOFF and RTS/CTS act on.
//!
//! Safety, for every function: an endpoint pointer comes from `ctp_client`/`ctp_server` and is
//! not yet freed; strings are NUL-terminated; `data`/`len` and `err`/`cap` describe readable and
//! writable buffers of that many bytes; buffers and strings returned are freed once, with the
//! matching `ctp_free_*`.
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, CStr};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::cc;
use crate::composite::Composite;
use crate::micro::oob::URGENT;
use crate::session::{Config, Output, SendError, Session};
use crate::udp::{Conn, Server};

/// Flag for `ctp_send`: an urgent message (Out of Band).
pub const CTP_URGENT: c_int = 1;

const PUMP: Duration = Duration::from_millis(2);

enum Kind {
    Client(Box<Conn>),
    Server(Box<Server>),
}

pub struct Endpoint {
    kind: Kind,
    inbox: VecDeque<(SocketAddr, Vec<u8>)>,
    opened: bool,
    /// Why the (client's) session ended, once it has.
    ended: Option<String>,
}

impl Endpoint {
    fn new(kind: Kind) -> Endpoint {
        Endpoint { kind, inbox: VecDeque::new(), opened: false, ended: None }
    }
}

/// A new endpoint as a handle for C, or null with the reason written to `err`.
fn handle_or_error(r: Result<Endpoint, String>, err: *mut c_char, cap: usize) -> *mut Endpoint {
    match r {
        Ok(e) => Box::into_raw(Box::new(e)),
        Err(e) => {
            write_err(err, cap, &e);
            std::ptr::null_mut()
        }
    }
}

pub(crate) fn write_err(err: *mut c_char, cap: usize, msg: &str) {
    if err.is_null() || cap == 0 {
        return;
    }
    let n = msg.len().min(cap - 1);
    // SAFETY: the caller passes a writable buffer of `cap` bytes
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), err as *mut u8, n);
        *err.add(n) = 0;
    }
}

pub(crate) fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, String> {
    if p.is_null() {
        return Err(format!("{what} is missing"));
    }
    // SAFETY: the caller passes a NUL-terminated string
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| format!("{what} is not UTF-8"))
}

/// A session configuration from the names the caller gives; a bad name is an error, not a panic.
fn config(composite: &str, cc_name: &str, mss: usize) -> Result<Config, String> {
    let c = Composite::parse(composite).map_err(|r| r.to_string())?;
    cc::by_name(cc_name, 100e6)?;
    let mut cfg = Config::new(c);
    cfg.cc = cc_name.to_string();
    if mss > 0 {
        if !(64..=65_000).contains(&mss) {
            return Err(format!("mss must be 64..65000 bytes, got {mss}"));
        }
        cfg.mss = mss;
    }
    Ok(cfg)
}

impl Endpoint {
    fn session(&mut self, peer: Option<SocketAddr>) -> Result<(&mut Session, u64), String> {
        match (&mut self.kind, peer) {
            (Kind::Client(c), _) => {
                let now = c.now();
                Ok((&mut c.session, now))
            }
            (Kind::Server(s), Some(p)) => {
                let now = s.now();
                s.sessions.get_mut(&p).map(|x| (x, now)).ok_or_else(|| format!("no session with {p}"))
            }
            (Kind::Server(_), None) => Err("a server sends to a peer: give its address".into()),
        }
    }

    /// One round of socket work; outputs go to the inbox and the state flags.
    fn pump(&mut self, wait: Duration) -> Result<(), String> {
        let backlog = self.inbox.len();
        let outs: Vec<(Option<SocketAddr>, Output)> = match &mut self.kind {
            Kind::Client(c) => {
                c.session.set_backlog(backlog);
                let peer = None;
                c.pump(wait).map_err(|e| e.to_string())?.into_iter().map(|o| (peer, o)).collect()
            }
            Kind::Server(s) => {
                for x in s.sessions.values_mut() {
                    x.set_backlog(backlog);
                }
                s.pump(wait).map_err(|e| e.to_string())?.into_iter().map(|(a, o)| (Some(a), o)).collect()
            }
        };
        for (peer, o) in outs {
            let from = peer.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
            match o {
                Output::Deliver(m) => self.inbox.push_back((from, m)),
                Output::Opened => self.opened = true,
                Output::Refused(why) => self.ended = Some(format!("refused: {why}")),
                Output::Closed(why) if peer.is_none() => self.ended = Some(why),
                Output::Closed(_) => {} // a server's session: reaped below
                Output::Transmit(_) => {}
            }
        }
        if let Kind::Server(s) = &mut self.kind {
            s.reap();
        }
        Ok(())
    }

    fn check_ended(&self) -> Result<(), String> {
        match &self.ended {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    fn send(&mut self, peer: Option<SocketAddr>, msg: &[u8], tag: u64, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_ended()?;
            let (s, now) = self.session(peer)?;
            match s.send_tagged(msg, tag, now) {
                Ok(()) => return self.pump(Duration::ZERO),
                Err(SendError::Full) => {}
                Err(SendError::Closed) => return Err("the session is closed".into()),
                Err(SendError::TooLong) => return Err(format!("message of {} bytes is too long", msg.len())),
            }
            if Instant::now() >= deadline {
                return Err("timed out: the send buffer stayed full".into());
            }
            self.pump(PUMP)?;
        }
    }

    fn recv(&mut self, timeout: Duration) -> Result<Option<(SocketAddr, Vec<u8>)>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(m) = self.inbox.pop_front() {
                return Ok(Some(m));
            }
            self.check_ended()?;
            if Instant::now() >= deadline {
                return Ok(None);
            }
            self.pump(PUMP)?;
        }
    }

    fn stats(&self) -> serde_json::Value {
        let sessions: Vec<(String, &Session)> = match &self.kind {
            Kind::Client(c) => vec![("server".into(), &c.session)],
            Kind::Server(s) => s.sessions.iter().map(|(a, x)| (a.to_string(), x)).collect(),
        };
        let one = |s: &Session| {
            let (st, sh) = (s.stats(), s.shared());
            serde_json::json!({
                "composite": s.composite().to_string(),
                "segs_sent": st.segs_sent, "segs_received": st.segs_received,
                "bytes_sent": st.bytes_sent, "retransmits": st.retransmits, "timeouts": st.timeouts,
                "malformed": st.malformed, "duplicates": st.duplicates, "late": st.late,
                "foreign": st.foreign, "fec_recovered": st.fec_recovered,
                "msgs_incomplete": st.msgs_incomplete, "msgs_delivered": st.msgs_delivered,
                "srtt_us": sh.srtt_us, "rto_us": sh.rto(),
                "cwnd": if sh.cwnd.is_finite() { serde_json::json!(sh.cwnd) } else { serde_json::Value::Null },
                "established": sh.established, "closed": sh.closed,
            })
        };
        let mut v = serde_json::json!({
            "role": if matches!(self.kind, Kind::Client(_)) { "client" } else { "server" },
            "opened": self.opened, "ended": self.ended, "queued": self.inbox.len(),
        });
        match &self.kind {
            Kind::Client(c) => v["session"] = one(&c.session),
            Kind::Server(s) => {
                v["refused"] = s.refused.iter().map(|(a, w)| serde_json::json!([a.to_string(), w])).collect();
                v["sessions"] = sessions.into_iter().map(|(a, s)| (a, one(s))).collect::<serde_json::Map<_, _>>().into();
            }
        }
        v
    }
}

fn ms(t: u32) -> Duration {
    Duration::from_millis(t as u64)
}

/// Borrow an endpoint; null is an error.
fn ep<'a>(h: *mut Endpoint, err: *mut c_char, cap: usize) -> Option<&'a mut Endpoint> {
    // SAFETY: the caller passes a pointer from ctp_client/ctp_server, not yet freed
    let e = unsafe { h.as_mut() };
    if e.is_none() {
        write_err(err, cap, "null endpoint");
    }
    e
}

fn status(r: Result<(), String>, err: *mut c_char, cap: usize) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            write_err(err, cap, &e);
            -1
        }
    }
}

/// Open a client session to `addr` ("host:port") with a composite (preset or micro+micro) and a
/// congestion-control algorithm; `mss` 0 keeps the default. Null on error.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_client(
    addr: *const c_char,
    composite: *const c_char,
    cc: *const c_char,
    mss: usize,
    err: *mut c_char,
    cap: usize,
) -> *mut Endpoint {
    let r = (|| -> Result<Endpoint, String> {
        let cfg = config(text(composite, "composite")?, text(cc, "congestion control")?, mss)?;
        let addr = text(addr, "address")?;
        let conn = Conn::connect(addr, cfg).map_err(|e| format!("{addr}: {e}"))?;
        Ok(Endpoint::new(Kind::Client(Box::new(conn))))
    })();
    handle_or_error(r, err, cap)
}

/// Listen on `addr`; `composite` null serves any valid composite, else only that one (others
/// are refused with the reason). Null on error.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_server(
    addr: *const c_char,
    composite: *const c_char,
    cc: *const c_char,
    mss: usize,
    err: *mut c_char,
    cap: usize,
) -> *mut Endpoint {
    let r = (|| -> Result<Endpoint, String> {
        let serve = if composite.is_null() { "Bulk" } else { text(composite, "composite")? };
        let cfg = config(serve, text(cc, "congestion control")?, mss)?;
        let only = (!composite.is_null()).then_some(cfg.composite);
        let addr = text(addr, "address")?;
        let srv = Server::bind(addr, cfg, only).map_err(|e| format!("{addr}: {e}"))?;
        Ok(Endpoint::new(Kind::Server(Box::new(srv))))
    })();
    handle_or_error(r, err, cap)
}

/// The UDP port a server listens on (after binding port 0); -1 on error.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_port(h: *mut Endpoint, err: *mut c_char, cap: usize) -> c_int {
    let Some(e) = ep(h, err, cap) else { return -1 };
    match &e.kind {
        Kind::Server(s) => s.local_addr().map(|a| a.port() as c_int).unwrap_or(-1),
        Kind::Client(_) => {
            write_err(err, cap, "a client has no listening port");
            -1
        }
    }
}

/// Client: wait until the server accepted the session. 0 open, -1 refused/closed/timed out.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_wait_open(h: *mut Endpoint, timeout_ms: u32, err: *mut c_char, cap: usize) -> c_int {
    let Some(e) = ep(h, err, cap) else { return -1 };
    let deadline = Instant::now() + ms(timeout_ms);
    let r = (|| -> Result<(), String> { loop {
        e.check_ended()?;
        if e.opened {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err("timed out waiting for the server".to_string());
        }
        e.pump(PUMP)?;
    } })();
    status(r, err, cap)
}

/// Pump until everything sent has left and (when the composite acknowledges) been
/// acknowledged: every session's segment table is empty. 0, or -1 on timeout or error.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_flush(h: *mut Endpoint, timeout_ms: u32, err: *mut c_char, cap: usize) -> c_int {
    let Some(e) = ep(h, err, cap) else { return -1 };
    let deadline = Instant::now() + ms(timeout_ms);
    let r = (|| -> Result<(), String> {
        loop {
            let idle = match &e.kind {
                Kind::Client(c) => c.session.live_segments() == 0,
                Kind::Server(s) => s.sessions.values().all(|x| x.live_segments() == 0),
            };
            if idle {
                return Ok(());
            }
            e.check_ended()?;
            if Instant::now() >= deadline {
                return Err("timed out: sent data is still unacknowledged".to_string());
            }
            e.pump(PUMP)?;
        }
    })();
    status(r, err, cap)
}

/// Send one message (`flags`: CTP_URGENT). A server names the peer ("ip:port"); a client
/// passes null. Waits up to `timeout_ms` while the send buffer is full. 0 or -1.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_send(
    h: *mut Endpoint,
    peer: *const c_char,
    data: *const u8,
    len: usize,
    flags: c_int,
    timeout_ms: u32,
    err: *mut c_char,
    cap: usize,
) -> c_int {
    let Some(e) = ep(h, err, cap) else { return -1 };
    let r = (|| -> Result<(), String> {
        let peer = if peer.is_null() {
            None
        } else {
            Some(text(peer, "peer")?.parse::<SocketAddr>().map_err(|x| format!("peer: {x}"))?)
        };
        let msg = if len == 0 { &[][..] } else {
            // SAFETY: the caller passes `len` readable bytes
            unsafe { std::slice::from_raw_parts(data, len) }
        };
        let tag = if flags & CTP_URGENT != 0 { URGENT } else { 0 };
        e.send(peer, msg, tag, ms(timeout_ms))
    })();
    status(r, err, cap)
}

/// Receive one message, waiting up to `timeout_ms`. Returns a buffer of `*len` bytes to give
/// back with `ctp_free_buf`, and the sender's address in `peer` (a server's only). Null with
/// `*len` 0 and an empty `err` on timeout; null with the reason in `err` when the session ended.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_recv(
    h: *mut Endpoint,
    timeout_ms: u32,
    len: *mut usize,
    peer: *mut c_char,
    peer_cap: usize,
    err: *mut c_char,
    cap: usize,
) -> *mut u8 {
    write_err(err, cap, "");
    // SAFETY: the caller passes a writable usize
    if let Some(l) = unsafe { len.as_mut() } {
        *l = 0;
    }
    let Some(e) = ep(h, err, cap) else { return std::ptr::null_mut() };
    match e.recv(ms(timeout_ms)) {
        Ok(Some((from, m))) => {
            write_err(peer, peer_cap, &from.to_string());
            let b = m.into_boxed_slice();
            // SAFETY: as above
            if let Some(l) = unsafe { len.as_mut() } {
                *l = b.len();
            }
            Box::into_raw(b) as *mut u8
        }
        Ok(None) => std::ptr::null_mut(),
        Err(why) => {
            write_err(err, cap, &why);
            std::ptr::null_mut()
        }
    }
}

/// Give back a buffer from `ctp_recv`.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_free_buf(p: *mut u8, len: usize) {
    if !p.is_null() {
        // SAFETY: `p` and `len` come from ctp_recv, which made them from a boxed slice
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) });
    }
}

/// Close: a client's session once everything sent is done (waits up to `timeout_ms` for it);
/// a server closes all its sessions. 0, or -1 with the reason when it did not close in time.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_close(h: *mut Endpoint, timeout_ms: u32, err: *mut c_char, cap: usize) -> c_int {
    let Some(e) = ep(h, err, cap) else { return -1 };
    let deadline = Instant::now() + ms(timeout_ms);
    let r = (|| -> Result<(), String> {
        match &mut e.kind {
            Kind::Client(c) => {
                let now = c.now();
                c.session.close(now);
            }
            Kind::Server(s) => {
                let now = s.now();
                s.sessions.values_mut().for_each(|x| x.close(now));
            }
        }
        loop {
            let done = match &e.kind {
                Kind::Client(c) => c.session.is_closed(),
                Kind::Server(s) => s.sessions.is_empty(),
            };
            if done {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err("timed out closing: the peer did not acknowledge everything".to_string());
            }
            e.pump(PUMP)?;
        }
    })();
    status(r, err, cap)
}

/// Statistics as a JSON object (free with `ctp_free_str`).
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_stats(h: *mut Endpoint) -> *mut c_char {
    // SAFETY: as in `ep`
    let Some(e) = (unsafe { h.as_mut() }) else { return std::ptr::null_mut() };
    let s = e.stats().to_string();
    std::ffi::CString::new(s).map_or(std::ptr::null_mut(), |c| c.into_raw())
}

///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_free_str(p: *mut c_char) {
    if !p.is_null() {
        // SAFETY: `p` comes from ctp_stats
        drop(unsafe { std::ffi::CString::from_raw(p) });
    }
}

/// Release an endpoint and its socket (without closing its sessions: call ctp_close first).
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_free(h: *mut Endpoint) {
    if !h.is_null() {
        // SAFETY: `h` comes from ctp_client/ctp_server and is freed once
        drop(unsafe { Box::from_raw(h) });
    }
}

/// Check a composite without opening anything: 0 valid, -1 with the refusal reason.
///
/// # Safety
/// See the module documentation.
#[no_mangle]
pub unsafe extern "C" fn ctp_check_composite(composite: *const c_char, err: *mut c_char, cap: usize) -> c_int {
    let r = text(composite, "composite").and_then(|c| Composite::parse(c).map(|_| ()).map_err(|r| r.to_string()));
    status(r, err, cap)
}
