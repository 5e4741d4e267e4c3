//! The multiplex module as one value an event loop owns (hostd's; the kernel test runs its
//! own): sender flows with their capture rules and the NFQUEUE listener, receiver groups with
//! the protocol-254 socket and the TUN device, and the counters of each. It owns every
//! descriptor it needs, opens them when the first flow wants them and closes them with
//! the last; the loop only polls what [`Mplex::descriptors`] lists and calls
//! [`Mplex::on_ready`].
//!
//! CSP is not done here: the caller joins `(R, G)` for a sender (selector protocol 254) and
//! installs the multiplex spec for a receiver, and tells this module when to start and
//! stop capturing (`start_capture` once the join is active, `stop_capture` on fallback).

use std::collections::BTreeMap;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::RawFd;

use concast_wire::{classify, Datagram};
use serde_json::{json, Value};

use crate::checksum::fix_transport_checksum;
use crate::config::SenderConfig;
use crate::counters::{ReceiverCounters, SenderCounters, Unmatched};
use crate::encap::encapsulate;
use crate::iptables::CaptureRule;
use crate::nfqueue::{self, Queue, QueueStats, Verdict};
use crate::select::PassReason;
use crate::selection::{self, FlowProto, Selection};
use crate::sockets::{Arrivals, Sender};
use crate::tun::Tun;
use crate::unbundle::{unbundle, IdGen};

/// Packets handled per readiness event before returning to the loop, so one busy source
/// cannot starve the others (the rest are read on the next turn).
const BUDGET: usize = 256;
const BUF: usize = 65536;

#[derive(Debug, Clone)]
pub struct Options {
    /// NFQUEUE number (queues are per network namespace, so every host can use the same).
    pub queue_num: u16,
    /// Name of the receiver's TUN device.
    pub tun_name: String,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            queue_num: 4242,
            tun_name: "mplex0".into(),
        }
    }
}

/// Which of the module's descriptors is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Queue,
    Arrivals,
    Tun,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SenderState {
    /// Configured; the caller has not started capture (join not active yet).
    Waiting,
    Capturing,
    /// Capture stopped (fallback to plain ACKs, or an error); the reason.
    Stopped(String),
}

impl SenderState {
    pub fn name(&self) -> &str {
        match self {
            SenderState::Waiting => "waiting",
            SenderState::Capturing => "capturing",
            SenderState::Stopped(_) => "stopped",
        }
    }
}

#[derive(Debug)]
pub struct SenderFlow {
    pub config: SenderConfig,
    pub state: SenderState,
    pub counters: SenderCounters,
}

impl SenderFlow {
    fn rule(&self, queue: u16) -> CaptureRule {
        CaptureRule {
            receiver: self.config.receiver,
            selection: self.config.selection,
            threshold: self.config.size_threshold,
            queue,
        }
    }
}

/// Sender flows are kept per receiver and, under it, per selection (application flows
/// before the ACK capture, so a datagram goes to the first that names it).
type SenderKey = (Ipv4Addr, Selection);

/// Every key toward `r`, for `BTreeMap::range`.
fn toward(r: Ipv4Addr) -> std::ops::RangeInclusive<SenderKey> {
    let first = Selection::Flow {
        proto: FlowProto::Tcp,
        sport: None,
        dport: None,
    };
    (r, first)..=(r, Selection::Acks)
}

/// Where a captured datagram's one-record MplexPkt goes: by default straight onto the wire
/// (the module's raw socket); hostd hands it to its own merge engine instead, which bundles
/// it with the host's other captured datagrams toward the same R (docs/multiplex.md,
/// "Bundling at the sender").
pub trait Forward {
    /// Takes `pkt`, a one-record MplexPkt of `(receiver, group)`; false if it could not
    /// (the original then goes out plain).
    fn forward(&mut self, receiver: Ipv4Addr, group: u32, pkt: &[u8]) -> bool;

    /// A captured datagram of `(receiver, group)` is about to go out as it is: whatever is
    /// held for that flow leaves first, so the datagram overtakes none of its flow's.
    fn before_pass(&mut self, _receiver: Ipv4Addr, _group: u32) {}
}

impl Forward for Sender {
    fn forward(&mut self, receiver: Ipv4Addr, _group: u32, pkt: &[u8]) -> bool {
        self.send(pkt, receiver).is_ok()
    }
}

