//! The MTP client, sans-IO like `Session`: the caller passes the time (µs) and datagrams in and
//! takes `Output`s out; `next_timer` says when to call `on_timer`. It pulls every object from
//! the stateless server one reply datagram per request, through one window shared by all its
//! transactions (the path's), repeating what a flowtimeout or three later answers say is lost.
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet, VecDeque};

use super::noble::{self, Flow, LinkType, Local};
use super::ranges::Ranges;
use super::size::SizeAdapt;
use super::window::{Flowtimeout, MtpWindow};
use super::wire::{self, Header, Kind, WireError, F_CHANNEL, F_END, F_ERROR, F_NOPAYLOAD, F_STREAM, MAX_PAYLOAD};
use crate::cc::{self, Ccc, CcCtl};

/// A later request answered this many sends after an unanswered one declares it lost (ours).
pub const FAST_REPEAT: u64 = 3;
/// Requests a transaction may have in flight before its size is known (ours): an object of up
/// to four datagrams takes one round trip; past its end, the replies are empty.
const SPECULATE: u32 = 4;
/// Ended transactions remembered, so their late replies count as stale, not forged.
const REMEMBER_ENDED: usize = 1024;

#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Largest reply payload asked for: 1400 keeps header, UDP and IPv4 in a 1500-byte MTU.
    pub max_size: usize,
    /// Floor of size adaptation.
    pub min_size: usize,
    /// Default expire timer of a transaction.
    pub expire_us: u64,
    /// Window algorithm: "mtp" (the dissertation's, `noble`: one window per transaction),
    /// or, for comparison only, one window shared by all transactions: "mtp-cubic" (our rule
    /// before the dissertation: CUBIC's TCP-friendly AIMD), "mtp-halve" (Reno's AIMD) or any
    /// of `cc::NAMES`.
    pub cc: String,
    /// The UDP receive buffer, bytes: the dissertation's window caps, initial window and size
    /// cap come from it (ch. V). 212992 is Linux's default `rmem_default`.
    pub rcvbuf: usize,
    /// The local link's rate, bytes per second (ch. V: "if provided by the application");
    /// `link` sets it from a link-type hint.
    pub link_rate: Option<u64>,
    /// Initial repeat interval (ch. V: the application chooses it).
    pub repeat_us: u64,
    /// Floor of the repeat interval (`noble::REPEAT_FLOOR_US`, 500 ms, by default).
    pub repeat_floor_us: u64,
    /// Initial window of a transaction, bytes, instead of the dissertation's (half the buffer
    /// or half a second of the link): the simulator of section 7.4 starts at 4 messages.
    pub initial_window: Option<usize>,
    /// The dissertation's simulator's MTP model (Appendix F) instead of the text's loss and
    /// growth rules: comparison only (`noble::Flow::listing_rules`).
    pub listing_rules: bool,
    /// Refuse objects larger than this (bytes).
    pub max_object: u32,
    /// Requests in flight at most, whatever the window algorithm says (ours: 1024, 1.4 MB;
    /// random loss never shrinks MTP's window, so on a path without a queue only this does).
    pub max_window: u32,
    pub seed: u64,
    /// Every request asks for one datagram, as before requests fetched up to a window
    /// (comparison only; the dissertation's subrequests ask for what the window has room for,
    /// ch. V "Mechanisms").
    pub one_datagram_requests: bool,
    /// Keep a record of every request sent, reply taken and loss declared (`take_trace`), to
    /// trace a transfer round by round.
    pub trace: bool,
}

impl ClientConfig {
    /// Sets the local link's rate from an mtp.h link-type hint.
    pub fn link(mut self, l: LinkType) -> ClientConfig {
        self.link_rate = l.rate();
        self
    }

    /// Whether the window is the dissertation's (per transaction).
    pub fn noble(&self) -> bool {
        self.cc == NOBLE
    }
}

/// The dissertation's window rule's name (the default).
pub const NOBLE: &str = "mtp";

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            max_size: 1400,
            min_size: 256,
            expire_us: 30_000_000,
            cc: "mtp".into(),
            rcvbuf: 212_992,
            link_rate: None,
            repeat_us: 1_000_000,
            repeat_floor_us: noble::REPEAT_FLOOR_US,
            initial_window: None,
            listing_rules: false,
            max_object: 1 << 30,
            max_window: 1024,
            seed: 1,
            one_datagram_requests: false,
            trace: false,
        }
    }
}

/// Per-transaction options of `request`.
#[derive(Clone, Debug, Default)]
pub struct RequestOpts {
    pub channel: u8,
    /// Expire timer; the client's default when None.
    pub expire_us: Option<u64>,
    /// Deliver the object's bytes in order as they arrive (`Output::Data`), for streamed
    /// objects; otherwise the whole object comes in `Output::Done`.
    pub in_order: bool,
    /// Ask for the object's size only (payload suppressed).
    pub size_only: bool,
    /// Update callbacks (ch. V, "Mechanisms"): `Output::Progress` each time the contiguous
    /// prefix received grows by at least this many bytes.
    pub update: Option<u32>,
    /// A single-datagram transaction (glossary): the first valid response is the whole
    /// response, no flow control.
    pub single: bool,
}

/// abort()'s four modes, mtp.h's `ABORT_*` (codes 0–3, `Abort::code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abort {
    /// ABORT_FINISH: do not extend the object past what was asked for so far, fill in its
    /// holes; then `Output::Finished` with the contiguous prefix.
    Finish,
    /// ABORT_STOP: send no more subrequests, wait for those in transit (answered or
    /// declared lost); then `Output::Stopped` with the contiguous prefix.
    Stop,
    /// ABORT_EXPIRE: call back at once, as the expire timer would (`Output::Expired`).
    Expire,
    /// ABORT_DESTROY: abandon it, no callback.
    Destroy,
}

