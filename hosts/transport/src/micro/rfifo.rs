//! Reliable FIFO: delivers data segments exactly once and in sequence order; early ones wait
//! in a buffer (holding their deallocate barrier) until the gap before them is filled.
use std::collections::BTreeMap;

use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, SegId};
use crate::session::{Cx, Micro};

#[derive(Default)]
pub struct ReliableFifo {
    expected: u32,
    buffer: BTreeMap<u32, SegId>,
}

impl Micro for ReliableFifo {
    fn id(&self) -> MicroId {
        MicroId::ReliableFifo
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentFromNet, 60)]
    }

    fn handle(&mut self, _ev: Event, arg: &Arg, cx: &mut Cx) {
        let Some((id, q)) = super::take_data(arg, cx) else {
            return;
        };
        if q < self.expected || self.buffer.contains_key(&q) {
            cx.stats.duplicates += 1;
            return;
        }
        if q > self.expected {
            if self.buffer.len() >= cx.cfg.recv_wnd_segs as usize {
                return; // beyond what we advertised: the sender will resend it
            }
            cx.hold(id, Barrier::Dealloc);
            self.buffer.insert(q, id);
        } else {
            cx.raise(Event::SegmentReceived, Arg::seg(id));
            self.expected += 1;
            while let Some(b) = self.buffer.remove(&self.expected) {
                cx.raise(Event::SegmentReceived, Arg::seg(b));
                cx.release(b, Barrier::Dealloc);
                self.expected += 1;
            }
        }
        cx.shared.rcv_buffered = self.buffer.len() as u32;
    }
}