pub struct Mplex {
    opts: Options,
    senders: BTreeMap<SenderKey, SenderFlow>,
    receivers: BTreeMap<u32, ReceiverCounters>,
    queue: Option<Queue>,
    /// Queue counters of queues already closed, so `stats` stays cumulative.
    closed_queue: QueueStats,
    out: Option<Sender>,
    arrivals: Option<Arrivals>,
    tun: Option<Tun>,
    outer_ids: u16,
    rebuilt_ids: IdGen,
    unmatched: Unmatched,
    buf: Vec<u8>,
    scratch: Vec<u8>,
}

impl Mplex {
    pub fn new(opts: Options) -> Mplex {
        let seed = std::process::id() as u16;
        Mplex {
            opts,
            senders: BTreeMap::new(),
            receivers: BTreeMap::new(),
            queue: None,
            closed_queue: QueueStats::default(),
            out: None,
            arrivals: None,
            tun: None,
            outer_ids: seed,
            rebuilt_ids: IdGen::new(seed.rotate_left(8)),
            unmatched: Unmatched::default(),
            buf: vec![0; BUF],
            scratch: vec![0; BUF],
        }
    }

    pub fn options(&self) -> &Options {
        &self.opts
    }

    // --- senders --------------------------------------------------------------------------

    /// Registers a sender flow (not capturing yet; a flow added while others toward the same
    /// receiver capture starts at once). Turning on the same flow again with the same
    /// parameters is a no-op, with other parameters it is refused; every flow toward one
    /// receiver shares its join, hence its group.
    pub fn add_sender(&mut self, config: SenderConfig) -> Result<(), String> {
        let key = (config.receiver, config.selection);
        if let Some(f) = self.senders.get(&key) {
            if f.config == config {
                return Ok(());
            }
            return Err(format!(
                "already multiplexing {} toward {} (group {}) with other parameters: turn it off first",
                config.selection, config.receiver, f.config.group
            ));
        }
        if let Some(other) = self.senders_toward(config.receiver).next() {
            if other.config.group != config.group {
                return Err(format!(
                    "flows toward {} already use group {}: every flow toward one receiver shares its join",
                    config.receiver, other.config.group
                ));
            }
        }
        let capturing = self.capturing(config.receiver);
        self.senders.insert(
            key,
            SenderFlow {
                config,
                state: SenderState::Waiting,
                counters: SenderCounters::default(),
            },
        );
        if capturing {
            if let Err(e) = self.start_one(key) {
                self.senders.remove(&key);
                return Err(e);
            }
        }
        Ok(())
    }

    /// The flow `selection` toward `receiver`.
    pub fn sender(&self, receiver: Ipv4Addr, selection: Selection) -> Option<&SenderFlow> {
        self.senders.get(&(receiver, selection))
    }

    /// Every flow toward `receiver`.
    pub fn senders_toward(&self, receiver: Ipv4Addr) -> impl Iterator<Item = &SenderFlow> {
        self.senders.range(toward(receiver)).map(|(_, f)| f)
    }

    /// True if some flow toward `receiver` captures.
    pub fn capturing(&self, receiver: Ipv4Addr) -> bool {
        self.senders_toward(receiver)
            .any(|f| f.state == SenderState::Capturing)
    }

    pub fn senders(&self) -> impl Iterator<Item = &SenderFlow> {
        self.senders.values()
    }

    /// Installs the capture rule of every flow toward `receiver` (the join they share is
    /// active). The first error is returned; flows that started keep capturing.
    pub fn start_capture(&mut self, receiver: Ipv4Addr) -> Result<(), String> {
        let keys: Vec<SenderKey> = self.senders.range(toward(receiver)).map(|(k, _)| *k).collect();
        if keys.is_empty() {
            return Err(format!("no multiplex flow toward {receiver}"));
        }
        keys.into_iter().map(|k| self.start_one(k)).fold(Ok(()), Result::and)
    }

    /// Installs one flow's capture rule (opening the queue and the sending socket first if
    /// this is the first capturing flow). A rule left behind by a killed daemon is removed
    /// first, so rules never pile up.
    fn start_one(&mut self, key: SenderKey) -> Result<(), String> {
        let queue_num = self.opts.queue_num;
        let flow = self
            .senders
            .get(&key)
            .ok_or_else(|| format!("no multiplex flow {} toward {}", key.1, key.0))?;
        if flow.state == SenderState::Capturing {
            return Ok(());
        }
        let rule = flow.rule(queue_num);
        if self.queue.is_none() {
            let q = Queue::bind(queue_num)
                .map_err(|e| format!("cannot listen on NFQUEUE {queue_num}: {e}"))?;
            self.queue = Some(q);
        }
        if self.out.is_none() {
            self.out = Some(Sender::open().map_err(|e| format!("cannot open a raw socket: {e}"))?);
        }
        for _ in 0..16 {
            if rule.remove().is_err() {
                break;
            }
        }
        if let Err(e) = rule.install() {
            self.close_queue_if_idle();
            return Err(e);
        }
        if let Some(f) = self.senders.get_mut(&key) {
            f.state = SenderState::Capturing;
        }
        Ok(())
    }

