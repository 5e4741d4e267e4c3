//! The composition framework: a session holds its microprotocols, their event bindings, the
//! segment table with per-segment barriers, and the session-wide shared state.
use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;

use crate::segtable::SegTable;

use crate::attr;
use crate::composite::{Composite, MicroId, Preset, Refusal};
use crate::event::{Arg, Barrier, Delayed, Event, SegId, TimerId};
use crate::segment::{Kind, Malformed, Segment};

/// A microprotocol: a set of handlers bound to events at priorities (lower runs first).
pub trait Micro: Send {
    fn id(&self) -> MicroId;
    fn bindings(&self) -> &'static [(Event, u8)];
    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx);
}

#[derive(Clone, Debug)]
pub struct Config {
    pub composite: Composite,
    /// Payload bytes per segment (Fixed Size).
    pub mss: usize,
    /// Congestion-control algorithm for Windowed Congestion (see `cc::by_name`).
    pub cc: String,
    /// Rate for rate-driven algorithms that take one (the fixed-rate blaster), bits per second.
    pub cc_rate_bps: f64,
    /// Data segments the session buffers before `send` says Full.
    pub send_buf_segs: usize,
    /// Receive window advertised by Windowed Flow, in segments.
    pub recv_wnd_segs: u32,
    pub fec_n: u8,
    pub fec_k: u8,
    pub init_rto_us: u64,
    /// The session's own RTO policy (`micro::rtt::RtoPolicy`): minimum RTO (RFC 6298 §2.4) and
    /// the margin G over SRTT (§2.3). CTP's fine-grained timers (CTP §V-C-2, Table II); a
    /// congestion control algorithm may replace both (`cc::CcCtl::rto_policy`). Also the floor
    /// of Negative ACK's repeat period.
    pub min_rto_us: u64,
    pub rto_g_us: u64,
    pub keepalive_us: u64,
    pub dead_after_us: u64,
    /// Playout delay of the jitter controls: how long after its send time (Timestamp) or
    /// after the first arrival (Fixed-Rate) a message is handed to the user.
    pub playout_us: u64,
    /// Resize: how long after the path MTU is settled it probes again for a larger one
    /// (RFC 8899's raise timer, 600 s).
    pub pmtu_raise_us: u64,
    /// Seeds random ISNs and connection ids; the UDP driver draws it from the OS.
    pub seed: u64,
}

/// A session's receive window unless configured (segments); its UDP socket's receive buffer
/// is sized to hold it (`udp::socket`).
pub const DEFAULT_RECV_WND_SEGS: u32 = 8192;

impl Config {
    pub fn new(composite: Composite) -> Config {
        Config {
            composite,
            mss: 1400,
            cc: "newreno".into(),
            cc_rate_bps: 100e6,
            send_buf_segs: 8192,
            recv_wnd_segs: DEFAULT_RECV_WND_SEGS,
            fec_n: 5,
            fec_k: 4,
            init_rto_us: 1_000_000, // RFC 6298 §2.1; 300 ms was below a 413 ms path's RTT
            min_rto_us: 20_000,
            rto_g_us: 20_000,
            keepalive_us: 1_000_000,
            dead_after_us: 10_000_000,
            playout_us: 100_000,
            pmtu_raise_us: 600_000_000,
            seed: 1,
        }
    }

    pub fn preset(p: Preset) -> Config {
        Config::new(p.composite())
    }
}

/// What the caller must do or learn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Transmit(Vec<u8>),
    Deliver(Vec<u8>),
    Opened,
    Refused(String),
    Closed(String),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub segs_sent: u64,
    pub segs_received: u64,
    pub bytes_sent: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    /// Retransmission timeouts found spurious and undone (Eifel, `micro/ccwin.rs`).
    pub spurious_timeouts: u64,
    /// Segments RACK declared lost (`micro/rack.rs`; the others by duplicate ACKs or the timer).
    pub rack_losses: u64,
    /// Retransmissions by what declared the segment lost (`micro::rtxaudit::CAUSE_NAMES`),
    /// and of those the ones acknowledged sooner than the minimum RTT after the resend: the
    /// original had arrived.
    pub rtx_by_cause: [u64; crate::micro::rtxaudit::CAUSES],
    pub rtx_early: [u64; crate::micro::rtxaudit::CAUSES],
    pub malformed: u64,
    pub duplicates: u64,
    pub late: u64,
    pub foreign: u64,
    pub fec_recovered: u64,
    pub msgs_incomplete: u64,
    pub msgs_delivered: u64,
}

