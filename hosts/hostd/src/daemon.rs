//! The event loop: one thread, one poll(2) per turn over the raw sockets, the API socket and
//! its clients, and the UDP ports held against ICMP; timers run between turns. Everything a
//! packet or a request causes is done by [`Host`]; this file only moves bytes and time.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Instant;

use concast_csp::Config as CspConfig;
use concast_engine::EngineConfig;
use concast_daemon::log::{emit, Level};
use concast_wire::ipv4::protocol;
use serde_json::{json, Value};

use crate::api::{self, ClientId, Server};
use crate::host::{Host, Wire};
use crate::mplex::MplexGlue;
use crate::rawsock::{PortSink, RawReceiver, RawSender};
use crate::reactor::{PollSet, Token};

/// What hostd runs with (from `--config` and the flags).
#[derive(Debug, Clone)]
pub struct Settings {
    pub addr: Ipv4Addr,
    pub socket: PathBuf,
    pub csp: CspConfig,
    /// Merge timers fire this many µs early (the engine's timer lead).
    pub timer_lead_us: u64,
    /// Captured datagrams are bundled by this host's engine before they leave (paper 4.2.1);
    /// false sends each alone.
    pub sender_bundling: bool,
    /// Secret Ed25519 key this host signs the specs it serves with (None: unsigned).
    pub spec_key: Option<[u8; 32]>,
    /// Slots of the merge engine's bounded pool (0: on-demand sandboxes only).
    pub flow_pool_slots: u32,
}

struct SocketWire<'a>(&'a RawSender);

impl Wire for SocketWire<'_> {
    fn send(&mut self, datagram: &[u8]) -> std::io::Result<()> {
        self.0.send(datagram)
    }
}

/// Datagrams read from one socket per turn at most, so one busy socket cannot starve the rest.
const BURST: usize = 256;

struct Loop {
    host: Host,
    mplex: MplexGlue,
    sender_bundling: bool,
    server: Server,
    csp_rx: RawReceiver,
    capture: RawReceiver,
    tx: RawSender,
    sinks: BTreeMap<u16, PortSink>,
    /// Ports another socket holds already (so the kernel sends no ICMP for them either).
    sinks_refused: BTreeSet<u16>,
    clock: Instant,
    buf: Vec<u8>,
}

impl Loop {
    fn now(&self) -> u64 {
        self.clock.elapsed().as_micros() as u64
    }

    fn read_raw(&mut self, token: Token) {
        for _ in 0..BURST {
            let sock = if token == Token::Csp { &self.csp_rx } else { &self.capture };
            let n = match sock.recv(&mut self.buf) {
                Ok(Some(n)) => n,
                Ok(None) => return,
                Err(e) => return emit(Level::Error, "recv_failed", &[("socket", &format!("{token:?}")), ("error", &e)]),
            };
            let now = self.now();
            let mut wire = SocketWire(&self.tx);
            let datagram = &self.buf[..n];
            if token == Token::Csp {
                self.host.on_csp(now, datagram, &mut wire);
            } else {
                self.host.on_capture(now, datagram, &mut wire);
            }
        }
    }

    fn serve_client(&mut self, id: ClientId) {
        for line in self.server.read_lines(id) {
            let now = self.now();
            let reply = match api::parse(&line, self.host.addr()) {
                Ok((rid, req)) => match self.request(now, id, req) {
                    Ok(Value::Object(mut fields)) => {
                        fields.insert("ok".into(), true.into());
                        fields.insert("id".into(), rid.unwrap_or(Value::Null));
                        Value::Object(fields)
                    }
                    Ok(other) => json!({"id": rid, "ok": true, "result": other}),
                    Err(error) => json!({"id": rid, "ok": false, "error": error}),
                },
                Err(r) => {
                    self.host.refused(r.op.as_deref() == Some("send"));
                    json!({"id": r.id, "ok": false, "error": r.error})
                }
            };
            self.server.reply(id, &reply.to_string());
        }
    }

    /// Mplex_Control goes to the multiplex module; `stats` gets its counters too.
    fn request(&mut self, now: u64, id: ClientId, req: api::Request) -> Result<Value, String> {
        let mut wire = SocketWire(&self.tx);
        let is_stats = req == api::Request::Stats;
        let mut reply = match req {
            api::Request::Mplex(m) => self.mplex.request(&mut self.host, now, id, m, &mut wire),
            req => self.host.request(now, id, req, &mut wire),
        };
        if let (true, Ok(Value::Object(fields))) = (is_stats, &mut reply) {
            fields.insert("mplex".into(), self.mplex.stats(&self.host));
        }
        reply
    }

    fn deliver_events(&mut self) {
        let changes = self.host.take_flow_changes();
        self.mplex.on_flow_changes(&self.host, changes);
        for ev in self.host.take_events().into_iter().chain(self.mplex.take_events()) {
            if !self.server.event(ev.client, &ev.line) {
                self.host.counters.events_dropped += 1;
            }
        }
    }

