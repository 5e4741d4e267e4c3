//! Sequenced Segments: numbers every data segment (SEQ), in the order the user sent them.
use crate::attr::SEQ;
use crate::composite::MicroId;
use crate::event::{Arg, Event};
use crate::session::{Cx, Micro};

pub struct SequencedSegments;

impl Micro for SequencedSegments {
    fn id(&self) -> MicroId {
        MicroId::SequencedSegments
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentFromUser, 10)]
    }

    fn handle(&mut self, _ev: Event, arg: &Arg, cx: &mut Cx) {
        let Some(id) = arg.seg else { return };
        let seq = cx.shared.snd_next;
        if let Some(seg) = cx.seg_mut(id) {
            seg.attrs.set(SEQ, seq as u64);
            cx.shared.snd_next = seq.wrapping_add(1);
        }
    }
}