/// Session-wide state the microprotocols share (CTP's shared data).
#[derive(Debug, Default)]
pub struct Shared {
    pub client: bool,
    pub established: bool,
    pub closing: bool,
    pub closed: bool,
    /// Client only, composites without Virtual Circuit: put COMPOSITE on every segment until the
    /// peer answers, so a lost first segment does not lose the announcement.
    pub announce: bool,
    pub conn: u32,
    pub isn_local: u32,
    pub isn_peer: u32,
    /// Next sequence number to assign, and the highest sent + 1.
    pub snd_next: u32,
    pub snd_max: u32,
    /// Oldest unacknowledged sequence number.
    pub snd_una: u32,
    /// Sent, neither cumulatively nor selectively acknowledged: seq -> segment.
    pub unacked: BTreeMap<u32, SegId>,
    /// The `micro::dupack::DUP_THRESHOLD` highest segments selectively acknowledged, highest first: a hole
    /// below the last of them has that many acknowledged above it (`Shared::lost_below`).
    pub sacked_top: [Option<u32>; crate::micro::dupack::DUP_THRESHOLD as usize],
    /// Set by Positive ACK for each arriving acknowledgement.
    pub ack_advanced: bool,
    pub ack_duplicate: bool,
    pub in_recovery: bool,
    pub recover: u32,
    /// Sequence ranges (first, last) just declared lost, for the congestion controller.
    pub loss_ranges: Vec<(u32, u32)>,
    pub srtt_us: f64,
    pub rttvar_us: f64,
    pub min_rtt_us: f64,
    /// The last RTT sample (0 before the first).
    pub latest_rtt_us: f64,
    pub rto_us: u64,
    pub rto_override_us: Option<u64>,
    /// The congestion control algorithm's RTO policy, when it sets one (`cc::CcCtl::rto_policy`).
    pub rto_policy: Option<crate::micro::rtt::RtoPolicy>,
    /// Time-based loss detection (`micro::rack`), with the algorithm's policy (`cc::CcCtl::rack`).
    pub rack: crate::micro::rack::Rack,
    /// Each retransmission's cause and whether it was needed (`micro::rtxaudit`).
    pub rtx_audit: crate::micro::rtxaudit::RtxAudit,
    pub ts_recent: u32,
    pub cwnd: f64,
    pub pkt_snd_period_us: f64,
    pub peer_wnd: u32,
    pub rcv_buffered: u32,
    pub ack_interval: u32,
    pub ack_delay_us: u64,
    pub last_send_us: u64,
    pub last_recv_us: u64,
    /// Between `Session::begin_batch` and `end_batch`: datagrams arrive in a run (one GRO
    /// buffer, one wake-up), so acknowledgements of in-order data wait for its end.
    pub batching: bool,
    /// Delivered messages the application has not read yet (`Session::set_backlog`), for
    /// receiver-driven flow control.
    pub app_backlog: usize,
    /// CCC's performance monitor (UDT/CCC §2.2.4), kept by the congestion-control host.
    pub perf: crate::cc::monitor::PerfMon,
    /// The application's messages for its own algorithm, until the host takes them.
    pub cc_local: Vec<Vec<u8>>,
    /// Segments declared lost that Retransmit leaves to Windowed Congestion to resend inside
    /// its window, oldest first (`micro/retransmit.rs`).
    pub rtx_pending: VecDeque<SegId>,
}

impl Shared {
    pub fn rto(&self) -> u64 {
        self.rto_override_us.unwrap_or(self.rto_us)
    }

    /// `q` was selectively acknowledged.
    pub fn note_sacked(&mut self, q: u32) {
        let top = &mut self.sacked_top;
        if top.contains(&Some(q)) {
            return;
        }
        if let Some(i) = top.iter().position(|t| t.is_none_or(|t| t < q)) {
            top[i..].rotate_right(1);
            top[i] = Some(q);
        }
    }

    /// Every unacknowledged segment below this is lost by RFC 6675 §4's IsLost: at least
    /// DupThresh (3) segments above it were selectively acknowledged (with segments of one
    /// size, the same as more than (DupThresh - 1) * SMSS bytes).
    pub fn lost_below(&self) -> Option<u32> {
        self.sacked_top[self.sacked_top.len() - 1]
    }
}

struct Entry {
    seg: Segment,
    data: bool,
    holds: [u16; 3],
    to_net: bool,
    sent: bool,
    done: bool,
    finished: bool,
    consumed: bool,
    raw: Option<Bytes>,
}

enum Raised {
    Event(Event, Arg),
    Free(SegId),
}