impl Abort {
    pub fn code(self) -> u8 {
        self as u8
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Transmit(Vec<u8>),
    /// In-order bytes of an `in_order` transaction.
    Data { tx: u32, offset: u32, bytes: Vec<u8> },
    /// Complete. `object` is empty for `in_order`, size-only and suppressed transactions;
    /// `suppressed` says the payload was suppressed (size-only, or its channel). `channel` is
    /// the channel the server's replies named, handed back for reuse in later transactions
    /// (ch. V "Channel Identifiers"; the request's own when the server kept it).
    Done { tx: u32, total: u32, object: Vec<u8>, suppressed: bool, channel: u8 },
    Finished { tx: u32, prefix: Vec<u8>, complete: bool },
    Stopped { tx: u32, prefix: Vec<u8> },
    /// Update callback: the contiguous prefix received is now `received` bytes.
    Progress { tx: u32, received: u32 },
    Expired { tx: u32 },
    Failed { tx: u32, reason: String },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    pub requests: u64,
    /// Requests for bytes asked for before (after a loss).
    pub repeats: u64,
    pub replies: u64,
    /// Losses declared by three later answers (the rest by the flowtimeout).
    pub fast_repeats: u64,
    pub timeouts: u64,
    /// Flowtimeouts with nothing answered at all (window to minimum, flowtimeout doubled).
    pub silent: u64,
    pub duplicates: u64,
    pub reordered: u64,
    /// Replies for transactions that ended.
    pub stale: u64,
    /// Replies answering no request we sent (unknown transaction, offset or stamp; wrong size).
    pub forged: u64,
    pub truncated: u64,
    pub malformed: u64,
    pub size_cuts: u64,
    pub size_grows: u64,
    /// The dissertation's window: growths, loss cuts and receive-buffer cuts, summed over the
    /// transactions (0 with the shared-window algorithms).
    pub window_grows: u64,
    pub window_cuts: u64,
    pub overflow_cuts: u64,
    /// Replies shorter than asked: the server's response limit per request (ch. V).
    pub server_limited: u64,
    /// Channel errors: a name-less request the server could not place, sent again with the name.
    pub channel_errors: u64,
}

/// One line of a client's trace (`ClientConfig::trace`): what happened to which bytes, and the
/// transaction's window and transit right after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    pub at_us: u64,
    /// "send" (a request), "repeat" (a request for bytes asked for before), "reply" (a reply
    /// datagram taken) or "lost" (bytes declared lost: their repeat interval passed).
    pub kind: &'static str,
    pub tx: u32,
    pub offset: u32,
    /// Bytes asked for, arrived or declared lost.
    pub bytes: u32,
    /// The transaction's window and transit in bytes (0 without the dissertation's window).
    pub window: usize,
    pub transit: usize,
}

/// One request (a transaction's offset), possibly sent several times.
struct Pending {
    /// Bytes it asks for: one datagram's, or (a `multi` transaction) its response limit.
    len: u32,
    /// Every send still answerable: stamp, time, length asked per datagram, send number, and
    /// the extent (response limit) of that send.
    sends: Vec<(u32, u64, u32, u64, u32)>,
    in_flight: bool,
    sendno: u64,
    /// When what it asked for and has not come is declared lost: a repeat interval after it
    /// was sent (ch. V "Data Loss and Recovery": data that fails to arrive within the repeat
    /// interval), whatever part of a `multi` request has come meanwhile.
    due: u64,
}

struct Tx {
    name: Vec<u8>,
    opts: RequestOpts,
    expire_at: u64,
    total: Option<u32>,
    buf: Vec<u8>,
    got: Ranges,
    todo: Ranges,
    pending: BTreeMap<u32, Pending>,
    in_flight: u32,
    delivered: u32,
    hold_until: u64,
    finishing: bool,
    suppressed: bool,
    high: u32,
    /// Aborted: Some(true) by ABORT_STOP, Some(false) by ABORT_FINISH.
    stopping: Option<bool>,
    /// ABORT_FINISH: the end not to pass.
    finish_at: Option<u32>,
    /// The dissertation's flow state (cc "mtp"); None with a shared window.
    flow: Option<Flow>,
    /// Bytes asked for and neither answered nor declared lost (glossary "transit").
    transit: usize,
    /// The server's response limit per request, once a reply showed it (ch. V).
    server_limit: Option<u32>,
    /// Prefix length at the last update callback.
    reported: u32,
    /// Requests carry a response limit and fetch up to a window of datagrams each (ch. V
    /// "Mechanisms"): the dissertation's window, payload wanted, not streamed or single.
    multi: bool,
    /// Every byte ever asked for: a request for some of them again is a repeat.
    asked: Ranges,
    /// The server said the channel names the object: subrequests go without the name (ch. V
    /// "Payload Suppression").
    nameless: bool,
}

pub struct Client {
    cfg: ClientConfig,
    txs: BTreeMap<u32, Tx>,
    rr: u32,
    cc: Box<dyn Ccc>,
    ctl: CcCtl,
    ft: Flowtimeout,
    size: SizeAdapt,
    in_flight: u32,
    sendno: u64,
    stamp_base: u32,
    by_send: BTreeMap<u64, (u32, u32)>,
    deadlines: BinaryHeap<Reverse<(u64, u64, u32, u32)>>,
    last_reply_at: u64,
    last_silent_at: Option<u64>,
    next_send_at: u64,
    /// The last pump stopped for pacing, with work left: `next_send_at` is a timer.
    paced: bool,
    suppressed: HashSet<u8>,
    ended: VecDeque<u32>,
    ended_set: HashMap<u32, ()>,
    out: VecDeque<Output>,
    /// The next transaction id (ch. V "Transaction Identifiers": a random start per client,
    /// then one more per request).
    next_id: u32,
    stats: ClientStats,
    occ: Occupancy,
    /// Sums of ended transactions' flow counters.
    ended_flow: (u64, u64, u64),
    trace: Vec<TraceEvent>,
}

/// Time-weighted window and requests in flight while transactions are alive: what the
/// window allowed against what the client used (a window that is large but not filled
/// points at pacing or at the transactions, not at the window rules).
#[derive(Default)]
struct Occupancy {
    last_us: Option<u64>,
    busy_us: u64,
    window_us: f64,
    in_flight_us: f64,
}

