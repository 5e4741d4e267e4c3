//! Resize: learns the path MTU by probing and shrinks Fixed Size's segment size to fit it.
//! At the first message from the user it sends probes of several datagram sizes at once (the
//! full size the configured `mss` makes, and the common path MTUs below it, less IPv4 and UDP
//! headers); the peer echoes each probe it gets. The largest echoed size, less the most the
//! composite's attributes can add to a data segment, becomes `mss`. Messages wait (their MSG
//! FROM USER stopped) until the size is known, so no segment is cut too big: when the full
//! size is echoed, or twice the first echo's round trip after it, or at close. Without any
//! echo after three rounds the configured size stays (silence is not a small MTU: the
//! smallest probe would have passed). Probes are KeepAlive segments carrying PMTU.
use crate::attr::{self, PMTU};
use crate::composite::MicroId;
use crate::event::{Arg, Event};
use crate::segment::{self, Kind, Segment};
use crate::session::{Cx, Micro};

/// Common path MTUs (Ethernet, PPPoE, IPv6 tunnels, IPv6's minimum, 1024, IPv4's minimum),
/// as UDP payload sizes.
const MTUS: [usize; 6] = [1500, 1492, 1400, 1280, 1024, 576];
const IP_UDP: usize = 28;
const ECHO: u64 = 0x8000;
const MAX_PROBE: usize = 0x7fff;
const ROUNDS: u32 = 3;
/// Tag on MSG FROM USER raisings made here (high, clear of the flags users set).
const PASS: u64 = 1 << 62;

#[derive(Default)]
pub struct Resize {
    started: bool,
    done: bool,
    rounds: u32,
    sent_at: u64,
    best: Option<usize>,
    full: usize,
    waiting: Vec<(u64, u64)>,
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
    fn probe(&mut self, cx: &mut Cx) {
        let over = overhead(cx);
        self.full = (cx.cfg.mss + over).min(MAX_PROBE);
        let mut sizes = vec![self.full];
        sizes.extend(MTUS.iter().map(|m| m - IP_UDP).filter(|s| *s < self.full && *s > over));
        for size in sizes {
            let mut s = Segment::new(Kind::KeepAlive, cx.shared.conn);
            s.attrs.set(PMTU, size as u64);
            s.payload = vec![0; size.saturating_sub(s.encoded_len() + later_attrs(cx))].into();
            cx.send_control(s);
        }
        self.rounds += 1;
        self.sent_at = cx.now;
        let wait = cx.cfg.init_rto_us;
        cx.timer(MicroId::Resize, wait, self.rounds as u64);
    }

    fn finish(&mut self, cx: &mut Cx) {
        if self.done {
            return;
        }
        self.done = true;
        if let Some(b) = self.best {
            cx.cfg.mss = b.saturating_sub(overhead(cx)).clamp(1, cx.cfg.mss);
        }
        for (key, tag) in std::mem::take(&mut self.waiting) {
            cx.raise(Event::MsgFromUser, Arg { msg: key, tag: tag | PASS, ..Arg::default() });
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
                    self.probe(cx);
                }
            }
            Event::SegmentFromNet => {
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
                if self.done || size > self.full {
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
            Event::CloseSession => self.finish(cx),
            Event::Timer(_) if !self.done => {
                if self.best.is_some() || self.rounds >= ROUNDS {
                    self.finish(cx);
                } else if arg.tag == self.rounds as u64 {
                    self.probe(cx);
                }
            }
            _ => {}
        }
    }
}
