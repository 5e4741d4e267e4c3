//! Resize: learns the path MTU by probing and shrinks Fixed Size's segment size to fit it.
//! At the first message from the user it sends probes of several datagram sizes at once (the
//! full size the configured `mss` makes, and the common path MTUs below it, less IPv4 and UDP
//! headers); the peer echoes each probe it gets. The largest echoed size, less the most the
//! composite's attributes can add to a data segment, becomes `mss`. Messages wait (their MSG
//! FROM USER stopped) until the size is known, so no segment is cut too big: when the full
//! size is echoed, or twice the first echo's round trip after it; a close meanwhile waits
//! too (stopped, and raised again after the messages). Without any
//! echo after three rounds the configured size stays (silence is not a small MTU: the
//! smallest probe would have passed); rounds count from when the peer was first heard from
//! (a server not up yet loses them all), at most twelve in all. Probes are KeepAlive segments
//! carrying PMTU.
//!
//! Once settled below the full size, it probes again every `pmtu_raise_us` (RFC 8899's raise
//! timer) with the sizes above the settled one, one round each time; any echo larger than the
//! settled size raises `mss` for the messages cut from then on (segments already cut keep
//! theirs). The probes only mean something when the datagrams carry DF: the UDP driver sets
//! it (`IP_PMTUDISC_PROBE`) on sockets whose composite has Resize.
use crate::attr::{self, PMTU};
use crate::composite::MicroId;
use crate::event::{Arg, Event, TimerId};
use crate::segment::{self, Kind, Segment};
use crate::session::{Cx, Micro};

/// Common path MTUs (Ethernet, PPPoE, IPv6 tunnels, IPv6's minimum, 1024, IPv4's minimum),
/// as UDP payload sizes.
const MTUS: [usize; 6] = [1500, 1492, 1400, 1280, 1024, 576];
const IP_UDP: usize = 28;
const ECHO: u64 = 0x8000;
const MAX_PROBE: usize = 0x7fff;
const ROUNDS: u32 = 3;
/// Rounds before giving up on a peer never heard from (one whose server is not up yet loses
/// the first rounds whole, and its silence says nothing about the path).
const MAX_ROUNDS: u32 = 12;
/// Tag on MSG FROM USER raisings made here (high, clear of the flags users set).
const PASS: u64 = 1 << 62;
/// Timer tags: time to probe for a larger size, and the end of that probe round (the
/// first rounds' timers carry the round number, the wait after the first echo 0).
const RAISE: u64 = 1 << 40;
const RAISE_END: u64 = 1 << 41;

/// How long a round of probes waits for echoes before the next (at least; 2 SRTT once known).
/// It was the initial RTO when that was 300 ms; the RTO is now RFC 6298's 1 s.
const PROBE_WAIT_US: u64 = 300_000;

#[derive(Default)]

pub struct Resize {
    started: bool,
    done: bool,
    rounds: u32,
    /// Rounds without an echo after the peer had been heard from.
    silent: u32,
    heard: bool,
    sent_at: u64,
    best: Option<usize>,
    full: usize,
    /// `mss` as configured: the most any echo can raise it to.
    max_mss: usize,
    waiting: Vec<(u64, u64)>,
    /// A close that came while messages waited: raised again after them.
    close_waits: bool,
    /// The pending raise timer, withdrawn at close.
    raise: Option<TimerId>,
}

/// The most a data segment of this composite carries besides its payload.
pub fn overhead(cx: &Cx) -> usize {
    let attrs: usize = attr::DECLS
        .iter()
        .filter(|d| d.id != PMTU && (d.owner == MicroId::TransportDriver || cx.composite.has(d.owner)))
        .map(|d| 2 + d.len as usize)
        .sum();
    segment::HEADER + attrs
}

/// What other microprotocols add to a control segment on its way out (at SEND SEGMENT), so a
/// probe leaves at exactly its size.
fn later_attrs(cx: &Cx) -> usize {
    let mut ids = vec![];
    if cx.composite.has(MicroId::RttEstimation) {
        ids.push(attr::TS);
    }
    if cx.composite.has(MicroId::WindowedFlow) {
        ids.push(attr::WND);
    }
    if cx.shared.announce {
        ids.push(attr::COMPOSITE);
    }
    ids.iter().filter_map(|i| attr::decl(*i)).map(|d| 2 + d.len as usize).sum()
}

impl Resize {
    /// Sends one probe of each size in `sizes`.
    fn send_probes(&self, cx: &mut Cx, sizes: &[usize]) {
        for &size in sizes {
            let mut s = Segment::new(Kind::KeepAlive, cx.shared.conn);
            s.attrs.set(PMTU, size as u64);
            s.payload = vec![0; size.saturating_sub(s.encoded_len() + later_attrs(cx))].into();
            cx.send_control(s);
        }
    }