/// What a handler can see and do: the time, the shared state, the segment table, raising
/// events, timers, barriers and output.
pub struct Cx {
    pub now: u64,
    pub cfg: Config,
    pub composite: Composite,
    pub shared: Shared,
    pub stats: Stats,
    segs: SegTable<Entry>,
    data_live: usize,
    /// Messages from the user, not yet cut into segments (which slice them).
    user_msgs: HashMap<u64, Bytes>,
    /// Messages for the user, reassembled, until MSG FROM NET's handlers are done with them.
    net_msgs: HashMap<u64, Vec<u8>>,
    next_msg: u64,
    raised: Vec<Raised>,
    delayed: Delayed,
    out: VecDeque<Output>,
    rng: u64,
    stopped: bool,
    /// Sent datagrams' buffers handed back by the driver (`Session::recycle`), reused for
    /// encoding so a steady flow allocates none.
    pool: Vec<Vec<u8>>,
}

/// Buffers kept for reuse: a few GSO batches' worth.
const POOL_MAX: usize = 512;

impl Cx {
    /// Raise synchronously: the event's handlers all run before the next handler of the
    /// event being handled now.
    pub fn raise(&mut self, ev: Event, arg: Arg) {
        self.raised.push(Raised::Event(ev, arg));
    }

    /// Raise after `delay_us`; the returned id cancels it.
    pub fn raise_after(&mut self, delay_us: u64, ev: Event, arg: Arg) -> TimerId {
        self.delayed.push(self.now + delay_us, ev, arg)
    }

    pub fn cancel(&mut self, t: TimerId) -> bool {
        self.delayed.cancel(t)
    }

    /// A private timer for microprotocol `who`, delivered as `Event::Timer(who)` with `tag`.
    pub fn timer(&mut self, who: MicroId, delay_us: u64, tag: u64) -> TimerId {
        self.raise_after(delay_us, Event::Timer(who), Arg::tag(tag))
    }

