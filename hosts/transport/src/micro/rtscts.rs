//! RTS/CTS: receiver-driven flow control by asking first. The sender holds its data segments
//! and sends RTS (request to send: a serial number and how many segments wait); the receiver
//! answers CTS with the same serial and a grant: how many it can take now, the room between
//! the application's unread backlog (`Session::set_backlog`) and `Config::recv_wnd_segs`. The
//! sender lets that many go and asks again. An unanswered RTS is repeated after the RTO; a
//! grant of 0 is asked again after a retransmission period (the receiver is full).
use std::collections::VecDeque;

use crate::attr::RTSCTS;
use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, SegId, TimerId};
use crate::segment::{Kind, Segment};
use crate::session::{Cx, Micro};

const RTS: u64 = 1;
const CTS: u64 = 2;

/// RTSCTS value: type (1 byte), serial (2), count (2).
fn pack(kind: u64, serial: u16, count: u16) -> u64 {
    kind << 32 | (serial as u64) << 16 | count as u64
}

#[derive(Default)]
pub struct RtsCts {
    held: VecDeque<SegId>,
    /// Segments granted and not yet let go.
    credit: u32,
    serial: u16,
    asking: Option<TimerId>,
}

impl RtsCts {
    fn send(cx: &mut Cx, v: u64) {
        let mut s = Segment::new(Kind::Ack, cx.shared.conn);
        s.attrs.set(RTSCTS, v);
        cx.send_control(s);
    }

    /// Let go what the credit allows; ask for more when segments are left waiting.
    fn flow(&mut self, cx: &mut Cx) {
        while self.credit > 0 {
            let Some(id) = self.held.pop_front() else { break };
            self.credit -= 1;
            cx.release(id, Barrier::Send);
        }
        if !self.held.is_empty() && self.asking.is_none() {
            self.ask(cx, 0);
        }
    }

    fn ask(&mut self, cx: &mut Cx, wait: u64) {
        if wait > 0 {
            self.asking = Some(cx.timer(MicroId::RtsCts, wait, 0));
            return;
        }
        self.serial = self.serial.wrapping_add(1);
        let want = self.held.len().min(u16::MAX as usize) as u16;
        RtsCts::send(cx, pack(RTS, self.serial, want));
        let rto = cx.shared.rto();
        self.asking = Some(cx.timer(MicroId::RtsCts, rto, 0));
    }
}

impl Micro for RtsCts {
    fn id(&self) -> MicroId {
        MicroId::RtsCts
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentToNet, 45), (Event::SegmentFromNet, 50)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::SegmentToNet => {
                let Some(id) = arg.seg.filter(|id| cx.is_data(*id)) else { return };
                cx.hold(id, Barrier::Send);
                self.held.push_back(id);
                self.flow(cx);
            }
            Event::SegmentFromNet => {
                let Some(id) = arg.seg else { return };
                let Some(v) = cx.seg(id).and_then(|s| s.attrs.get(RTSCTS)) else { return };
                cx.consume(id);
                let (kind, serial, count) = (v >> 32, (v >> 16) as u16, v as u16);
                match kind {
                    RTS => {
                        let room = (cx.cfg.recv_wnd_segs as usize).saturating_sub(cx.shared.app_backlog);
                        let grant = room.min(count as usize) as u16;
                        RtsCts::send(cx, pack(CTS, serial, grant));
                    }
                    CTS if serial == self.serial && self.asking.is_some() => {
                        cx.cancel(self.asking.take().unwrap());
                        self.credit = count as u32;
                        if count == 0 {
                            let wait = cx.shared.rto();
                            self.ask(cx, wait);
                        }
                        self.flow(cx);
                    }
                    CTS => {} // an answer to an RTS already answered or given up on
                    _ => cx.stats.malformed += 1,
                }
            }
            Event::Timer(_) => {
                self.asking = None;
                if !self.held.is_empty() {
                    self.ask(cx, 0);
                }
            }
            _ => {}
        }
    }
}
