//! routerd's loop: the CPU port, the management socket and the merge engine's timers in one
//! poll, each batch of diverted frames handed to the [`Router`] and what it writes sent out
//! (docs/routerd.md). `main.rs` only turns the flags and `--config` into [`Settings`].

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Instant;

use concast_engine::{Engine, EngineConfig};
use serde_json::{json, Value};

use crate::adaptive::{AdaptiveWait, Plan};
use crate::busypoll::BusyPoll;
use crate::cpu_port::{CpuPort, ReadDelay, RxMode};
use crate::dataplane;
use crate::egress::{self, Egress};
use crate::framequeue::FrameQueue;
use crate::linkgate::{LinkGate, LinkRoute};
use crate::linkstate::{monotonic_ns, LinkState};
use crate::log::{emit, Level};
use crate::mgmt::Mgmt;
use crate::tc::Tc;
use crate::{Router, Sink};

#[derive(Clone, Debug)]
/// A `--flow`: merged from the start, without CSP.
pub struct StaticFlow {
    pub flow: concast_csp::FlowId,
    pub selector: concast_csp::Selector,
    pub spec: PathBuf,
}

/// The settings routerd runs with, from `--config` and the flags.
pub struct Settings {
    pub cpu_iface: String,
    pub addr: Ipv4Addr,
    pub router_mac: [u8; 6],
    pub bridge: Option<String>,
    pub dataplane_cmd: Option<String>,
    /// Linux data plane: the namespace's tc filter block and the CPU port's kernel end.
    pub tc: Option<(u32, String)>,
    pub mgmt: PathBuf,
    /// Direct egress: the routes and their port interfaces.
    pub egress: Option<(egress::Table, Vec<String>)>,
    /// Without direct egress: the routes and their port interfaces, read only for link MTUs
    /// (the config's `port_routes`, written for BMv2 routers).
    pub mtu_ports: Option<(egress::Table, Vec<String>)>,
    pub timer_lead_us: u64,
    pub node_buffer_bytes: usize,
    pub flow_cpu_ms: u64,
    /// Slots of the merge engine's bounded pool (0: on-demand sandboxes only).
    pub flow_pool_slots: u32,
    /// Queue access: the link emulator's state file and the routes' link slots.
    pub link_state: Option<(PathBuf, Vec<LinkRoute>)>,
    /// OpenFlow port number of the CPU port (OVS selectors send diverted frames there).
    pub cpu_ofport: u32,
    /// Frames per recvmmsg/sendmmsg call (or ring turn) on the CPU port.
    pub batch: usize,
    /// How the CPU port is read: the memory-mapped ring (falling back to recvmmsg) or recvmmsg.
    pub cpu_io: RxMode,
    /// Bounded busy-poll after a turn that moved frames, µs (0 = off; busypoll.rs).
    pub busy_poll_us: u64,
    /// The adaptive wait (adaptive.rs): spin only around the next expected arrival.
    pub adaptive_wait: bool,
    /// `--flow`s and the parameters given to every one of them.
    pub flows: Vec<StaticFlow>,
    pub flow_params: String,
}

/// How CSP finds the MTU of this router's link toward an address (docs/protocol.md 2.3): by
/// the port of the route toward it (direct egress, or BMv2's port routes), else, inside a
/// Linux router's namespace, by the kernel's route. A router given neither runs outside its
/// router's ports and cannot tell: its links count as unknown.
fn link_mtu(s: &Settings) -> concast_csp::LinkMtu {
    use concast_daemon::linkmtu;
    match (s.egress.as_ref().or(s.mtu_ports.as_ref()), &s.tc) {
        (Some((table, ifaces)), _) => {
            let (table, ifaces) = (table.clone(), ifaces.clone());
            Box::new(move |to| ifaces.get(table.lookup(to)?.port).and_then(|i| linkmtu::iface_mtu(i)))
        }
        (None, Some(_)) => Box::new(linkmtu::route_mtu),
        (None, None) => Box::new(|_| None),
    }
}

/// Where the frames of one turn go: out of their port when direct egress routes them, else
/// queued and sent back through the CPU port in one batch.
struct Outbox<'a> {
    port: &'a CpuPort,
    egress: Option<&'a mut Egress>,
    /// The loop's one queue for the CPU port, empty between turns.
    queue: &'a mut FrameQueue,
}

