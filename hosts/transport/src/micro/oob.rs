//! Out of Band: a message sent with `Session::send_tagged(msg, URGENT, now)` has its segments
//! flagged (URG), and the receiver hands them to Fixed Size the moment they arrive, ahead of
//! whatever the FIFO is still waiting for. The segments keep their sequence numbers, so they
//! are acknowledged and resent like any other; when the FIFO reaches one in order it is
//! dropped there instead of being delivered twice.
use std::collections::BTreeSet;

use crate::attr::{SEQ, URG};
use crate::composite::MicroId;
use crate::event::{Arg, Event};
use crate::segment::Kind;
use crate::session::{Cx, Micro};

/// The flag `Session::send_tagged` takes for an urgent message.
pub const URGENT: u64 = 1;
/// Tag on the early SEGMENT RECEIVED raised here.
const EARLY: u64 = 0x0B_0000_0000;
/// Urgent sequence numbers remembered, to tell resent copies from new ones.
const REMEMBER: usize = 4096;

#[derive(Default)]
pub struct OutOfBand {
    /// Between the two MSG FROM USER handlers of an urgent message: its segments are made now.
    marking: bool,
    early: BTreeSet<u32>,
}

impl Micro for OutOfBand {
    fn id(&self) -> MicroId {
        MicroId::OutOfBand
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        // MSG FROM USER twice: before Fixed Size cuts the message (start marking) and after
        &[
            (Event::MsgFromUser, 40),
            (Event::MsgFromUser, 60),
            (Event::SegmentFromUser, 5),
            (Event::SegmentFromNet, 55),
            (Event::SegmentReceived, 45),
        ]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::MsgFromUser if arg.tag & URGENT != 0 => self.marking = !self.marking,
            Event::SegmentFromUser if self.marking => {
                if let Some(s) = arg.seg.and_then(|id| cx.seg_mut(id)) {
                    s.attrs.set(URG, 1);
                }
            }
            Event::SegmentFromNet => {
                let Some(id) = arg.seg else { return };
                let Some(s) = cx.seg(id).filter(|s| s.kind == Kind::Data) else { return };
                let (Some(_), Some(q)) = (s.attrs.get(URG), s.attrs.get(SEQ)) else { return };
                if !self.early.insert(q as u32) {
                    return; // a resent copy: the FIFO counts it as a duplicate or drops it below
                }
                if self.early.len() > REMEMBER {
                    self.early.pop_first();
                }
                cx.consume(id); // so the Transport Driver does not deliver it again
                cx.raise(Event::SegmentReceived, Arg { seg: Some(id), msg: 0, tag: EARLY });
            }
            Event::SegmentReceived if arg.tag != EARLY => {
                let urgent = arg.seg.and_then(|id| cx.seg(id)).is_some_and(|s| s.attrs.get(URG).is_some());
                if urgent {
                    cx.stop(); // handed over early already
                }
            }
            _ => {}
        }
    }
}