    /// Holds exactly the UDP ports the host wants held.
    fn reconcile_sinks(&mut self) {
        let wanted = self.host.wanted_ports();
        self.sinks.retain(|p, _| wanted.contains(p));
        self.sinks_refused.retain(|p| wanted.contains(p));
        for p in wanted {
            if self.sinks.contains_key(&p) || self.sinks_refused.contains(&p) {
                continue;
            }
            match PortSink::bind(p) {
                Ok(s) => {
                    emit(Level::Info, "port_held", &[("port", &p)]);
                    self.sinks.insert(p, s);
                }
                Err(e) => {
                    // Someone else's socket has it: the kernel sends no ICMP for it either.
                    emit(Level::Info, "port_held_elsewhere", &[("port", &p), ("error", &e)]);
                    self.sinks_refused.insert(p);
                }
            }
        }
    }

    fn turn(&mut self, set: &mut PollSet) -> Result<(), String> {
        set.clear();
        set.add(self.csp_rx.raw_fd(), Token::Csp, false);
        set.add(self.capture.raw_fd(), Token::Capture, false);
        self.server.register(set);
        for (p, s) in &self.sinks {
            set.add(s.raw_fd(), Token::Sink(*p), false);
        }
        for (fd, source) in self.mplex.service.descriptors() {
            set.add(fd, Token::Mplex(source), false);
        }
        let now = self.now();
        let wait_us = concast_daemon::wait::timeout_us(self.host.next_deadline(), now, 100_000);
        set.wait_us(wait_us).map_err(|e| format!("poll: {e}"))?;
        for r in set.ready() {
            match r.token {
                Token::Csp | Token::Capture => self.read_raw(r.token),
                Token::Listener => self.server.accept(),
                Token::Client(id) if r.readable || r.closed => self.serve_client(id),
                Token::Client(_) => {} // writable: flushed below
                Token::Mplex(source) => {
                    // Captured datagrams are bundled here first (paper 4.2.1).
                    let now = self.now();
                    let mut wire = SocketWire(&self.tx);
                    let mut fwd = crate::mplex::HostForward { host: &mut self.host, wire: &mut wire, now };
                    let via: Option<&mut dyn concast_mplex::Forward> = if self.sender_bundling { Some(&mut fwd) } else { None };
                    if let Err(e) = self.mplex.service.on_ready_via(source, via) {
                        emit(Level::Error, "mplex_io_failed", &[("source", &format!("{source:?}")), ("error", &e)]);
                    }
                }
                Token::Sink(p) => {
                    if let Some(s) = self.sinks.get(&p) {
                        self.host.counters.kernel_copies += s.drain();
                    }
                }
            }
        }
        let now = self.now();
        let mut wire = SocketWire(&self.tx);
        self.host.tick(now, &mut wire);
        self.deliver_events();
        self.reconcile_sinks();
        self.server.flush_all();
        for id in self.server.reap() {
            self.host.client_gone(id);
        }
        Ok(())
    }
}

/// The merge engine's limits here: the defaults, plus a CPU budget per flow (a spec that
/// re-arms its timer for ever, say, would otherwise keep this host's core busy).
fn host_limits() -> concast_engine::Limits {
    concast_engine::Limits { cpu_per_second: Some(std::time::Duration::from_millis(500)), ..Default::default() }
}

pub fn run(s: Settings) -> Result<(), String> {
    let open = |p: u8, what: &str| RawReceiver::open(p).map_err(|e| format!("cannot open the raw socket for {what}: {e} (hostd needs CAP_NET_RAW)"));
    let csp_rx = open(protocol::CSP, "CSP (protocol 253)")?;
    let capture = open(protocol::UDP, "UDP capture")?;
    let tx = RawSender::open().map_err(|e| format!("cannot open the sending raw socket: {e}"))?;
    let server = Server::bind(&s.socket).map_err(|e| format!("cannot bind the API socket {}: {e}", s.socket.display()))?;
    let mut host = Host::new(s.addr, s.csp.clone(), EngineConfig { timer_lead_us: s.timer_lead_us, limits: host_limits(), allocator: concast_engine::Allocator::for_daemon(s.flow_pool_slots), ..EngineConfig::default() });
    if let Some(secret) = s.spec_key {
        host.node.set_signing_key(concast_csp::sign::key_from_secret(secret));
    }
    let mut lp = Loop {
        host,
        mplex: MplexGlue::new(concast_mplex::Options::default()),
        sender_bundling: s.sender_bundling,
        server,
        csp_rx,
        capture,
        tx,
        sinks: BTreeMap::new(),
        sinks_refused: BTreeSet::new(),
        clock: Instant::now(),
        buf: vec![0; 65536],
    };
    concast_daemon::stop_on_signals();
    emit(Level::Info, "started", &[("addr", &s.addr), ("api", &s.socket.display()), ("hold_s", &s.csp.hold_s)]);
    let mut set = PollSet::new();
    concast_daemon::wait::fine_timer_slack();
    while !concast_daemon::stopping() {
        lp.turn(&mut set)?;
    }
    // Rules first: from here on the kernel's ACKs go out plain.
    lp.mplex.shutdown();
    let now = lp.now();
    let mut wire = SocketWire(&lp.tx);
    lp.host.shutdown(now, &mut wire);
    lp.deliver_events();
    lp.server.flush_before_exit();
    let counters = lp.host.counters.to_json();
    emit(Level::Info, "stopped", &[("counters", &counters)]);
    Ok(())
}
