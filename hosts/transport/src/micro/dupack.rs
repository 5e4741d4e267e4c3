//! Duplicate ACK: the third duplicate acknowledgement starts a recovery: every unacknowledged
//! segment below the highest selectively acknowledged one (at least the oldest) is declared
//! lost (SEGMENT LOST). During recovery each ACK declares lost the holes below the highest
//! selective ack not declared yet, and a partial ACK the hole it stops at (NewReno); recovery
//! ends when everything sent before it began is acknowledged.
use std::collections::HashSet;

use crate::attr::ACK;
use crate::composite::MicroId;
use crate::event::{Arg, Event};
use crate::session::{Cx, Micro};

pub const DUP_THRESHOLD: u32 = 3;

#[derive(Default)]
pub struct DuplicateAck {
    dups: u32,
    marked: HashSet<u32>,
}

impl DuplicateAck {
    fn declare(&mut self, cx: &mut Cx, seqs: Vec<u32>) {
        let seqs: Vec<u32> = seqs.into_iter().filter(|q| self.marked.insert(*q)).collect();
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for q in &seqs {
            match ranges.last_mut() {
                Some(r) if r.1 + 1 == *q => r.1 = *q,
                _ => ranges.push((*q, *q)),
            }
        }
        cx.shared.loss_ranges = ranges;
        for q in seqs {
            if let Some(id) = cx.shared.unacked.get(&q).copied() {
                cx.raise(Event::SegmentLost, Arg::seg(id));
            }
        }
    }
}

impl Micro for DuplicateAck {
    fn id(&self) -> MicroId {
        MicroId::DuplicateAck
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentFromNet, 35), (Event::SegmentTimeout, 30)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        if ev == Event::SegmentTimeout {
            self.dups = 0;
            self.marked.clear();
            return;
        }
        let Some(seg) = arg.seg.and_then(|id| cx.seg(id)) else { return };
        if seg.attrs.get(ACK).is_none() {
            return;
        }
        let s = &mut cx.shared;
        if s.ack_advanced {
            self.dups = 0;
            if s.in_recovery {
                if s.snd_una >= s.recover {
                    s.in_recovery = false;
                    self.marked.clear();
                } else {
                    // the partial ack's hole, and any newly seen below a selective ack
                    let top = s.highest_sacked.unwrap_or(s.snd_una).max(s.snd_una + 1);
                    let lost = s.unacked.range(..top).map(|(q, _)| *q).collect();
                    self.declare(cx, lost);
                }
            }
        } else if s.ack_duplicate && s.in_recovery {
            let top = s.highest_sacked.unwrap_or(s.snd_una);
            let lost = s.unacked.range(..top).map(|(q, _)| *q).collect();
            self.declare(cx, lost);
        } else if s.ack_duplicate {
            self.dups += 1;
            if self.dups == DUP_THRESHOLD && !s.in_recovery {
                s.in_recovery = true;
                s.recover = s.snd_max;
                let top = s.highest_sacked.unwrap_or(s.snd_una).max(s.snd_una + 1);
                let lost = s.unacked.range(..top).map(|(q, _)| *q).collect();
                self.declare(cx, lost);
            }
        }
    }
}