    /// Stop the event being handled: handlers of later priority do not see it, and the
    /// framework does not move its segment on. A stopped segment that was consumed is dropped;
    /// one that was not stays, for whoever stopped it to raise again.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    pub fn output(&mut self, o: Output) {
        self.out.push_back(o);
    }

    pub fn rand_u32(&mut self) -> u32 {
        // splitmix64: the seed comes from the driver, so tests are reproducible
        concast_wire::splitmix::next(&mut self.rng) as u32
    }

    pub fn seg(&self, id: SegId) -> Option<&Segment> {
        self.segs.get(id).map(|e| &e.seg)
    }

    pub fn seg_mut(&mut self, id: SegId) -> Option<&mut Segment> {
        self.segs.get_mut(id).map(|e| &mut e.seg)
    }

    /// The datagram a received segment was decoded from.
    pub fn raw(&self, id: SegId) -> Option<&[u8]> {
        self.segs.get(id).and_then(|e| e.raw.as_deref())
    }

    pub fn is_data(&self, id: SegId) -> bool {
        self.segs.get(id).is_some_and(|e| e.data)
    }

    /// How many microprotocols hold a segment's send barrier.
    pub fn send_holds(&self, id: SegId) -> u16 {
        self.segs.get(id).map_or(0, |e| e.holds[Barrier::Send as usize])
    }

    /// True while handling the first SEGMENT SENT of a segment.
    pub fn first_send(&self, id: SegId) -> bool {
        self.segs.get(id).is_some_and(|e| !e.sent)
    }

    /// Mark a received segment as taken care of (ordered, buffered, or control).
    pub fn consume(&mut self, id: SegId) {
        if let Some(e) = self.segs.get_mut(id) {
            e.consumed = true;
        }
    }

    pub fn consumed(&self, id: SegId) -> bool {
        self.segs.get(id).is_some_and(|e| e.consumed)
    }

    pub fn data_segments(&self) -> usize {
        self.data_live
    }

    /// A new outgoing data segment (Fixed Size makes them).
    pub fn new_data(&mut self, seg: Segment) -> SegId {
        self.data_live += 1;
        self.insert(seg, true, None)
    }

    /// Send a control segment (ack, open, keep-alive ...) straight to SEND SEGMENT.
    pub fn send_control(&mut self, seg: Segment) {
        let id = self.insert(seg, false, None);
        self.raise(Event::SendSegment, Arg::seg(id));
    }

    fn insert(&mut self, seg: Segment, data: bool, raw: Option<Bytes>) -> SegId {
        self.segs.insert(Entry {
                seg,
                data,
                holds: [0; 3],
                to_net: false,
                sent: false,
                done: false,
                finished: false,
                consumed: false,
                raw,
        })
    }

    /// Take a user message handed in by `Session::send` (for MSG FROM USER handlers).
    pub fn take_user_msg(&mut self, key: u64) -> Option<Bytes> {
        self.user_msgs.remove(&key)
    }

    /// A user message handed in by `Session::send`, without taking it (Coalesce looks at its
    /// size before deciding whether to take it).
    pub fn user_msg(&self, key: u64) -> Option<&[u8]> {
        self.user_msgs.get(&key).map(|b| &b[..])
    }

    /// Raise MSG FROM NET for a reassembled message.
    pub fn deliver_msg(&mut self, msg: Vec<u8>) {
        self.next_msg += 1;
        self.net_msgs.insert(self.next_msg, msg);
        self.raise(Event::MsgFromNet, Arg { msg: self.next_msg, ..Arg::default() });
    }

    /// Take a message raised by `deliver_msg` (for MSG FROM NET handlers: the Transport
    /// Driver hands it to the user, a deferrer drops a duplicate or late one).
    pub fn take_net_msg(&mut self, key: u64) -> Option<Vec<u8>> {
        self.net_msgs.remove(&key)
    }

    /// Feed a datagram as if it came from the network (FEC hands in what it rebuilt);
    /// `tag` reaches the SEGMENT FROM NET handlers.
    pub fn inject(&mut self, datagram: &[u8], tag: u64) -> Result<SegId, Malformed> {
        let mut seg = Segment::decode(datagram, Some(self.composite))?;
        self.unshift(&mut seg);
        let id = self.insert(seg, false, Some(Bytes::copy_from_slice(datagram)));
        self.raise(Event::SegmentFromNet, Arg { seg: Some(id), msg: 0, tag });
        Ok(id)
    }

    /// ISN offsets come off on the way in (wire sequence numbers are ISN-relative).
    fn unshift(&self, seg: &mut Segment) {
        if let Some(q) = seg.attrs.get(attr::SEQ) {
            seg.attrs.set(attr::SEQ, (q as u32).wrapping_sub(self.shared.isn_peer) as u64);
        }
        if let Some(a) = seg.attrs.get(attr::ACK) {
            let cum = ((a >> 32) as u32).wrapping_sub(self.shared.isn_local) as u64;
            seg.attrs.set(attr::ACK, cum << 32 | (a & 0xffff_ffff));
        }
    }

    /// An empty buffer to encode a datagram into (reused when the driver recycles them).
    pub fn wire_buf(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_default()
    }

    /// Encode for the wire: ISN offsets go on.
    pub fn encode(&self, seg: &Segment, out: &mut Vec<u8>) {
        let (local, peer) = (self.shared.isn_local, self.shared.isn_peer);
        seg.encode_mapped(out, |id, v| match id {
            attr::SEQ => (v as u32).wrapping_add(local) as u64,
            attr::ACK => (((v >> 32) as u32).wrapping_add(peer) as u64) << 32 | (v & 0xffff_ffff),
            _ => v,
        });
    }

    pub fn hold(&mut self, id: SegId, b: Barrier) {
        if let Some(e) = self.segs.get_mut(id) {
            e.holds[b as usize] += 1;
        }
    }

    /// Release a barrier; when its last holder lets go the framework carries on.
    pub fn release(&mut self, id: SegId, b: Barrier) {
        let Some(e) = self.segs.get_mut(id) else { return };
        let h = &mut e.holds[b as usize];
        if *h == 0 {
            return;
        }
        *h -= 1;
        if *h > 0 {
            return;
        }
        match b {
            Barrier::Send if e.to_net => self.raise(Event::SendSegment, Arg::seg(id)),
            Barrier::Done if e.sent && !e.done => self.raise(Event::SegmentDone, Arg::seg(id)),
            Barrier::Dealloc if e.finished => self.raised.push(Raised::Free(id)),
            _ => {}
        }
    }

    fn free(&mut self, id: SegId) {
        self.segs.remove(id);
    }
}

/// One end of one connection.
pub struct Session {
    micros: Vec<Box<dyn Micro>>,
    /// Handlers of each event (by `event_slot`) in priority order: an array, not a map, as
    /// dispatch looks it up once per handler call.
    bindings: [Vec<usize>; EVENT_SLOTS],
    cx: Cx,
    /// Emptied raise lists, reused by `drain`.
    spare: Vec<Vec<Raised>>,
}

const EVENT_SLOTS: usize = 13;

/// The bindings slot of every event but `Timer` (which goes to its one microprotocol).
fn event_slot(ev: Event) -> Option<usize> {
    use Event::*;
    Some(match ev {
        MsgFromUser => 0,
        SegmentFromUser => 1,
        SegmentToNet => 2,
        SendSegment => 3,
        SegmentSent => 4,
        SegmentFromNet => 5,
        MsgFromNet => 6,
        SegmentReceived => 7,
        SegmentTimeout => 8,
        SegmentLost => 9,
        SegmentDone => 10,
        OpenSession => 11,
        CloseSession => 12,
        Timer(_) => return None,
    })
}

