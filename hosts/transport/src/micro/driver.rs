//! Transport Driver: the edge of the stack. Encodes segments for the wire, hands reassembled
//! messages to the user, delivers unordered when no ordering microprotocol took a segment,
//! reports refusals, and closes the session once everything sent is done.
use crate::attr;
use crate::composite::MicroId;
use crate::event::{Arg, Event};
use crate::segment::{Kind, Segment};
use crate::session::{Cx, Micro, Output};

const CLOSE_TRIES: u32 = 5;

#[derive(Default)]
pub struct TransportDriver {
    close_sent: bool,
    close_tries: u32,
}

impl TransportDriver {
    fn finish(cx: &mut Cx, why: &str) {
        if !cx.shared.closed {
            cx.shared.closed = true;
            cx.output(Output::Closed(why.into()));
        }
    }

    fn send_close(&mut self, cx: &mut Cx) {
        let conn = cx.shared.conn;
        cx.send_control(Segment::new(Kind::Close, conn));
        self.close_tries += 1;
        if cx.composite.has(MicroId::VirtualCircuit) {
            let rto = cx.shared.rto();
            cx.timer(MicroId::TransportDriver, rto << self.close_tries.min(6), 0);
        } else {
            TransportDriver::finish(cx, "closed");
        }
    }

    fn maybe_close(&mut self, cx: &mut Cx) {
        if cx.shared.closing && !self.close_sent && cx.data_segments() == 0 {
            self.close_sent = true;
            self.send_close(cx);
        }
    }
}

impl Micro for TransportDriver {
    fn id(&self) -> MicroId {
        MicroId::TransportDriver
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[
            (Event::OpenSession, 100),
            (Event::SendSegment, 100),
            (Event::SegmentFromNet, 100),
            (Event::MsgFromNet, 100),
            (Event::CloseSession, 100),
            (Event::SegmentDone, 90),
        ]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::OpenSession if !cx.composite.has(MicroId::VirtualCircuit) => {
                cx.shared.established = true;
                cx.output(Output::Opened);
            }
            Event::SendSegment => {
                let Some(id) = arg.seg else { return };
                let announce = cx.shared.announce.then_some(cx.composite.bits() as u64);
                let Some(seg) = cx.seg_mut(id) else { return };
                if let Some(bits) = announce {
                    seg.attrs.set(attr::COMPOSITE, bits);
                }
                let mut wire = cx.wire_buf();
                let seg = cx.seg(id).expect("just looked up");
                cx.encode(seg, &mut wire);
                cx.stats.segs_sent += 1;
                cx.stats.bytes_sent += wire.len() as u64;
                cx.shared.last_send_us = cx.now;
                cx.output(Output::Transmit(wire));
            }
            Event::SegmentFromNet => {
                let Some(id) = arg.seg else { return };
                let Some(kind) = cx.seg(id).map(|s| s.kind) else { return };
                if kind != Kind::Refuse {
                    cx.shared.announce = false; // the peer has a session: it got the composite
                }
                if cx.consumed(id) {
                    return;
                }
                match kind {
                    Kind::Data => cx.raise(Event::SegmentReceived, Arg::seg(id)),
                    Kind::Refuse => {
                        let why = String::from_utf8_lossy(&cx.seg(id).unwrap().payload).into_owned();
                        cx.shared.closed = true;
                        cx.output(Output::Refused(why));
                    }
                    Kind::Close => {
                        let conn = cx.shared.conn;
                        cx.send_control(Segment::new(Kind::CloseAck, conn));
                        TransportDriver::finish(cx, "peer closed");
                    }
                    Kind::CloseAck if self.close_sent => TransportDriver::finish(cx, "closed"),
                    _ => {}
                }
            }
            Event::MsgFromNet => {
                if let Some(m) = cx.take_net_msg(arg.msg) {
                    cx.stats.msgs_delivered += 1;
                    cx.output(Output::Deliver(m));
                }
            }
            Event::CloseSession | Event::SegmentDone => self.maybe_close(cx),
            Event::Timer(_) => {
                if self.close_tries >= CLOSE_TRIES {
                    TransportDriver::finish(cx, "closed: peer did not acknowledge the close");
                } else {
                    self.send_close(cx);
                }
            }
            _ => {}
        }
    }
}
