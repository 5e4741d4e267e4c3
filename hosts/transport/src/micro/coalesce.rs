//! Coalesce: small user messages are packed into one data segment of up to `mss` payload
//! bytes (each as a 2-byte length and the bytes) instead of a segment each. A packed segment
//! leaves when the next message would not fit, `DELAY_US` after its first message, before a
//! message too big to pack or an urgent one (order is kept), or at close. It carries no FRAG:
//! the receiver knows it by that, unpacks it ahead of Fixed Size, and delivers each message.
use crate::attr::FRAG;
use crate::composite::MicroId;
use crate::event::{Arg, Event, TimerId};
use crate::segment::{Kind, Segment};
use crate::session::{Cx, Micro};

use super::oob::URGENT;

/// How long the first message of a packed segment waits for company.
pub const DELAY_US: u64 = 1_000;

#[derive(Default)]
pub struct Coalesce {
    packed: Vec<u8>,
    timer: Option<TimerId>,
}

impl Coalesce {
    fn flush(&mut self, cx: &mut Cx) {
        if let Some(t) = self.timer.take() {
            cx.cancel(t);
        }
        if self.packed.is_empty() {
            return;
        }
        let mut seg = Segment::new(Kind::Data, cx.shared.conn);
        seg.payload = std::mem::take(&mut self.packed).into();
        let id = cx.new_data(seg);
        cx.raise(Event::SegmentFromUser, Arg::seg(id));
    }

    /// The messages of a packed payload, or None when the lengths do not add up.
    pub fn unpack(mut b: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        while !b.is_empty() {
            let n = u16::from_be_bytes([*b.first()?, *b.get(1)?]) as usize;
            out.push(b.get(2..2 + n)?.to_vec());
            b = &b[2 + n..];
        }
        Some(out)
    }
}

impl Micro for Coalesce {
    fn id(&self) -> MicroId {
        MicroId::Coalesce
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::MsgFromUser, 30), (Event::CloseSession, 10), (Event::SegmentReceived, 45)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::MsgFromUser => {
                let mss = cx.cfg.mss;
                let Some(len) = cx.user_msg(arg.msg).map(<[u8]>::len) else { return };
                if arg.tag & URGENT != 0 || len + 2 > mss || len > u16::MAX as usize {
                    return self.flush(cx); // goes through Fixed Size, after what was packed
                }
                if self.packed.len() + 2 + len > mss {
                    self.flush(cx);
                }
                let m = cx.take_user_msg(arg.msg).expect("looked at above");
                self.packed.extend_from_slice(&(len as u16).to_be_bytes());
                self.packed.extend_from_slice(&m);
                cx.stop();
                if self.timer.is_none() {
                    self.timer = Some(cx.timer(MicroId::Coalesce, DELAY_US, 0));
                }
            }
            Event::CloseSession => self.flush(cx),
            Event::Timer(_) => {
                self.timer = None;
                self.flush(cx);
            }
            Event::SegmentReceived => {
                let Some(id) = arg.seg else { return };
                let Some(seg) = cx.seg_mut(id).filter(|s| s.attrs.get(FRAG).is_none()) else { return };
                let payload = std::mem::take(&mut seg.payload);
                cx.stop();
                match Coalesce::unpack(&payload) {
                    Some(msgs) => msgs.into_iter().for_each(|m| cx.deliver_msg(m)),
                    None => cx.stats.malformed += 1,
                }
            }
            _ => {}
        }
    }
}