impl Client {
    /// init: a client with its window algorithm.
    pub fn new(cfg: ClientConfig) -> Result<Client, String> {
        if cfg.min_size == 0 || cfg.max_size > MAX_PAYLOAD || cfg.min_size > cfg.max_size {
            return Err(format!("sizes must satisfy 0 < min_size <= max_size <= {MAX_PAYLOAD}"));
        }
        if cfg.max_window == 0 {
            return Err("max_window must be at least 1".into());
        }
        if cfg.rcvbuf < 2 * noble::SIZE_MINIMUM {
            return Err(format!("rcvbuf must be at least {} bytes", 2 * noble::SIZE_MINIMUM));
        }
        let mut cc: Box<dyn Ccc> = match MtpWindow::by_name(&cfg.cc) {
            Some(w) => Box::new(w),
            None if cfg.noble() => Box::new(MtpWindow::default()),
            None => cc::by_name(&cfg.cc, 1e7)?,
        };
        let mut ctl = CcCtl::new(cfg.max_size);
        cc.init(&mut ctl);
        let mut rng = cfg.seed | 1;
        let stamp_base = xorshift(&mut rng) as u32;
        let next_id = xorshift(&mut rng) as u32;
        Ok(Client {
            size: SizeAdapt::new(cfg.min_size, cfg.max_size),
            cfg,
            txs: BTreeMap::new(),
            rr: 0,
            cc,
            ctl,
            ft: Flowtimeout::default(),
            in_flight: 0,
            sendno: 0,
            stamp_base,
            by_send: BTreeMap::new(),
            deadlines: BinaryHeap::new(),
            last_reply_at: 0,
            last_silent_at: None,
            next_send_at: 0,
            paced: false,
            suppressed: HashSet::new(),
            ended: VecDeque::new(),
            ended_set: HashMap::new(),
            out: VecDeque::new(),
            next_id,
            stats: ClientStats::default(),
            occ: Occupancy::default(),
            ended_flow: (0, 0, 0),
            trace: Vec::new(),
        })
    }

    /// Adds the time since the last event at the state that held during it.
    fn account(&mut self, now: u64) {
        if let Some(last) = self.occ.last_us.filter(|_| !self.txs.is_empty()) {
            let dt = now.saturating_sub(last);
            self.occ.busy_us += dt;
            // the window that governs: the transactions' own under the dissertation's rules
            // (ch. V), in datagrams of their current size; else the shared one
            self.occ.window_us += self.window() * dt as f64;
            self.occ.in_flight_us += self.in_flight as f64 * dt as f64;
        }
        self.occ.last_us = Some(now);
    }

    /// Mean window and mean requests in flight over the time transactions were alive.
    pub fn occupancy(&self) -> (f64, f64) {
        let t = self.occ.busy_us.max(1) as f64;
        (self.occ.window_us / t, self.occ.in_flight_us / t)
    }

    pub fn stats(&self) -> ClientStats {
        let (mut g, mut c, mut o) = self.ended_flow;
        for f in self.txs.values().filter_map(|t| t.flow.as_ref()) {
            (g, c, o) = (g + f.grows, c + f.cuts, o + f.overflow_cuts);
        }
        ClientStats {
            size_cuts: self.size.cuts,
            size_grows: self.size.grows,
            window_grows: g,
            window_cuts: c,
            overflow_cuts: o,
            ..self.stats.clone()
        }
    }

    /// The trace so far (empty unless `ClientConfig::trace`), handed over and cleared.
    pub fn take_trace(&mut self) -> Vec<TraceEvent> {
        std::mem::take(&mut self.trace)
    }

    fn note(&mut self, now: u64, kind: &'static str, id: u32, offset: u32, bytes: u32) {
        if !self.cfg.trace {
            return;
        }
        let (window, transit) = self.txs.get(&id).map_or((0, 0), |t| (t.flow.as_ref().map_or(0, |f| f.window), t.transit));
        self.trace.push(TraceEvent { at_us: now, kind, tx: id, offset, bytes, window, transit });
    }

    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    /// A transaction's flow state (the dissertation's window), if it has one.
    pub fn flow(&self, id: u32) -> Option<&Flow> {
        self.txs.get(&id)?.flow.as_ref()
    }

    /// The contiguous prefix a transaction has received so far.
    pub fn received_prefix(&self, id: u32) -> Option<Vec<u8>> {
        self.txs.get(&id).map(prefix_of)
    }

    fn local(&self) -> Local {
        Local { rcvbuf: self.cfg.rcvbuf, link_rate: self.cfg.link_rate, max_size: self.cfg.max_size, min_size: self.cfg.min_size }
    }