impl Session {
    fn build(cfg: Config, client: bool, now: u64, micros: Vec<Box<dyn Micro>>) -> Session {
        let composite = cfg.composite;
        let mut bound: HashMap<Event, Vec<(u8, usize)>> = HashMap::new();
        for (i, m) in micros.iter().enumerate() {
            for (ev, prio) in m.bindings() {
                bound.entry(*ev).or_default().push((*prio, i));
            }
        }
        let mut bindings: [Vec<usize>; EVENT_SLOTS] = Default::default();
        for (ev, mut v) in bound {
            v.sort();
            if let Some(slot) = event_slot(ev) {
                bindings[slot] = v.into_iter().map(|(_, i)| i).collect();
            }
        }
        let shared = Shared {
            client,
            rto_us: cfg.init_rto_us,
            cwnd: f64::INFINITY,
            // one segment until the peer advertises its window (in Accept or its first ACK)
            peer_wnd: 1,
            ack_interval: 1,
            ack_delay_us: 10_000,
            last_send_us: now,
            last_recv_us: now,
            ..Shared::default()
        };
        let cx = Cx {
            now,
            rng: cfg.seed,
            cfg,
            composite,
            shared,
            stats: Stats::default(),
            segs: SegTable::default(),
            data_live: 0,
            user_msgs: HashMap::new(),
            net_msgs: HashMap::new(),
            next_msg: 0,
            raised: Vec::new(),
            delayed: Delayed::default(),
            out: VecDeque::new(),
            stopped: false,
            pool: Vec::new(),
        };
        Session { micros, bindings, cx, spare: Vec::new() }
    }

    // `Session::connect` and `Session::accept`, which build the composite's microprotocols,
    // are in micro/mod.rs: the microprotocols build on this module, not the other way round.

    /// Open a connection with these microprotocols: the composite is announced in the first
    /// segment.
    pub(crate) fn connect_with(cfg: Config, now: u64, micros: Vec<Box<dyn Micro>>) -> Session {
        let mut s = Session::build(cfg, true, now, micros);
        s.cx.shared.conn = s.cx.rand_u32() | 1;
        s.cx.shared.announce = !s.cx.composite.has(MicroId::VirtualCircuit);
        s.dispatch(Event::OpenSession, Arg::default());
        s
    }

    /// Accept a connection from its first datagram, with the microprotocols `micros` builds
    /// for the composite the peer announced.
    pub(crate) fn accept_with(
        template: &Config,
        serve: Option<Composite>,
        first: &[u8],
        now: u64,
        micros: fn(&Config) -> Vec<Box<dyn Micro>>,
    ) -> Result<Session, (String, Vec<u8>)> {
        let seg = Segment::decode(first, None).map_err(|m| (format!("malformed: {m:?}"), vec![]))?;
        let refuse = |why: String| {
            let mut r = Segment::new(Kind::Refuse, seg.conn);
            r.payload = Bytes::copy_from_slice(why.as_bytes());
            (why, r.encode())
        };
        let Some(bits) = seg.attrs.get(attr::COMPOSITE) else {
            // a client announces until answered, so this is a late datagram of a session this
            // end has already let go: no reply, which could only end the peer's session early
            return Err(("unknown connection: no composite announced".into(), vec![]));
        };
        let theirs = Composite::from_bits(bits as u32).map_err(|r| refuse(r.to_string()))?;
        if let Some(ours) = serve.filter(|o| *o != theirs) {
            return Err(refuse(Refusal::Mismatch { ours, theirs }.to_string()));
        }
        let mut cfg = template.clone();
        cfg.composite = theirs;
        let m = micros(&cfg);
        let mut s = Session::build(cfg, false, now, m);
        s.cx.shared.conn = seg.conn;
        s.dispatch(Event::OpenSession, Arg::default());
        s.on_datagram(first, now);
        Ok(s)
    }

    fn dispatch(&mut self, ev: Event, arg: Arg) {
        if let Event::Timer(who) = ev {
            if let Some(i) = self.micros.iter().position(|m| m.id() == who) {
                self.micros[i].handle(ev, &arg, &mut self.cx);
                self.drain();
            }
            return;
        }
        if ev == Event::SegmentDone {
            // done segments no longer count against the send buffer (or hold a close back)
            if let Some(e) = arg.seg.and_then(|id| self.cx.segs.get_mut(id)) {
                if e.done {
                    return;
                }
                e.done = true;
                if e.data {
                    self.cx.data_live -= 1;
                }
            }
        }
        let slot = event_slot(ev).expect("timers are dispatched above");
        for k in 0..self.bindings[slot].len() {
            let i = self.bindings[slot][k];
            self.micros[i].handle(ev, &arg, &mut self.cx);
            let stop = std::mem::take(&mut self.cx.stopped);
            self.drain();
            if stop {
                if let Some(id) = arg.seg.filter(|id| self.cx.consumed(*id)) {
                    self.cx.free(id);
                }
                return;
            }
        }
        self.after(ev, arg);
    }

