//! Virtual Circuit: an open handshake (Open with the composite and a random ISN, Accept with
//! the other random ISN), retried until answered; data waits behind the send barrier until
//! the circuit is up. An Accept answering the only Open sent is the first RTT sample (Karn's
//! rule, RFC 6298 §3: not after a retry), so the first data segment waits for an RTO made from
//! the path and not from the initial guess, which is below the RTT of a 413 ms path.
use crate::attr::{COMPOSITE, ISN};
use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, SegId};
use crate::segment::{Kind, Segment};
use crate::session::{Cx, Micro, Output};

const OPEN_TRIES: u32 = 8;

#[derive(Default)]
pub struct VirtualCircuit {
    held: Vec<SegId>,
    tries: u32,
    open_sent_us: u64,
}

impl VirtualCircuit {
    fn send_open(&mut self, cx: &mut Cx) {
        let mut s = Segment::new(Kind::Open, cx.shared.conn);
        s.attrs.set(COMPOSITE, cx.composite.bits() as u64);
        s.attrs.set(ISN, cx.shared.isn_local as u64);
        cx.send_control(s);
        self.open_sent_us = cx.now;
        let wait = cx.cfg.init_rto_us << self.tries.min(6);
        cx.timer(MicroId::VirtualCircuit, wait, 0);
        self.tries += 1;
    }
}

impl Micro for VirtualCircuit {
    fn id(&self) -> MicroId {
        MicroId::VirtualCircuit
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::OpenSession, 10), (Event::SegmentFromNet, 8), (Event::SegmentToNet, 10)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::OpenSession => {
                cx.shared.isn_local = cx.rand_u32();
                if cx.shared.client {
                    self.send_open(cx);
                }
            }
            Event::SegmentToNet => {
                let Some(id) = arg.seg else { return };
                if !cx.shared.established && cx.is_data(id) {
                    cx.hold(id, Barrier::Send);
                    self.held.push(id);
                }
            }
            Event::SegmentFromNet => {
                let Some(id) = arg.seg else { return };
                let Some(seg) = cx.seg(id) else { return };
                let (kind, isn) = (seg.kind, seg.attrs.get(ISN));
                match (kind, cx.shared.client) {
                    (Kind::Open, false) => {
                        cx.consume(id);
                        let Some(isn) = isn else { return cx.stats.malformed += 1 };
                        cx.shared.isn_peer = isn as u32;
                        let mut a = Segment::new(Kind::Accept, cx.shared.conn);
                        a.attrs.set(ISN, cx.shared.isn_local as u64);
                        cx.send_control(a); // again for a repeated Open: our Accept was lost
                        if !cx.shared.established {
                            cx.shared.established = true;
                            cx.output(Output::Opened);
                        }
                    }
                    (Kind::Accept, true) => {
                        cx.consume(id);
                        if cx.shared.established {
                            return;
                        }
                        let Some(isn) = isn else { return cx.stats.malformed += 1 };
                        cx.shared.isn_peer = isn as u32;
                        cx.shared.established = true;
                        if self.tries == 1 && cx.shared.srtt_us == 0.0 {
                            crate::micro::rtt::sample(cx, cx.now.saturating_sub(self.open_sent_us).max(1) as f64);
                        }
                        cx.output(Output::Opened);
                        for h in std::mem::take(&mut self.held) {
                            cx.release(h, Barrier::Send);
                        }
                    }
                    _ if !cx.shared.established => {
                        cx.consume(id); // nothing but the handshake before the circuit is up
                        cx.stats.foreign += 1;
                    }
                    _ => {}
                }
            }
            Event::Timer(_) => {
                if cx.shared.established {
                    return;
                }
                if self.tries >= OPEN_TRIES {
                    cx.shared.closed = true;
                    cx.output(Output::Closed("open timed out: no answer from the peer".into()));
                } else {
                    self.send_open(cx);
                }
            }
            _ => {}
        }
    }
}