    /// Removes the rules of every flow toward `receiver` (their datagrams go out plain from
    /// now on) and keeps the flows with `why`.
    pub fn stop_capture(&mut self, receiver: Ipv4Addr, why: &str) -> Result<(), String> {
        let keys: Vec<SenderKey> = self.senders.range(toward(receiver)).map(|(k, _)| *k).collect();
        keys.into_iter().map(|k| self.stop_one(k, why)).fold(Ok(()), Result::and)
    }

    /// Removes one flow's rule and keeps the flow with `why`. Packets already queued are
    /// let through unchanged.
    fn stop_one(&mut self, key: SenderKey, why: &str) -> Result<(), String> {
        let queue_num = self.opts.queue_num;
        let Some(flow) = self.senders.get_mut(&key) else {
            return Ok(());
        };
        let was_capturing = flow.state == SenderState::Capturing;
        flow.state = SenderState::Stopped(why.to_string());
        let result = if was_capturing {
            flow.rule(queue_num).remove()
        } else {
            Ok(())
        };
        self.close_queue_if_idle();
        result
    }

    /// Stops capture and forgets the flow `selection` toward `receiver`, or every flow
    /// toward it (`None`); returns them (with their final counters).
    pub fn remove_sender(&mut self, receiver: Ipv4Addr, selection: Option<Selection>) -> Result<Vec<SenderFlow>, String> {
        let keys: Vec<SenderKey> = match selection {
            Some(s) => vec![(receiver, s)],
            None => self.senders.range(toward(receiver)).map(|(k, _)| *k).collect(),
        };
        let mut result = Ok(());
        let mut removed = Vec::new();
        for k in keys {
            result = result.and(self.stop_one(k, "turned off"));
            removed.extend(self.senders.remove(&k));
        }
        result.map(|_| removed)
    }

    fn close_queue_if_idle(&mut self) {
        if self
            .senders
            .values()
            .any(|f| f.state == SenderState::Capturing)
        {
            return;
        }
        // No rule sends packets any more; whatever is still queued is handled (nothing is
        // capturing, so accepted) before the socket closes: closing with packets pending
        // would make the kernel drop them.
        let _ = self.process_queue();
        if let Some(q) = self.queue.take() {
            add_queue_stats(&mut self.closed_queue, &q.stats);
        }
        self.out = None;
    }

    // --- receivers ------------------------------------------------------------------------

    /// Starts unbundling MplexPkts of `group` (opening the protocol-254 socket and the TUN
    /// device with the first group). Re-enabling a group keeps its counters.
    pub fn add_receiver(&mut self, group: u32) -> Result<(), String> {
        if self.tun.is_none() {
            let name = self.opts.tun_name.clone();
            self.tun = Some(
                Tun::create(&name).map_err(|e| format!("cannot create TUN device {name}: {e}"))?,
            );
        }
        if self.arrivals.is_none() {
            match Arrivals::open() {
                Ok(a) => self.arrivals = Some(a),
                Err(e) => {
                    if self.receivers.is_empty() {
                        self.tun = None;
                    }
                    return Err(format!("cannot open a raw socket for protocol 254: {e}"));
                }
            }
        }
        self.receivers.entry(group).or_default();
        Ok(())
    }

    /// Stops unbundling `group`; the socket and the device go with the last group, so the
    /// kernel answers protocol 254 with ICMP protocol unreachable again. Returns whether the
    /// group was enabled.
    pub fn remove_receiver(&mut self, group: u32) -> Option<ReceiverCounters> {
        let c = self.receivers.remove(&group);
        if self.receivers.is_empty() {
            let _ = self.process_arrivals();
            self.arrivals = None;
            self.tun = None;
        }
        c
    }

    pub fn receiver(&self, group: u32) -> Option<&ReceiverCounters> {
        self.receivers.get(&group)
    }

    pub fn tun_name(&self) -> Option<&str> {
        self.tun.as_ref().map(|t| t.name())
    }

    // --- the loop's side ------------------------------------------------------------------