    fn drain(&mut self) {
        if self.cx.raised.is_empty() {
            return;
        }
        // the list is swapped for a spare one (nested dispatches raise into that), and kept
        // with its capacity afterwards: no allocation per drain
        let spare = self.spare.pop().unwrap_or_default();
        let mut list = std::mem::replace(&mut self.cx.raised, spare);
        for r in list.drain(..) {
            match r {
                Raised::Event(ev, arg) => self.dispatch(ev, arg),
                Raised::Free(id) => self.cx.free(id),
            }
        }
        self.spare.push(list);
    }

    /// The framework's own step after an event's handlers: moving a segment along its path
    /// when no barrier holds it.
    fn after(&mut self, ev: Event, arg: Arg) {
        let Some(id) = arg.seg else { return };
        let Some(e) = self.cx.segs.get_mut(id) else { return };
        match ev {
            Event::SegmentFromUser => self.dispatch(Event::SegmentToNet, arg),
            Event::SegmentToNet => {
                e.to_net = true;
                if e.holds[Barrier::Send as usize] == 0 {
                    self.dispatch(Event::SendSegment, arg);
                }
            }
            Event::SendSegment => self.dispatch(Event::SegmentSent, arg),
            Event::SegmentSent if !e.data => self.cx.free(id),
            Event::SegmentSent if !e.sent => {
                e.sent = true;
                if e.holds[Barrier::Done as usize] == 0 {
                    self.dispatch(Event::SegmentDone, arg);
                }
            }
            Event::SegmentDone | Event::SegmentFromNet => {
                e.finished = true;
                if e.holds[Barrier::Dealloc as usize] == 0 {
                    self.cx.free(id);
                }
            }
            _ => {}
        }
    }

    /// A datagram from the peer. Malformed ones are counted and dropped. Copies it; a driver
    /// that owns its receive buffer calls `on_datagram_shared` instead.
    pub fn on_datagram(&mut self, b: &[u8], now: u64) {
        self.on_datagram_shared(Bytes::copy_from_slice(b), now);
    }

    /// `on_datagram` without a copy: the segment's payload (and FEC's copy of the datagram)
    /// are slices of `b`, which stays allocated while any of them lives.
    pub fn on_datagram_shared(&mut self, b: Bytes, now: u64) {
        self.cx.now = now;
        self.fire(now);
        self.receive(b, now);
    }

    /// A datagram that waited in a socket buffer while the caller was not running (one
    /// wake-up's reads): handled before the timers that came due meanwhile, which the caller
    /// runs (`on_timer`) once it has read what waited. Fired first, a timer judged the
    /// acknowledgements waiting behind it as missing: the retransmission timer timed out, and
    /// RACK's reordering timer declared lost, segments whose ACKs were already here (issue
    /// #23: 8 senders on 2 loaded cores went unscheduled for up to 346 ms, over an RTO).
    pub fn on_waiting_datagram(&mut self, b: Bytes, now: u64) {
        self.cx.now = now;
        self.receive(b, now);
    }

    fn receive(&mut self, b: Bytes, now: u64) {
        if self.cx.shared.closed {
            return;
        }
        match Segment::decode_shared(&b, Some(self.cx.composite)) {
            Ok(mut seg) => {
                if seg.conn != self.cx.shared.conn {
                    self.cx.stats.foreign += 1;
                    return;
                }
                self.cx.unshift(&mut seg);
                self.cx.stats.segs_received += 1;
                self.cx.shared.last_recv_us = now;
                let raw = self.cx.composite.has(MicroId::Fec).then_some(b);
                let id = self.cx.insert(seg, false, raw);
                self.dispatch(Event::SegmentFromNet, Arg::seg(id));
            }
            Err(_) => self.cx.stats.malformed += 1,
        }
    }

    /// Several datagrams follow in one run (a GRO buffer, one wake-up's reads): Positive ACK
    /// acknowledges in-order data once at `end_batch`, not every `ack_interval` segments.
    pub fn begin_batch(&mut self) {
        self.cx.shared.batching = true;
    }

    /// The run is over: what it left unacknowledged is acknowledged now.
    pub fn end_batch(&mut self, now: u64) {
        self.cx.now = now;
        self.cx.shared.batching = false;
        if !self.cx.shared.closed && self.cx.composite.has(MicroId::PositiveAck) {
            self.dispatch(Event::Timer(MicroId::PositiveAck), Arg::tag(crate::event::FLUSH));
        }
    }

    /// Hand a message to the transport. Full when the send buffer is; the message is then not
    /// taken and the caller retries after the next `on_datagram`/`on_timer`.
    pub fn send(&mut self, msg: &[u8], now: u64) -> Result<(), SendError> {
        self.send_tagged(msg, 0, now)
    }