impl Sink for Outbox<'_> {
    fn frame(&mut self, frame: &[u8]) {
        if let Some(e) = self.egress.as_deref_mut() {
            if e.take(frame) {
                return;
            }
        }
        self.queue.push(frame);
    }
}

impl Outbox<'_> {
    fn flush(&mut self) {
        if let Some(e) = self.egress.as_deref_mut() {
            if let Err(err) = e.flush() {
                emit(Level::Error, "send_failed", &[("path", &"egress"), ("error", &err)]);
            }
        }
        if !self.queue.is_empty() {
            let frames: Vec<&[u8]> = self.queue.frames().collect();
            if let Err(e) = self.port.send_batch(&frames) {
                emit(Level::Error, "send_failed", &[("error", &e), ("frames", &self.queue.len())]);
            }
            self.queue.clear();
        }
    }
}

/// Runs routerd until SIGTERM or SIGINT: the CPU port, the management socket and the merge
/// engine's timers in one poll loop; removes the diversions it installed before returning.
pub fn run(s: Settings, csp: concast_csp::Config) -> Result<(), String> {
    let mut port = CpuPort::open_rx(&s.cpu_iface, s.cpu_io).map_err(|e| format!("cannot open CPU port {}: {e}", s.cpu_iface))?;
    port.batch = s.batch;
    let mut limits = concast_engine::Limits::default();
    limits.cpu_per_second = Some(std::time::Duration::from_millis(s.flow_cpu_ms)).filter(|d| !d.is_zero());
    let engine = Engine::new(EngineConfig { node: s.addr, timer_lead_us: s.timer_lead_us, node_buffer_bytes: s.node_buffer_bytes, limits, allocator: concast_engine::Allocator::for_daemon(s.flow_pool_slots), ..EngineConfig::default() }).map_err(|e| format!("merge engine: {e}"))?;
    let dataplane: Box<dyn dataplane::Dataplane> = match (&s.dataplane_cmd, &s.tc, &s.bridge) {
        (Some(c), _, _) => Box::new(dataplane::External::new(c).map_err(|e| format!("--dataplane-cmd: {e}"))?),
        (None, Some((block, cpu_dev)), _) => Box::new(Tc::new(*block, cpu_dev)),
        (None, None, Some(b)) => Box::new(dataplane::Ovs::new(b, s.cpu_ofport)),
        (None, None, None) => Box::new(dataplane::Static),
    };
    let mut router = Router::new(s.addr, s.router_mac, port.mac, csp, engine, dataplane);
    router.node.set_link_mtu(link_mtu(&s));
    let mut egress = match &s.egress {
        Some((table, ifaces)) => Some(Egress::open(table.clone(), ifaces)?),
        None => None,
    };
    let egress_desc = egress.as_ref().map_or("cpu port".to_string(), |e| format!("{} ports", e.ports()));
    // Switched by the management command `egress ports|cpu` (benchmarks compare both).
    let mut use_egress = egress.is_some();
    if let Err(e) = router.dataplane().clear() {
        emit(Level::Warn, "clear_diversions_failed", &[("error", &e)]);
    }
    for f in &s.flows {
        let bytes = std::fs::read(&f.spec).map_err(|e| format!("--flow: cannot read {}: {e}", f.spec.display()))?;
        router.add_static_flow(0, f.flow, f.selector, bytes, s.flow_params.as_bytes()).map_err(|e| format!("--flow: {e}"))?;
    }
    let mgmt = Mgmt::bind(&s.mgmt).map_err(|e| format!("cannot bind management socket {}: {e}", s.mgmt.display()))?;
    concast_daemon::stop_on_signals();
    let desc = router.dataplane().describe();
    emit(Level::Info, "started", &[("addr", &s.addr), ("cpu_port", &s.cpu_iface), ("cpu_io", &port.rx_mode()), ("dataplane", &desc), ("egress", &egress_desc), ("mgmt", &s.mgmt.display())]);

    let origin_ns = monotonic_ns(); // the engine's time 0, on the link emulator's clock
    let clock = Instant::now();
    let now = || clock.elapsed().as_micros() as u64;
    if let Some((path, routes)) = &s.link_state {
        // Without the file nothing is ever held: datagrams leave as without queue access.
        match LinkState::open(path).map_err(|e| e.to_string()).and_then(|st| LinkGate::new(st, routes.clone(), origin_ns)) {
            Ok(gate) => {
                router.engine.set_egress_gate(Some(Box::new(gate)));
                emit(Level::Info, "queue_access", &[("link_state", &path.display()), ("routes", &routes.len())]);
            }
            Err(e) => emit(Level::Warn, "queue_access_off", &[("link_state", &path.display()), ("error", &e)]),
        }
    }
    concast_daemon::wait::fine_timer_slack();
    let mut busy = BusyPoll::new(s.busy_poll_us);
    let mut adaptive = AdaptiveWait::new(s.adaptive_wait);
    let mut to_cpu_port = FrameQueue::default();
    // Where a turn's time goes after the read (management command `read-delay`, keys
    // `handle` and `send`): the router and merge engine, then sending what they wrote.
    let (mut handle_time, mut send_time) = (ReadDelay::default(), ReadDelay::default());
    while !concast_daemon::stopping() {
        // To the µs: the engine's next deadline already has the timer lead taken off.
        let began = now();
        let deadline = router.next_deadline();
        let mut wait_us = concast_daemon::wait::timeout_us(deadline, began, 100_000);
        let spin = busy.spin_until(began, deadline);
        // The adaptive wait when the busy-poll window is not spinning: sleep until just
        // before the next expected frame, or spin through its window.
        let plan = match spin {
            Some(_) => Plan::Sleep(deadline),
            None => adaptive.plan(began, deadline),
        };
        let adaptive_spin = match plan {
            Plan::Spin(t) => Some(t),
            Plan::Sleep(until) => {
                wait_us = concast_daemon::wait::timeout_us(until, began, 100_000);
                None
            }
        };
        if let Some(until) = spin.or(adaptive_spin) {
            // Inside a busy-poll window: look at the port until a frame waits, a timer is
            // due or the window ends, then poll() without sleeping (the management socket).
            let mut t = began;
            // Each look that finds nothing yields the core: on a machine with fewer cores
            // than runnable tasks, the data plane that is to write the awaited frame may be
            // waiting for this very core (measured: docs/benchmarks.md, session 13).
            while t < until && !port.rx_ready() && !concast_daemon::stopping() {
                unsafe { libc::sched_yield() };
                t = now();
            }
            match spin {
                Some(_) => busy.spun_us += t.saturating_sub(began),
                None => adaptive.spun_us += t.saturating_sub(began),
            }
            wait_us = 0;
        }
        let mut fds = [
            libc::pollfd { fd: port.raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: mgmt.raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        concast_daemon::wait::poll_us(&mut fds, wait_us).map_err(|e| format!("poll: {e}"))?;
        let mut moved = 0;
        // When the turn's first frame reached the CPU port (the ring's stamp; on the socket,
        // when it was read): what the adaptive wait learns the gaps from.
        let mut arrival = None;
        loop {
            let n = port.recv_batch().map_err(|e| format!("reading the CPU port: {e}"))?;
            if n == 0 {
                break;
            }
            if moved == 0 && adaptive.is_on() {
                arrival = Some(now().saturating_sub(port.first_wait_ns().unwrap_or(0) / 1000));
            }
            moved += n;
            // Frames are read in place from the port's receive buffers; sending needs only a
            // shared borrow of the port too.
            let mut sink = Outbox { port: &port, egress: egress.as_mut().filter(|_| use_egress), queue: &mut to_cpu_port };
            let t0 = clock.elapsed();
            router.handle_batch(now(), (0..n).map(|i| port.frame(i)), &mut sink);
            let t1 = clock.elapsed();
            sink.flush();
            handle_time.add((t1 - t0).as_nanos() as u64);
            send_time.add((clock.elapsed() - t1).as_nanos() as u64);
        }
        busy.after_turn(now(), moved, spin.is_some());
        adaptive.after_turn(now(), arrival, adaptive_spin.is_some());
        let mut sink = Outbox { port: &port, egress: egress.as_mut().filter(|_| use_egress), queue: &mut to_cpu_port };
        router.tick(now(), &mut sink);
        sink.flush();
        if fds[1].revents != 0 {
            mgmt.serve(|cmd| match (cmd.strip_prefix("egress "), cmd.strip_prefix("busy-poll ")) {
                (Some(mode), _) => switch_egress(mode, egress.is_some(), &mut use_egress),
                (_, Some(us)) => switch_busy_poll(us, &mut busy),
                _ if cmd.starts_with("wait ") => switch_wait(&cmd["wait ".len()..], &mut adaptive),
                _ if cmd == "read-delay" => {
                    let mut d = port.read_delay().bins_json();
                    d["handle"] = handle_time.bins_json();
                    d["send"] = send_time.bins_json();
                    d
                }
                _ => {
                    let mut answer = router.answer(cmd);
                    if let Some(c) = answer.get_mut("counters") {
                        add_egress_counters(c, egress.as_ref());
                        c["cpu_port_kernel_drops"] = port.kernel_drops().into();
                        c["cpu_port_batches"] = port.batches.into();
                        c["cpu_port_full_batches"] = port.full_batches.into();
                        add_busy_poll_counters(c, &busy);
                        add_counters(c, adaptive.to_json());
                    }
                    if let Some(a) = answer.as_object_mut().filter(|a| a.contains_key("counters")) {
                        a.insert("cpu_io".into(), port.rx_mode().into());
                        a.insert("cpu_port_read_delay".into(), port.read_delay().to_json());
                    }
                    answer
                }
            });
        }
    }
    if let Err(e) = router.dataplane().clear() {
        emit(Level::Warn, "clear_diversions_failed", &[("error", &e)]);
    }
    let mut counters = router.counters.to_json();
    add_egress_counters(&mut counters, egress.as_ref());
    add_busy_poll_counters(&mut counters, &busy);
    add_counters(&mut counters, adaptive.to_json());
    emit(Level::Info, "stopped", &[("counters", &counters)]);
    Ok(())
}

/// The management command `egress ports|cpu`: where routerd's frames go from now on.
fn switch_egress(mode: &str, have_routes: bool, use_egress: &mut bool) -> Value {
    match (mode.trim(), have_routes) {
        ("cpu", _) => *use_egress = false,
        ("ports", true) => *use_egress = true,
        ("ports", false) => return json!({"error": "no egress routes: started with --egress cpu or without egress_routes"}),
        (other, _) => return json!({"error": format!("egress {other:?}: say ports or cpu")}),
    }
    emit(Level::Info, "egress_switched", &[("egress", &mode.trim())]);
    json!({"egress": mode.trim()})
}

/// The management command `busy-poll US`: the busy-poll window from now on (0 = off).
fn switch_busy_poll(us: &str, busy: &mut BusyPoll) -> Value {
    match crate::busypoll::parse_window(us) {
        Ok(w) => {
            busy.set_window(w);
            emit(Level::Info, "busy_poll_switched", &[("busy_poll_us", &w)]);
            json!({"busy_poll_us": w})
        }
        Err(e) => json!({"error": e}),
    }
}

/// The management command `wait sleep|adaptive`: how routerd waits for frames from now on.
fn switch_wait(mode: &str, adaptive: &mut AdaptiveWait) -> Value {
    match crate::adaptive::parse_mode(mode) {
        Ok(on) => {
            adaptive.set(on);
            emit(Level::Info, "wait_switched", &[("wait", &mode.trim())]);
            json!({"wait": mode.trim()})
        }
        Err(e) => json!({"error": e}),
    }
}

/// Adds the busy-poll window and what it caught to routerd's `counters`.
fn add_busy_poll_counters(counters: &mut Value, busy: &BusyPoll) {
    add_counters(counters, busy.to_json());
}

/// Adds the fields of a JSON object to routerd's `counters`.
fn add_counters(counters: &mut Value, more: Value) {
    if let (Some(c), Value::Object(b)) = (counters.as_object_mut(), more) {
        c.extend(b);
    }
}

/// Adds direct egress's counters to routerd's `counters` (nothing without direct egress).
fn add_egress_counters(counters: &mut Value, egress: Option<&Egress>) {
    if let (Some(e), Some(c)) = (egress, counters.as_object_mut()) {
        c.insert("egress_sent".into(), json!(e.sent));
        c.insert("egress_ttl_expired".into(), json!(e.ttl_expired));
        c.insert("egress_send_errors".into(), json!(e.send_errors));
    }
}