    /// Receive-buffer watch (ch. V): the caller reports how many bytes wait in the UDP
    /// receive buffer; above half of `rcvbuf`, the fastest transaction (largest window) loses
    /// a datagram of window and every transaction's flowtimeout returns to 0. Returns whether
    /// it acted (dissertation's window only).
    pub fn rcvbuf_queued(&mut self, now: u64, queued: usize) -> bool {
        self.account(now);
        if !noble::rcvbuf_overflowing(queued, self.cfg.rcvbuf) {
            return false;
        }
        let flows = self.txs.iter().filter_map(|(&k, t)| t.flow.as_ref().map(|f| (k, f)));
        let Some(id) = noble::fastest(flows) else { return false };
        for t in self.txs.values_mut() {
            if let Some(f) = t.flow.as_mut() {
                f.reset_flowtimeout();
            }
        }
        self.txs.get_mut(&id).and_then(|t| t.flow.as_mut()).expect("fastest").overflow();
        true
    }
    /// A transaction's transit (glossary): bytes asked for and neither answered nor declared lost.
    pub fn transit(&self, id: u32) -> Option<usize> {
        self.txs.get(&id).map(|t| t.transit)
    }
    /// Transactions alive.
    pub fn active(&self) -> usize {
        self.txs.len()
    }
    /// Their ids.
    pub fn transactions(&self) -> Vec<u32> {
        self.txs.keys().copied().collect()
    }
    /// Requests remembered (in flight or lost and answerable), over all transactions.
    pub fn pending(&self) -> usize {
        self.txs.values().map(|t| t.pending.len()).sum()
    }
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }
    /// The window in datagrams: the shared one, or the sum of the transactions' (each its
    /// bytes over its datagram size).
    pub fn window(&self) -> f64 {
        if self.cfg.noble() {
            return self.txs.values().filter_map(|t| t.flow.as_ref()).map(|f| f.window as f64 / f.size as f64).sum();
        }
        self.ctl.cwnd
    }
    /// How long a request may go unanswered before it is repeated: the shared timer, or the
    /// longest repeat interval of the transactions (the dissertation's).
    pub fn flowtimeout_us(&self) -> u64 {
        if self.cfg.noble() {
            return self.txs.values().filter_map(|t| t.flow.as_ref()).map(|f| f.repeat_us).max().unwrap_or(self.cfg.repeat_us);
        }
        self.ft.get_us()
    }
    pub fn datagram_size(&self) -> usize {
        if self.cfg.noble() {
            return self.txs.values().filter_map(|t| t.flow.as_ref()).map(|f| f.size).max().unwrap_or(noble::SIZE_DEFAULT.min(self.cfg.max_size));
        }
        self.size.size
    }
    pub fn poll(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// request: opens a transaction for the object `name`; returns its 32-bit id: the client's
    /// random start plus the number of requests before it (ch. V "Transaction Identifiers": an id
    /// comes back only after 2^32 requests; 0 and ids still in use or remembered are skipped).
    pub fn request(&mut self, now: u64, name: &[u8], opts: RequestOpts) -> Result<u32, String> {
        self.account(now);
        if name.len() > wire::MAX_NAME {
            return Err(format!("name of {} bytes; at most {}", name.len(), wire::MAX_NAME));
        }
        let id = loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1);
            if id != 0 && !self.txs.contains_key(&id) && !self.ended_set.contains_key(&id) {
                break id;
            }
        };
        let mut todo = Ranges::new();
        todo.insert(0, u32::MAX);
        let expire_at = now + opts.expire_us.unwrap_or(self.cfg.expire_us);
        let flow = (self.cfg.noble() && !opts.single).then(|| {
            let mut f = Flow::new(self.local(), self.cfg.repeat_us, self.cfg.repeat_floor_us);
            f.listing_rules = self.cfg.listing_rules;
            match self.cfg.initial_window {
                Some(w) => f.with_window(w),
                None => f,
            }
        });
        let multi = flow.is_some() && !opts.size_only && !opts.in_order && !self.cfg.one_datagram_requests;
        let tx = Tx {
            name: name.to_vec(),
            opts,
            expire_at,
            total: None,
            buf: Vec::new(),
            got: Ranges::new(),
            todo,
            pending: BTreeMap::new(),
            in_flight: 0,
            delivered: 0,
            hold_until: 0,
            finishing: false,
            suppressed: false,
            high: 0,
            flow,
            transit: 0,
            server_limit: None,
            reported: 0,
            multi,
            asked: Ranges::new(),
            nameless: false,
            stopping: None,
            finish_at: None,
        };
        self.txs.insert(id, tx);
        self.pump(now);
        Ok(id)
    }

    /// Payload suppression by channel: while on, requests of that channel ask for the header
    /// only, and its transactions end as soon as their size is known.
    pub fn suppress(&mut self, channel: u8, on: bool) {
        if on {
            self.suppressed.insert(channel);
        } else {
            self.suppressed.remove(&channel);
        }
    }

    /// abort, in one of its four modes. Unknown ids are an error.
    pub fn abort(&mut self, now: u64, id: u32, mode: Abort) -> Result<(), String> {
        let Some(tx) = self.txs.get_mut(&id) else { return Err(format!("no transaction {id:#010x}")) };
        match mode {
            Abort::Finish => {
                // the holes below the highest byte asked for stay to do
                let high = tx.pending.iter().map(|(&o, p)| o.saturating_add(p.len)).max().unwrap_or(0).max(tx.high);
                tx.todo.truncate(high);
                tx.finish_at = Some(high);
                tx.stopping = Some(false);
                self.settle(now, id);
            }
            Abort::Stop => {
                tx.finishing = true;
                tx.todo = Ranges::new();
                tx.stopping = Some(true);
                self.settle(now, id);
            }
            Abort::Expire => {
                self.end(id);
                self.out.push_back(Output::Expired { tx: id });
            }
            Abort::Destroy => {
                self.end(id);
            }
        }
        self.pump(now);
        Ok(())
    }

    /// Frees every piece of a transaction's state; remembers its id for stale replies.
    fn end(&mut self, id: u32) -> Option<Tx> {
        let tx = self.txs.remove(&id)?;
        if let Some(f) = &tx.flow {
            self.ended_flow.0 += f.grows;
            self.ended_flow.1 += f.cuts;
            self.ended_flow.2 += f.overflow_cuts;
        }
        self.in_flight -= tx.in_flight;
        for p in tx.pending.values().filter(|p| p.in_flight) {
            self.by_send.remove(&p.sendno);
        }
        self.ended.push_back(id);
        self.ended_set.insert(id, ());
        if self.ended.len() > REMEMBER_ENDED {
            if let Some(old) = self.ended.pop_front() {
                self.ended_set.remove(&old);
            }
        }
        Some(tx)
    }

    pub fn next_timer(&self) -> Option<u64> {
        let rep = self.deadlines.peek().map(|Reverse(d)| d.0);
        let exp = self.txs.values().map(|t| t.expire_at).min();
        let hold = self.txs.values().filter(|t| t.hold_until > 0).map(|t| t.hold_until).min();
        let pace = self.paced.then_some(self.next_send_at);
        [rep, exp, hold, pace].into_iter().flatten().min()
    }

    pub fn on_timer(&mut self, now: u64) {
        self.account(now);
        let expired: Vec<u32> = self.txs.iter().filter(|(_, t)| t.expire_at <= now).map(|(&k, _)| k).collect();
        for id in expired {
            self.end(id);
            self.out.push_back(Output::Expired { tx: id });
        }
        while let Some(&Reverse((at, sendno, id, off))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            if self.is_current(at, sendno, id, off) {
                self.stats.timeouts += 1;
                let sent_at = self.txs[&id].pending[&off].sends.last().map_or(0, |s| s.1);
                let silent = self.last_reply_at < sent_at;
                self.lost(now, id, off, silent);
            }
        }
        for t in self.txs.values_mut() {
            if t.hold_until <= now {
                t.hold_until = 0;
            }
        }
        self.pump(now);
    }

    fn is_current(&self, at: u64, sendno: u64, id: u32, off: u32) -> bool {
        self.txs
            .get(&id)
            .and_then(|t| t.pending.get(&off))
            .is_some_and(|p| p.in_flight && p.sendno == sendno && p.due == at)
    }

    /// A request declared lost: out of flight, its bytes back on the to-do list, the window
    /// and size told. `silent`: nothing at all was answered since it was sent.
    fn lost(&mut self, now: u64, id: u32, off: u32, silent: bool) {
        let Some(t) = self.txs.get_mut(&id) else { return };
        let Some(p) = t.pending.get_mut(&off) else { return };
        p.in_flight = false;
        let (len, sendno, repeat) = (p.len, p.sendno, p.sends.len() > 1);
        land(t, &mut self.in_flight, &mut self.by_send, sendno);
        if t.multi {
            // what of its extent has not come is lost (ch. V "Data Loss and Recovery"): out of
            // transit, back on the subrequest list, and told to the window as lost bytes
            let end = off.saturating_add(len).min(t.total.unwrap_or(u32::MAX));
            let mut missing = Ranges::new();
            if end > off {
                missing.insert(off, end);
            }
            missing.remove_covered(&t.got);
            let n: u64 = missing.iter().map(|(s, e)| (e - s) as u64).sum();
            t.transit = transit_of(t);
            if !t.finishing {
                for (s, e) in missing.iter() {
                    t.todo.insert(s, e);
                }
            }
            if let Some(f) = t.flow.as_mut() {
                f.lost(n as usize);
            }
            self.note(now, "lost", id, off, n as u32);
            self.settle(now, id);
            return;
        }
        if !t.finishing {
            let end = off.saturating_add(len).min(t.total.unwrap_or(u32::MAX));
            t.todo.insert(off, end);
            t.todo.remove_covered(&t.got);
        }
        if let Some(f) = t.flow.as_mut() {
            // ch. V: the bytes declared lost lower the flowtimeout, the window may lose one
            // datagram; no shared window, no backoff
            t.transit = t.transit.saturating_sub(len as usize);
            f.lost(len as usize);
            self.note(now, "lost", id, off, len);
            self.settle(now, id);
            return;
        }
        self.size.lost(len as usize, repeat);
        self.observe(now);
        let ft = self.ft.get_us();
        if silent {
            if self.last_silent_at.is_none_or(|s| now >= s + ft) {
                self.last_silent_at = Some(now);
                self.stats.silent += 1;
                self.ft.back_off();
                self.cc.on_timeout(&mut self.ctl);
            }
        } else {
            self.cc.on_loss(&mut self.ctl, &[(sendno as u32, sendno as u32)]);
        }
        self.settle(now, id);
    }

    fn observe(&mut self, now: u64) {
        let c = &mut self.ctl;
        c.now_us = now;
        c.rtt_us = self.ft.srtt_us;
        c.min_rtt_us = self.ft.min_rtt_us;
        c.inflight = self.in_flight;
        c.acked = 1;
    }

    /// event loop input: one datagram from the server.
    pub fn on_datagram(&mut self, now: u64, d: &[u8]) {
        self.account(now);
        let (h, body) = match wire::decode(d) {
            Ok(x) => x,
            Err(WireError::Short(_) | WireError::Length { .. }) => {
                self.stats.truncated += 1;
                return;
            }
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if h.kind != Kind::Reply {
            self.stats.malformed += 1;
            return;
        }
        match self.check(&h, body.len()) {
            Verdict::Accept(sent_at, sent_no) => self.accept(now, &h, body, sent_at, sent_no),
            Verdict::Part(key, sent_at) => self.accept_part(now, &h, body, key, sent_at),
            Verdict::Duplicate => {
                // a response all the same: the transaction is not silent (ch. V, expiry)
                self.stats.duplicates += 1;
                let expire = self.cfg.expire_us;
                if let Some(t) = self.txs.get_mut(&h.txid) {
                    t.expire_at = now + t.opts.expire_us.unwrap_or(expire);
                }
            }
            Verdict::Stale => self.stats.stale += 1,
            Verdict::Forged => self.stats.forged += 1,
        }
        self.pump(now);
    }

    /// Whether a well-formed reply answers a request we sent, and when that send left.
    fn check(&self, h: &Header, body_len: usize) -> Verdict {
        let Some(t) = self.txs.get(&h.txid) else {
            return if self.ended_set.contains_key(&h.txid) { Verdict::Stale } else { Verdict::Forged };
        };
        if t.multi {
            return check_part(t, h, body_len);
        }
        let Some(p) = t.pending.get(&h.offset) else {
            let end = h.offset.saturating_add(h.length as u32);
            if t.got.covers(h.offset, end.max(h.offset + 1)) {
                return Verdict::Duplicate;
            }
            return if t.total.is_some_and(|n| h.offset >= n) { Verdict::Stale } else { Verdict::Forged };
        };
        let Some(&(_, at, asked, no, _)) = p.sends.iter().find(|s| s.0 == h.stamp) else { return Verdict::Forged };
        if h.flags & F_ERROR != 0 {
            return Verdict::Accept(at, no);
        }
        let n = h.length as u32;
        let ends = h.flags & (F_END | F_STREAM) != 0;
        // a short reply that does not end the object is the server's response limit (ch. V);
        // an empty one is not
        let single = t.opts.single;
        if n > asked || (n == 0 && asked > 0 && !ends && !single) || (h.flags & F_NOPAYLOAD == 0 && body_len != n as usize) {
            return Verdict::Forged;
        }
        let stream = h.flags & F_STREAM != 0;
        if !stream {
            if t.total.is_some_and(|tot| tot != h.total) {
                return Verdict::Forged;
            }
            // the end flag must agree with the total it carries
            if (h.flags & F_END != 0) != (h.offset as u64 + n as u64 >= h.total as u64) {
                return Verdict::Forged;
            }
        }
        Verdict::Accept(at, no)
    }

    /// What a reply says of the channel (ch. V "Channel Identifiers", "Payload Suppression"):
    /// a channel error puts the request back to be sent with its name (true: nothing else to
    /// do with the reply); otherwise the transaction takes the server's channel, and leaves the
    /// name out of later subrequests when the server says the channel names the object.
    fn channel_said(&mut self, id: u32, key: u32, h: &Header) -> bool {
        let Some(t) = self.txs.get_mut(&id) else { return true };
        if h.flags & (F_ERROR | F_CHANNEL) != F_ERROR | F_CHANNEL {
            t.opts.channel = h.channel;
            t.nameless |= h.flags & F_CHANNEL != 0;
            return false;
        }
        self.stats.channel_errors += 1;
        t.nameless = false;
        let Some(p) = t.pending.remove(&key) else { return true };
        if p.in_flight {
            land(t, &mut self.in_flight, &mut self.by_send, p.sendno);
            if !t.multi {
                t.transit = t.transit.saturating_sub(p.len as usize);
            }
        }
        let end = key.saturating_add(p.len).min(t.total.unwrap_or(u32::MAX));
        if !t.finishing && end > key {
            t.todo.insert(key, end);
            t.todo.remove_covered(&t.got);
            t.asked.remove(key, end);
        }
        if t.multi {
            t.transit = transit_of(t);
        }
        true
    }

    /// A reply's refusal, or an object too large: ends the transaction with `Failed`.
    fn refused(&mut self, h: &Header, body: &[u8]) -> bool {
        let reason = if h.flags & F_ERROR != 0 {
            String::from_utf8_lossy(body).into_owned()
        } else if h.flags & F_STREAM == 0 && h.total > self.cfg.max_object {
            format!("object of {} bytes is larger than max_object {}", h.total, self.cfg.max_object)
        } else {
            return false;
        };
        self.end(h.txid);
        self.out.push_back(Output::Failed { tx: h.txid, reason });
        true
    }

    /// One reply datagram of a `multi` request (ch. V "Mechanisms"): its bytes leave transit
    /// and tell the window (per datagram, as a one-datagram request's would); the server's
    /// response limit bounds later subrequests and trims this one; a request whose extent has
    /// all come ends; one still waiting is due a repeat interval (as it stands now) after its send.
    fn accept_part(&mut self, now: u64, h: &Header, body: &[u8], key: u32, sent_at: u64) {
        self.stats.replies += 1;
        self.last_reply_at = now;
        self.ft.sample(now.saturating_sub(sent_at) as f64);
        if self.channel_said(h.txid, key, h) || self.refused(h, body) {
            return;
        }
        let id = h.txid;
        let expire = self.cfg.expire_us;
        let t = self.txs.get_mut(&id).expect("checked");
        t.expire_at = now + t.opts.expire_us.unwrap_or(expire);
        let n = h.length as u32;
        let end = h.offset + n;
        if let Some(l) = h.server_limit() {
            t.server_limit = Some(t.server_limit.map_or(l, |x| x.min(l)));
            let p = t.pending.get_mut(&key).expect("checked");
            if p.in_flight && l < p.len {
                // the server sends no more than its limit: the rest of the extent is asked
                // for again by later subrequests (ch. V, "Mechanisms")
                let cut = (key.saturating_add(l), key.saturating_add(p.len));
                p.len = l;
                t.asked.remove(cut.0, cut.1);
                if !t.finishing {
                    t.todo.insert(cut.0, cut.1);
                    t.todo.remove_covered(&t.got);
                }
                self.stats.server_limited += 1;
            }
        }
        if let Some(f) = t.flow.as_mut() {
            f.received(n as usize, now.saturating_sub(sent_at));
        }
        if h.offset < t.high {
            self.stats.reordered += 1;
        }
        t.high = t.high.max(end);
        if t.total.is_none() {
            t.total = Some(h.total);
            t.todo.truncate(h.total);
            // extents past the end will not come: trimmed, or dropped when they start past it
            let past: Vec<u32> = t.pending.iter().filter(|(&k, p)| k.saturating_add(p.len) > h.total).map(|(&k, _)| k).collect();
            for k in past {
                if k < h.total {
                    t.pending.get_mut(&k).expect("listed").len = h.total - k;
                } else if k != key {
                    let q = t.pending.remove(&k).expect("listed");
                    if q.in_flight {
                        land(t, &mut self.in_flight, &mut self.by_send, q.sendno);
                    }
                }
            }
        }
        if store(t, h, body) {
            t.todo.remove(h.offset, end);
        }
        // done with this request once its extent (to the end) has all come
        let total = t.total.unwrap_or(u32::MAX);
        let p = t.pending.get_mut(&key).expect("checked");
        let stop = key.saturating_add(p.len).min(total);
        let whole = key >= total || t.suppressed || t.got.covers(key, stop);
        if whole {
            let p = t.pending.remove(&key).expect("checked");
            if p.in_flight {
                land(t, &mut self.in_flight, &mut self.by_send, p.sendno);
            }
        } else if p.in_flight {
            // what has not come is lost when it fails to arrive within the repeat interval of its
            // request's send (ch. V "Data Loss and Recovery"), the interval as the replies have
            // adjusted it (2-4x the mean RTT, the floor), not the application's initial value the
            // request left with, and not restarted by each reply: restarting cost a round trip and
            // the burst's spread per repeat round, the initial 1 s another 0.4 s on the `wan` path
            // (docs/experiments.md, "Why MTP got slower on the wan path")
            let ft = t.flow.as_ref().map_or(self.cfg.repeat_us, |f| f.repeat_us);
            let due = p.sends.last().map_or(now, |s| s.1) + ft;
            if due != p.due {
                p.due = due;
                self.deadlines.push(Reverse((due, p.sendno, id, key)));
            }
        }
        t.transit = transit_of(t);
        self.note(now, "reply", id, h.offset, n);
        self.deliver(id);
        self.settle(now, id);
    }

    fn accept(&mut self, now: u64, h: &Header, body: &[u8], sent_at: u64, sent_no: u64) {
        self.stats.replies += 1;
        self.last_reply_at = now;
        self.ft.sample(now.saturating_sub(sent_at) as f64);
        let id = h.txid;
        if self.channel_said(id, h.offset, h) || self.refused(h, body) {
            return;
        }
        let t = self.txs.get_mut(&id).expect("checked");
        let p = t.pending.remove(&h.offset).expect("checked");
        if p.in_flight {
            land(t, &mut self.in_flight, &mut self.by_send, p.sendno);
            t.transit = t.transit.saturating_sub(p.len as usize);
        }
        // expiry is silence: the expire timer counts from the last response (ch. V)
        t.expire_at = now + t.opts.expire_us.unwrap_or(self.cfg.expire_us);
        let n = h.length as u32;
        if t.opts.single {
            // the first valid response is the whole response (glossary)
            let total = n;
            self.end(id);
            self.out.push_back(Output::Done { tx: id, total, object: body.to_vec(), suppressed: h.flags & F_NOPAYLOAD != 0, channel: h.channel });
            return;
        }
        let ends = h.flags & (F_END | F_STREAM) != 0;
        if n > 0 && n < p.len && !ends {
            // the server sent less than asked: its response limit per request, the upper
            // bound of later subrequests (ch. V, "Mechanisms")
            t.server_limit = Some(t.server_limit.map_or(n, |l| l.min(n)));
            self.stats.server_limited += 1;
        }
        if let Some(f) = t.flow.as_mut() {
            f.received(n as usize, now.saturating_sub(sent_at));
        }
        let end = h.offset + n;
        if h.offset < t.high {
            self.stats.reordered += 1;
        }
        t.high = t.high.max(end);
        let stream = h.flags & F_STREAM != 0;
        if !stream {
            t.total = Some(h.total);
            t.todo.truncate(h.total);
            let beyond: Vec<u32> = t.pending.range(h.total..).map(|(&o, _)| o).collect();
            for o in beyond {
                let q = t.pending.remove(&o).expect("listed");
                if q.in_flight {
                    land(t, &mut self.in_flight, &mut self.by_send, q.sendno);
                }
            }
        }
        store(t, h, body);
        // bytes asked for and not sent: a short streamed answer ("not yet"), or a send whose
        // length was cut back to the total
        let asked_end = h.offset.saturating_add(p.len).min(t.total.unwrap_or(u32::MAX));
        if end < asked_end && !t.finishing && h.flags & F_NOPAYLOAD == 0 {
            t.todo.insert(end, asked_end);
            if stream && n == 0 {
                t.hold_until = now + self.ft.get_us();
            }
        }
        if self.cfg.noble() {
            // the dissertation declares a loss by its repeat interval only (ch. V)
            self.note(now, "reply", id, h.offset, n);
            self.deliver(id);
            self.settle(now, id);
            return;
        }
        self.size.answered(p.len as usize);
        self.observe(now);
        self.cc.on_ack(&mut self.ctl, p.sendno as u32);
        self.ctl.cwnd = self.ctl.cwnd.min(self.cfg.max_window as f64);
        // requests sent FAST_REPEAT sends before this one and still unanswered are lost
        while let Some((&no, &(tid, off))) = self.by_send.iter().next() {
            if no + FAST_REPEAT > sent_no {
                break;
            }
            self.stats.fast_repeats += 1;
            self.lost(now, tid, off, false);
        }
        self.deliver(id);
        self.settle(now, id);
    }

    fn deliver(&mut self, id: u32) {
        let Some(t) = self.txs.get_mut(&id) else { return };
        if let Some(u) = t.opts.update {
            let p = t.got.prefix();
            if p >= t.reported.saturating_add(u.max(1)) {
                t.reported = p;
                self.out.push_back(Output::Progress { tx: id, received: p });
            }
        }
        if !t.opts.in_order {
            return;
        }
        let p = t.got.prefix();
        if p > t.delivered {
            let bytes = t.buf[t.delivered as usize..p as usize].to_vec();
            self.out.push_back(Output::Data { tx: id, offset: t.delivered, bytes });
            t.delivered = p;
        }
    }

    /// Ends a transaction that is complete, or finishing with nothing in flight.
    fn settle(&mut self, _now: u64, id: u32) {
        let Some(t) = self.txs.get(&id) else { return };
        let complete = t.total.is_some_and(|n| t.suppressed || t.got.covers(0, n));
        if t.stopping == Some(true) && t.in_flight == 0 {
            let t = self.end(id).expect("present");
            self.out.push_back(Output::Stopped { tx: id, prefix: prefix_of(&t) });
        } else if let (Some(false), Some(at)) = (t.stopping, t.finish_at) {
            let lim = at.min(t.total.unwrap_or(u32::MAX));
            if complete || t.got.covers(0, lim.max(1)) || (t.todo.is_empty() && t.in_flight == 0) {
                let t = self.end(id).expect("present");
                self.out.push_back(Output::Finished { tx: id, prefix: prefix_of(&t), complete });
            }
        } else if complete {
            let t = self.end(id).expect("present");
            let total = t.total.unwrap_or(0);
            let mut object = if t.opts.in_order || t.suppressed { Vec::new() } else { t.buf };
            object.truncate(total as usize);
            self.out.push_back(Output::Done { tx: id, total, object, suppressed: t.suppressed, channel: t.opts.channel });
        }
    }

    /// Sends requests while the window has room, round robin over the transactions, paced.
    fn pump(&mut self, now: u64) {
        self.paced = false;
        let noble = self.cfg.noble();
        loop {
            if noble {
                // each transaction's own window (ch. V), unpaced: a reply releases a request
                let Some(id) = self.next_ready(now) else { return };
                self.send_one(now, id);
                continue;
            }
            // the shared window too stays within the receive buffer (the dissertation's cap on a
            // LAN, ch. V "Window Adjustment"): past it, replies overflow the socket's queue
            let rcvbuf_cap = (self.cfg.rcvbuf / self.size.size.max(1)).max(1) as f64;
            if self.in_flight as f64 >= self.ctl.cwnd.floor().min(rcvbuf_cap).max(1.0) {
                return;
            }
            if self.next_send_at > now && self.next_ready_peek(now) {
                self.paced = true;
                return;
            }
            let Some(id) = self.next_ready(now) else { return };
            self.send_one(now, id);
            let pace = self.pace_us();
            if pace > 0 {
                // a late wake-up may catch up by a few requests, not by a burst
                self.next_send_at = self.next_send_at.max(now.saturating_sub(4 * pace)) + pace;
            }
        }
    }

    /// Gap between two requests (ours): the window algorithm's sending period when it sets
    /// one (MTP's own: `window::PACE_*`), else a window per half round trip, so that a window
    /// opened all at once (a new transaction, a burst of answers) does not leave as one burst
    /// whose replies overflow the bottleneck's queue; the window stays the limit. Below 20 µs
    /// (fast paths) requests go unpaced.
    fn pace_us(&self) -> u64 {
        let p = if self.ctl.pkt_snd_period_us > 0.0 {
            self.ctl.pkt_snd_period_us as u64
        } else {
            (self.ft.srtt_us / (2.0 * self.ctl.cwnd.max(1.0))) as u64
        };
        if p < 20 {
            0
        } else {
            p
        }
    }

    fn next_ready_peek(&self, now: u64) -> bool {
        self.txs.values().any(|t| ready(t, now))
    }

    fn next_ready(&mut self, now: u64) -> Option<u32> {
        let ready = |t: &Tx| ready(t, now);
        let after = self.txs.range(self.rr.wrapping_add(1)..).find(|(_, t)| ready(t)).map(|(&k, _)| k);
        let id = after.or_else(|| self.txs.iter().find(|(_, t)| ready(t)).map(|(&k, _)| k))?;
        self.rr = id;
        Some(id)
    }

    fn send_one(&mut self, now: u64, id: u32) {
        let suppressed = self.suppressed.contains(&self.txs[&id].opts.channel);
        let tx = &self.txs[&id];
        let (size, ft) = match &tx.flow {
            // the subrequest fits the window (ch. V, "Mechanisms")
            Some(f) => (f.size.min(f.window.saturating_sub(tx.transit)).max(1) as u32, f.repeat_us),
            None if tx.opts.single => (self.cfg.max_size as u32, self.ft.get_us()),
            None => (self.size.size as u32, self.ft.get_us()),
        };
        // a multi request asks for what the window has room for (ch. V "Mechanisms": the
        // subrequest's extent keeps transit within the window), in datagrams of the flow's size
        let multi = tx.multi && !suppressed;
        let extent = match &tx.flow {
            Some(f) if multi => f.window.saturating_sub(tx.transit).max(1).min(u32::MAX as usize) as u32,
            _ => size,
        };
        let extent = tx.server_limit.map_or(extent, |l| extent.min(l));
        let size = tx.server_limit.map_or(size, |l| size.min(l));
        self.sendno += 1;
        let (sendno, stamp) = (self.sendno, (self.sendno as u32).wrapping_add(self.stamp_base));
        let t = self.txs.get_mut(&id).expect("ready");
        let (s, e) = t.todo.first().expect("ready");
        let len = extent.min(e - s);
        let per = size.min(len).min(u16::MAX as u32);
        t.todo.remove(s, s + len);
        let name: &[u8] = if t.nameless { &[] } else { &t.name };
        let mut h = Header::request(id, t.opts.channel, s, per as u16, name.len() as u16);
        h.stamp = stamp;
        if multi {
            h.total = len;
        }
        if suppressed || t.opts.size_only {
            h.flags = F_NOPAYLOAD;
        }
        let due = now + ft;
        let again = t.asked.covered(s, s + len) > 0;
        t.asked.insert(s, s + len);
        let p = t.pending.entry(s).or_insert(Pending { len, sends: Vec::new(), in_flight: false, sendno, due });
        let repeat = !p.sends.is_empty() || again;
        if repeat {
            self.stats.repeats += 1;
        }
        p.len = len;
        p.sends.push((stamp, now, per, sendno, len));
        p.in_flight = true;
        p.sendno = sendno;
        p.due = due;
        t.in_flight += 1;
        t.transit += len as usize;
        self.in_flight += 1;
        self.by_send.insert(sendno, (id, s));
        self.deadlines.push(Reverse((due, sendno, id, s)));
        self.stats.requests += 1;
        self.out.push_back(Output::Transmit(wire::datagram(&h, name)));
        self.note(now, if repeat { "repeat" } else { "send" }, id, s, len);
        self.cc.on_pkt_sent(&mut self.ctl, sendno as u32);
    }
}