    /// `send` with `tag` on the MSG FROM USER event: flags for microprotocols (Out of Band
    /// reads its `URGENT` flag).
    pub fn send_tagged(&mut self, msg: &[u8], tag: u64, now: u64) -> Result<(), SendError> {
        self.cx.now = now;
        self.admit(msg.len())?; // before the copy, which a refused message need not pay
        self.send_shared(Bytes::copy_from_slice(msg), tag, now)
    }

    /// `send_tagged` without a copy: the message's segments are slices of `msg` (a refcount
    /// each), and its bytes are copied once, into the datagrams.
    pub fn send_shared(&mut self, msg: Bytes, tag: u64, now: u64) -> Result<(), SendError> {
        self.cx.now = now;
        self.admit(msg.len())?;
        self.cx.next_msg += 1;
        let key = self.cx.next_msg;
        self.cx.user_msgs.insert(key, msg);
        self.dispatch(Event::MsgFromUser, Arg { msg: key, tag, ..Arg::default() });
        Ok(())
    }

    /// Whether a message of `len` bytes may be taken now.
    fn admit(&self, len: usize) -> Result<(), SendError> {
        if self.cx.shared.closed || self.cx.shared.closing {
            return Err(SendError::Closed);
        }
        let segs = len.div_ceil(self.cx.cfg.mss).max(1);
        if segs > u16::MAX as usize {
            return Err(SendError::TooLong);
        }
        if self.cx.data_live + segs > self.cx.cfg.send_buf_segs && self.cx.data_live > 0 {
            return Err(SendError::Full);
        }
        Ok(())
    }

    /// The application's count of delivered messages it has not read yet (receiver-driven
    /// flow control stops the peer when it grows).
    pub fn set_backlog(&mut self, msgs: usize) {
        self.cx.shared.app_backlog = msgs;
    }

    pub fn can_send(&self, len: usize) -> bool {
        let segs = len.div_ceil(self.cx.cfg.mss).max(1);
        !self.cx.shared.closing
            && (self.cx.data_live == 0 || self.cx.data_live + segs <= self.cx.cfg.send_buf_segs)
    }

    /// Close once everything sent is done; `Output::Closed` follows.
    pub fn close(&mut self, now: u64) {
        self.cx.now = now;
        if !self.cx.shared.closing && !self.cx.shared.closed {
            self.cx.shared.closing = true;
            self.dispatch(Event::CloseSession, Arg::default());
        }
    }

    /// Run every delayed raising due by `now`.
    pub fn on_timer(&mut self, now: u64) {
        self.cx.now = now;
        self.fire(now);
    }

    fn fire(&mut self, now: u64) {
        while let Some((ev, arg)) = self.cx.delayed.pop_due(now) {
            if self.cx.shared.closed {
                return;
            }
            self.dispatch(ev, arg);
        }
    }

    pub fn next_timer(&mut self) -> Option<u64> {
        if self.cx.shared.closed {
            return None;
        }
        self.cx.delayed.next_due()
    }

    pub fn poll(&mut self) -> Option<Output> {
        self.cx.out.pop_front()
    }

    /// Give a sent `Output::Transmit` buffer back for reuse (optional: saves an allocation
    /// per datagram).
    pub fn recycle(&mut self, mut b: Vec<u8>) {
        if self.cx.pool.len() < POOL_MAX {
            b.clear();
            self.cx.pool.push(b);
        }
    }

    pub fn stats(&self) -> Stats {
        self.cx.stats
    }

    /// sendCustomMsg (UDT/CCC §2.2.2) from the application: a control message to the peer's
    /// algorithm, which gets it in processCustomMsg (the receiver setting its senders' rate,
    /// `cc::group`). Dropped if lost: the caller repeats what must arrive.
    pub fn send_cc_msg(&mut self, msg: &[u8], now: u64) {
        self.cx.now = now;
        if self.cx.shared.closed {
            return;
        }
        let mut s = crate::segment::Segment::new(crate::segment::Kind::CcMsg, self.cx.shared.conn);
        s.payload = Bytes::copy_from_slice(msg);
        self.cx.send_control(s);
        self.drain();
    }

    /// The application calls its own algorithm (UDT/CCC §4.1.1: `setRate` on the instance
    /// `getsockopt` returns): `msg` goes to this end's processCustomMsg. False when the
    /// composite hosts no algorithm.
    pub fn cc_control(&mut self, msg: &[u8], now: u64) -> bool {
        self.cx.now = now;
        let host = [MicroId::WindowedCongestion, MicroId::RateCongestion]
            .into_iter()
            .find(|m| self.cx.composite.has(*m));
        let Some(host) = host.filter(|_| !self.cx.shared.closed) else { return false };
        self.cx.shared.cc_local.push(msg.to_vec());
        self.dispatch(Event::Timer(host), Arg::tag(crate::event::LOCAL_CC));
        true
    }