    /// The descriptors to poll for input, with who they belong to.
    pub fn descriptors(&self) -> Vec<(RawFd, Source)> {
        let mut v = Vec::new();
        if let Some(q) = &self.queue {
            v.push((q.raw_fd(), Source::Queue));
        }
        if let Some(a) = &self.arrivals {
            v.push((a.raw_fd(), Source::Arrivals));
        }
        if let Some(t) = &self.tun {
            v.push((t.raw_fd(), Source::Tun));
        }
        v
    }

    /// Handles what `source` has ready; captured datagrams go straight onto the wire.
    pub fn on_ready(&mut self, source: Source) -> io::Result<usize> {
        self.on_ready_via(source, None)
    }

    /// The same, with captured datagrams handed to `forward` (hostd's bundling) instead.
    pub fn on_ready_via(&mut self, source: Source, forward: Option<&mut dyn Forward>) -> io::Result<usize> {
        match source {
            Source::Queue => self.process_queue_via(forward),
            Source::Arrivals => self.process_arrivals(),
            Source::Tun => Ok(self.tun.as_ref().map_or(0, |t| t.drain() as usize)),
        }
    }

    /// Decides on up to [`BUDGET`] queued packets: the small datagrams of a capturing flow
    /// leave as MplexPkts (verdict DROP for the original), everything else is accepted
    /// unchanged.
    pub fn process_queue(&mut self) -> io::Result<usize> {
        self.process_queue_via(None)
    }

    fn process_queue_via(&mut self, mut forward: Option<&mut dyn Forward>) -> io::Result<usize> {
        let Mplex {
            queue,
            senders,
            out,
            outer_ids,
            unmatched,
            buf,
            scratch,
            ..
        } = self;
        let Some(queue) = queue.as_mut() else {
            return Ok(0);
        };
        queue.process(BUDGET, |p| {
            let fwd: Option<&mut dyn Forward> = match forward.as_deref_mut() {
                Some(f) => Some(f),
                None => out.as_mut().map(|s| s as &mut dyn Forward),
            };
            take(p, senders, fwd, outer_ids, unmatched, buf, scratch)
        })
    }

    /// Unbundles up to [`BUDGET`] arrived MplexPkts into the TUN device.
    pub fn process_arrivals(&mut self) -> io::Result<usize> {
        let Mplex {
            arrivals,
            tun,
            receivers,
            rebuilt_ids,
            unmatched,
            buf,
            scratch,
            ..
        } = self;
        let (Some(arrivals), Some(tun)) = (arrivals.as_ref(), tun.as_ref()) else {
            return Ok(0);
        };
        let mut handled = 0;
        while handled < BUDGET {
            let Some(n) = arrivals.recv(buf)? else { break };
            handled += 1;
            deliver(&buf[..n], receivers, unmatched, rebuilt_ids, scratch, tun);
        }
        Ok(handled)
    }

    /// Removes every capture rule and closes everything, leaving the namespace as it found
    /// it. Returns the errors met (rules that could not be removed).
    pub fn shutdown(&mut self) -> Vec<String> {
        let capturing = self
            .senders
            .values()
            .filter(|f| f.state == SenderState::Capturing)
            .map(|f| f.config.receiver)
            .collect::<std::collections::BTreeSet<_>>();
        let errors = capturing
            .into_iter()
            .filter_map(|r| self.stop_capture(r, "shutdown").err())
            .collect();
        let groups: Vec<_> = self.receivers.keys().copied().collect();
        for g in groups {
            self.remove_receiver(g);
        }
        errors
    }

    // --- counters -------------------------------------------------------------------------

    pub fn stats(&self) -> Value {
        let mut q = self.closed_queue;
        if let Some(open) = &self.queue {
            add_queue_stats(&mut q, &open.stats);
        }
        json!({
            "queue": {
                "number": self.opts.queue_num,
                "bound": self.queue.is_some(),
                "packets": q.packets, "accepted": q.accepted, "dropped": q.dropped,
                "overruns": q.overruns, "errors": q.errors,
            },
            "senders": self.senders.values().map(|f| self.sender_json(f)).collect::<Vec<_>>(),
            "receivers": self.receivers.iter().map(|(g, c)| json!({
                "group": g, "tun": self.tun_name(), "counters": c.to_json(),
            })).collect::<Vec<_>>(),
            "unmatched": self.unmatched.to_json(),
        })
    }