    /// The full size and the common sizes between `above` and it, largest first.
    fn sizes_above(&self, above: usize) -> Vec<usize> {
        let mut sizes = vec![self.full];
        sizes.extend(MTUS.iter().map(|m| m - IP_UDP).filter(|s| *s < self.full && *s > above));
        sizes
    }

    fn probe(&mut self, cx: &mut Cx) {
        let over = overhead(cx);
        let sizes = self.sizes_above(over);
        self.send_probes(cx, &sizes);
        self.rounds += 1;
        self.sent_at = cx.now;
        let wait = PROBE_WAIT_US;
        cx.timer(MicroId::Resize, wait, self.rounds as u64);
    }

    /// Takes an echoed size as the path's, raising or setting `mss`.
    fn settle(&mut self, size: usize, cx: &mut Cx) {
        self.best = Some(size);
        cx.cfg.mss = size.saturating_sub(overhead(cx)).clamp(1, self.max_mss);
    }

    /// Below the full size and not closing: probe upward after the raise timer.
    fn arm_raise(&mut self, cx: &mut Cx) {
        if self.best.is_some_and(|b| b < self.full) && !cx.shared.closing && !cx.shared.closed {
            self.raise = Some(cx.timer(MicroId::Resize, cx.cfg.pmtu_raise_us, RAISE));
        }
    }

    fn finish(&mut self, cx: &mut Cx) {
        if self.done {
            return;
        }
        self.done = true;
        if let Some(b) = self.best {
            self.settle(b, cx);
        }
        self.arm_raise(cx);
        for (key, tag) in std::mem::take(&mut self.waiting) {
            cx.raise(Event::MsgFromUser, Arg { msg: key, tag: tag | PASS, ..Arg::default() });
        }
        if std::mem::take(&mut self.close_waits) {
            cx.raise(Event::CloseSession, Arg::default());
        }
    }
}

impl Micro for Resize {
    fn id(&self) -> MicroId {
        MicroId::Resize
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::MsgFromUser, 20), (Event::SegmentFromNet, 7), (Event::CloseSession, 5)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::MsgFromUser if !self.done && arg.tag & PASS == 0 => {
                cx.stop();
                self.waiting.push((arg.msg, arg.tag));
                if !self.started {
                    self.started = true;
                    self.max_mss = cx.cfg.mss;
                    self.full = (cx.cfg.mss + overhead(cx)).min(MAX_PROBE);
                    self.probe(cx);
                }
            }
            Event::SegmentFromNet => {
                self.heard = true;
                let Some(id) = arg.seg else { return };
                let Some(v) = cx.seg(id).and_then(|s| s.attrs.get(PMTU)) else { return };
                cx.consume(id);
                let size = (v & !ECHO) as usize;
                if v & ECHO == 0 {
                    let mut e = Segment::new(Kind::KeepAlive, cx.shared.conn);
                    e.attrs.set(PMTU, v | ECHO);
                    cx.send_control(e);
                    return;
                }
                if size > self.full {
                    return;
                }
                if self.done {
                    // a raise probe's echo (or a late one of the first rounds)
                    if self.best.is_some_and(|b| size > b) {
                        self.settle(size, cx);
                    }
                    return;
                }
                if self.best.is_none() {
                    // the larger probes left at the same time: wait two of this round trip
                    let rtt = cx.now.saturating_sub(self.sent_at).max(1);
                    cx.timer(MicroId::Resize, 2 * rtt, 0);
                }
                self.best = Some(self.best.map_or(size, |b| b.max(size)));
                if size == self.full {
                    self.finish(cx);
                }
            }
            Event::CloseSession if self.started && !self.done => {
                // messages are waiting for the size: the close follows them (see `finish`)
                cx.stop();
                self.close_waits = true;
            }
            Event::CloseSession => {
                self.finish(cx);
                if let Some(t) = self.raise.take() {
                    cx.cancel(t);
                }
            }
            Event::Timer(_) if arg.tag == RAISE => {
                self.raise = None;
                let sizes = self.sizes_above(self.best.unwrap_or(self.full));
                self.send_probes(cx, &sizes);
                let wait = PROBE_WAIT_US.max(2 * cx.shared.srtt_us as u64);
                cx.timer(MicroId::Resize, wait, RAISE_END);
            }
            Event::Timer(_) if arg.tag == RAISE_END => self.arm_raise(cx),
            Event::Timer(_) if !self.done => {
                if self.best.is_some() {
                    self.finish(cx);
                } else if arg.tag == self.rounds as u64 {
                    // a round counts as unanswered only once the peer is known to be there
                    if self.heard {
                        self.silent += 1;
                    }
                    if self.silent >= ROUNDS || self.rounds >= MAX_ROUNDS {
                        self.finish(cx);
                    } else {
                        self.probe(cx);
                    }
                }
            }
            _ => {}
        }
    }
}