    /// The performance monitor's trace (UDT/CCC §2.2.4): aggregate and local views (the local
    /// one restarts at each call) and the instant values.
    pub fn perf_trace(&mut self, now: u64) -> crate::cc::monitor::Trace {
        let sh = &mut self.cx.shared;
        let (aggregate, local) = sh.perf.query(now);
        crate::cc::monitor::Trace {
            aggregate,
            local,
            rtt_us: sh.srtt_us,
            pkt_snd_period_us: sh.pkt_snd_period_us,
            cwnd: sh.cwnd,
            flow_wnd: sh.peer_wnd,
        }
    }

    pub fn shared(&self) -> &Shared {
        &self.cx.shared
    }

    pub fn composite(&self) -> Composite {
        self.cx.composite
    }

    /// Payload bytes per segment for messages cut from now on (Resize changes it).
    pub fn mss(&self) -> usize {
        self.cx.cfg.mss
    }

    pub fn is_closed(&self) -> bool {
        self.cx.shared.closed
    }

    /// Segments alive in the table (a leak check for tests).
    pub fn live_segments(&self) -> usize {
        self.cx.segs.len()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    Full,
    Closed,
    TooLong,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hole_is_lost_with_three_segments_selectively_acknowledged_above_it() {
        let mut s = Shared::default();
        for q in [20, 12, 20] {
            s.note_sacked(q);
        }
        assert_eq!(s.lost_below(), None, "two above anything");
        s.note_sacked(15);
        assert_eq!(s.lost_below(), Some(12), "below 12: 12, 15, 20 above");
        s.note_sacked(30);
        s.note_sacked(11);
        assert_eq!(s.sacked_top, [Some(30), Some(20), Some(15)]);
        assert_eq!(s.lost_below(), Some(15));
    }

    fn outputs(s: &mut Session) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| s.poll())
            .filter_map(|o| match o {
                Output::Transmit(d) => Some(d),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn sent_segments_slice_the_message() {
        let msg = Bytes::from((0..10_000u32).map(|i| i as u8).collect::<Vec<u8>>());
        // Bulk waits for its handshake, so the segments are all still in the table
        let mut a = Session::connect(Config::preset(Preset::Bulk), 0);
        a.send_shared(msg.clone(), 0, 0).unwrap();
        let range = msg.as_ptr_range();
        let data: Vec<&Segment> = a.cx.segs.values().filter(|e| e.data).map(|e| &e.seg).collect();
        assert_eq!(data.len(), 8);
        for s in &data {
            let p = s.payload.as_ptr_range();
            assert!(range.contains(&p.start) && p.end <= range.end, "a payload was copied");
        }
        assert_eq!(data.iter().map(|s| s.payload.len()).sum::<usize>(), msg.len());
        // `send` takes the same path after one copy of the message
        let mut b = Session::connect(Config::preset(Preset::Bulk), 0);
        b.send(&msg, 0).unwrap();
        let copied: Vec<u8> = b.cx.segs.values().filter(|e| e.data).flat_map(|e| e.seg.payload.to_vec()).collect();
        assert_eq!(copied, msg);
    }

    #[test]
    fn received_segments_slice_the_datagram_until_reassembled() {
        let cfg = Config { mss: 1000, ..Config::preset(Preset::Minimal) };
        let mut a = Session::connect(cfg.clone(), 0);
        a.send(b"hello", 0).unwrap();
        let first = outputs(&mut a).pop().unwrap();
        let mut b = Session::accept(&cfg, None, &first, 0).unwrap();
        let msg: Vec<u8> = (0..1500u32).map(|i| (i * 7) as u8).collect();
        a.send(&msg, 1).unwrap();
        let grams: Vec<Bytes> = outputs(&mut a).into_iter().map(Bytes::from).collect();
        assert_eq!(grams.len(), 2);
        b.on_datagram_shared(grams[0].clone(), 1);
        // Fixed Size keeps the first fragment as a slice of its datagram, not a copy
        assert!(!grams[0].is_unique());
        b.on_datagram_shared(grams[1].clone(), 1);
        assert!(grams.iter().all(Bytes::is_unique), "a slice outlived the reassembly");
        let got: Vec<Vec<u8>> = std::iter::from_fn(|| b.poll())
            .filter_map(|o| match o {
                Output::Deliver(m) => Some(m),
                _ => None,
            })
            .collect();
        assert_eq!(got, vec![b"hello".to_vec(), msg]);
    }
}