/// Whether a transaction has something to ask for now.
fn ready(t: &Tx, now: u64) -> bool {
    // its own window (the dissertation's), a single datagram's one request
    if t.flow.as_ref().is_some_and(|f| t.transit >= f.window) {
        return false;
    }
    if t.opts.single && t.in_flight > 0 {
        return false;
    }
    !t.finishing
        && !t.todo.is_empty()
        && t.hold_until <= now
        // until its size is known, at most SPECULATE requests for an object that is not streamed
        && (t.total.is_some() || t.in_flight < if t.opts.size_only || t.multi { 1 } else { SPECULATE } || t.opts.in_order)
}

/// Bytes asked for by the requests in flight and not yet here (glossary "transit").
/// A reply's bytes into the object, or the note that the server suppressed the payload;
/// true when bytes were stored.
fn store(t: &mut Tx, h: &Header, body: &[u8]) -> bool {
    if h.flags & F_NOPAYLOAD != 0 {
        t.suppressed = true;
        return false;
    }
    if h.length == 0 {
        return false;
    }
    let end = h.offset + h.length as u32;
    if t.buf.len() < end as usize {
        t.buf.resize(end as usize, 0);
    }
    t.buf[h.offset as usize..end as usize].copy_from_slice(body);
    t.got.insert(h.offset, end);
    true
}

