//! Lossy FIFO: delivers data segments in sequence order at once, dropping any that arrive
//! after a later one was delivered.
use crate::composite::MicroId;
use crate::event::{Arg, Event};
use crate::session::{Cx, Micro};

#[derive(Default)]
pub struct LossyFifo {
    next: u32,
}

impl Micro for LossyFifo {
    fn id(&self) -> MicroId {
        MicroId::LossyFifo
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentFromNet, 60)]
    }

    fn handle(&mut self, _ev: Event, arg: &Arg, cx: &mut Cx) {
        let Some((id, q)) = super::take_data(arg, cx) else {
            return;
        };
        if q < self.next {
            cx.stats.late += 1;
            return;
        }
        self.next = q + 1;
        cx.raise(Event::SegmentReceived, Arg::seg(id));
    }
}