    pub fn sender_json(&self, f: &SenderFlow) -> Value {
        let c = &f.config;
        json!({
            "receiver": c.receiver.to_string(),
            "flow": c.selection.to_string(),
            "group": c.group,
            "state": f.state.name(),
            "reason": match &f.state { SenderState::Stopped(why) => Some(why.as_str()), _ => None },
            "max_local_delay_us": c.delays.max_local_us,
            "max_total_delay_us": c.delays.max_total_us,
            "size_threshold": c.size_threshold,
            "rule": format!("iptables {}", f.rule(self.opts.queue_num).insert_argv().join(" ")),
            "counters": f.counters.to_json(),
        })
    }
}

impl Drop for Mplex {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn add_queue_stats(total: &mut QueueStats, s: &QueueStats) {
    total.packets += s.packets;
    total.accepted += s.accepted;
    total.dropped += s.dropped;
    total.overruns += s.overruns;
    total.errors += s.errors;
}

/// The verdict on one queued packet (see [`Mplex::process_queue`]).
fn take(
    p: &nfqueue::Packet<'_>,
    senders: &mut BTreeMap<SenderKey, SenderFlow>,
    forward: Option<&mut dyn Forward>,
    outer_ids: &mut u16,
    unmatched: &mut Unmatched,
    buf: &mut [u8],
    scratch: &mut [u8],
) -> Verdict {
    let flow = selection::destination(p.payload).and_then(|d| {
        senders
            .range_mut(toward(d))
            .map(|(_, f)| f)
            .filter(|f| f.state == SenderState::Capturing)
            .find(|f| f.config.selection.matches(p.payload))
    });
    let Some(flow) = flow else {
        unmatched.queued_no_flow += 1;
        return Verdict::Accept;
    };
    let c = &mut flow.counters;
    c.captured += 1;
    let (receiver, group) = (flow.config.receiver, flow.config.group);
    let pass = if p.truncated {
        Some(PassReason::Malformed)
    } else {
        flow.config.selection.check(p.payload, flow.config.size_threshold).err()
    };
    if let Some(why) = pass {
        c.pass(why.name());
        if let Some(f) = forward {
            f.before_pass(receiver, group);
        }
        return Verdict::Accept;
    }
    let datagram = &mut scratch[..p.payload.len()];
    datagram.copy_from_slice(p.payload);
    fix_transport_checksum(datagram);
    *outer_ids = outer_ids.wrapping_add(1);
    let Ok(len) = encapsulate(
        datagram,
        flow.config.group,
        flow.config.delays,
        *outer_ids,
        buf,
    ) else {
        c.pass(PassReason::Malformed.name());
        return Verdict::Accept;
    };
    c.encapsulated += 1;
    if forward.is_some_and(|f| f.forward(receiver, group, &buf[..len])) {
        c.sent += 1;
        Verdict::Drop
    } else {
        // Fail open: the original goes out as it is.
        c.send_errors += 1;
        Verdict::Accept
    }
}

/// One arrived protocol-254 datagram: validated, unbundled, injected.
fn deliver(
    bytes: &[u8],
    receivers: &mut BTreeMap<u32, ReceiverCounters>,
    unmatched: &mut Unmatched,
    ids: &mut IdGen,
    scratch: &mut [u8],
    tun: &Tun,
) {
    match classify(bytes) {
        Ok(Datagram::Mplex { ip, group, mplex }) => {
            let Some(c) = receivers.get_mut(&group) else {
                unmatched.mplex_other_group += 1;
                return;
            };
            let o = unbundle(&ip, &mplex, ids, scratch, |d| tun.inject(d).is_ok());
            c.mplex_received += 1;
            c.records += u64::from(o.records);
            c.delivered += u64::from(o.delivered);
            c.expired_ttl += u64::from(o.expired);
            c.inject_errors += u64::from(o.records - o.delivered - o.expired);
            c.note_bundle(o.records);
            c.note_delay(mplex.max_total_delay(), mplex.delayed_so_far(), o.records);
        }
        Ok(_) => *unmatched.malformed.entry("not_mplex").or_default() += 1,
        Err(e) => {
            // Attribute it to its group when the header and option can still be read.
            let ip = concast_wire::ipv4::Packet::new_unchecked(bytes);
            let group = ip.check_len().ok().and_then(|_| {
                concast_wire::options::find_concast_group(ip.options())
                    .ok()
                    .flatten()
            });
            match group.and_then(|g| receivers.get_mut(&g)) {
                Some(c) => c.malformed_dropped += 1,
                None => *unmatched.malformed.entry(e.name()).or_default() += 1,
            }
        }
    }
}