/// A request of `t` sent as `sendno` is no longer in flight (answered, lost or dropped):
/// the transaction's and the client's counts fall and its send number is forgotten.
fn land(t: &mut Tx, flights: &mut u32, by_send: &mut BTreeMap<u64, (u32, u32)>, sendno: u64) {
    t.in_flight -= 1;
    *flights -= 1;
    by_send.remove(&sendno);
}

fn transit_of(t: &Tx) -> usize {
    let total = t.total.unwrap_or(u32::MAX);
    t.pending
        .iter()
        .filter(|(_, p)| p.in_flight)
        .map(|(&k, p)| {
            let e = k.saturating_add(p.len).min(total);
            e.saturating_sub(k).saturating_sub(t.got.covered(k, e)) as usize
        })
        .sum()
}

/// Whether a reply answers part of a `multi` request: the request nearest below its offset
/// that sent its stamp, the offset on a datagram boundary of that send, within its extent, at
/// most one datagram's size, and (as for any reply) agreeing with the total and its end flag.
fn check_part(t: &Tx, h: &Header, body_len: usize) -> Verdict {
    let n = h.length as u32;
    let end = h.offset.saturating_add(n);
    let found = t.pending.range(..=h.offset).rev().take(256).find_map(|(&k, p)| p.sends.iter().find(|s| s.0 == h.stamp).map(|s| (k, *s)));
    let Some((key, (_, at, per, _, extent))) = found else {
        if t.got.covers(h.offset, end.max(h.offset + 1)) {
            return Verdict::Duplicate;
        }
        return if t.total.is_some_and(|tot| h.offset >= tot) { Verdict::Stale } else { Verdict::Forged };
    };
    if h.flags & F_ERROR != 0 {
        return Verdict::Part(key, at);
    }
    let off = h.offset - key;
    let ends = h.flags & F_END != 0;
    let aligned = per > 0 && off % per == 0 && (off < extent || (off == 0 && n == 0));
    if h.flags & F_STREAM != 0 || !aligned || n > per || off + n > extent.max(n) || (n == 0 && !ends) {
        return Verdict::Forged;
    }
    if h.flags & F_NOPAYLOAD == 0 && body_len != n as usize {
        return Verdict::Forged;
    }
    if t.total.is_some_and(|tot| tot != h.total) || ends != (h.offset as u64 + n as u64 >= h.total as u64) {
        return Verdict::Forged;
    }
    if n > 0 && h.flags & F_NOPAYLOAD == 0 && t.got.covers(h.offset, end) {
        return Verdict::Duplicate;
    }
    Verdict::Part(key, at)
}

enum Verdict {
    Accept(u64, u64),
    /// A reply to part of a `multi` request: the request's offset, when that send left.
    Part(u32, u64),
    Duplicate,
    Stale,
    Forged,
}

fn prefix_of(t: &Tx) -> Vec<u8> {
    t.buf[..t.got.prefix() as usize].to_vec()
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

impl Ranges {
    /// Removes every range of `other` from self.
    fn remove_covered(&mut self, other: &Ranges) {
        for (s, e) in other.iter() {
            self.remove(s, e);
        }
    }
}
