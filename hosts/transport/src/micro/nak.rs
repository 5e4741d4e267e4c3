//! Negative ACK. Receiver: notes the gaps in the sequence numbers it has seen and reports
//! each new one at once in a NAK (first missing, count), then again every retransmission
//! period while it stays open. Sender: resends the reported segments it still holds
//! (SEGMENT LOST, which Retransmit acts on) without waiting for duplicate ACKs or a timeout;
//! the congestion controller sees them as lost too. A segment is resent on a NAK at most
//! once per round trip, so the repeats do not multiply resends.
use std::collections::{BTreeSet, HashMap};

use crate::attr::{NAK, SEQ};
use crate::composite::MicroId;
use crate::event::{Arg, Event, TimerId};
use crate::segment::{Kind, Segment};
use crate::session::{Cx, Micro};

/// Missing segments tracked at once; a longer outage is left to the sender's timeout.
const MAX_MISSING: usize = 4096;
/// Ranges reported per repeat, and segments resent per NAK.
const RANGES_PER_REPEAT: usize = 8;
const MAX_PER_NAK: u32 = 256;

#[derive(Default)]
pub struct NegativeAck {
    // receiver
    next: u32,
    missing: BTreeSet<u32>,
    repeat: Option<TimerId>,
    // sender
    resent_at: HashMap<u32, u64>,
}

impl NegativeAck {
    fn period(cx: &Cx) -> u64 {
        (cx.shared.srtt_us as u64).max(cx.cfg.min_rto_us)
    }

    /// Sequence numbers go on the wire absolute, as SEQ does.
    fn send_nak(cx: &mut Cx, first: u32, count: u32) {
        let mut s = Segment::new(Kind::Ack, cx.shared.conn);
        let abs = first.wrapping_add(cx.shared.isn_peer);
        s.attrs.set(NAK, (abs as u64) << 32 | count as u64);
        cx.send_control(s);
    }

    fn on_data(&mut self, cx: &mut Cx, q: u32) {
        if q >= self.next {
            if q > self.next {
                let from = self.next.max(q.saturating_sub(MAX_MISSING as u32));
                for m in from..q {
                    if self.missing.len() < MAX_MISSING {
                        self.missing.insert(m);
                    }
                }
                NegativeAck::send_nak(cx, from, q - from);
            }
            self.next = q + 1;
        } else {
            self.missing.remove(&q);
        }
        if !self.missing.is_empty() && self.repeat.is_none() {
            let p = NegativeAck::period(cx);
            self.repeat = Some(cx.timer(MicroId::NegativeAck, p, 0));
        }
    }

    fn repeat(&mut self, cx: &mut Cx) {
        self.repeat = None;
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for q in &self.missing {
            match ranges.last_mut() {
                Some(r) if r.0 + r.1 == *q => r.1 += 1,
                _ => {
                    if ranges.len() == RANGES_PER_REPEAT {
                        break;
                    }
                    ranges.push((*q, 1));
                }
            }
        }
        for (first, count) in ranges {
            NegativeAck::send_nak(cx, first, count);
        }
        if !self.missing.is_empty() {
            let p = NegativeAck::period(cx);
            self.repeat = Some(cx.timer(MicroId::NegativeAck, p, 0));
        }
    }

    fn on_nak(&mut self, cx: &mut Cx, v: u64) {
        let first = ((v >> 32) as u32).wrapping_sub(cx.shared.isn_local);
        let count = (v as u32).min(MAX_PER_NAK);
        let (now, rtt) = (cx.now, NegativeAck::period(cx));
        let lost: Vec<(u32, _)> = (0..count)
            .map(|i| first.wrapping_add(i))
            .filter_map(|q| cx.shared.unacked.get(&q).map(|id| (q, *id)))
            .filter(|(q, _)| self.resent_at.get(q).is_none_or(|t| now.saturating_sub(*t) >= rtt))
            .collect();
        let una = cx.shared.snd_una;
        self.resent_at.retain(|q, _| *q >= una);
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for (q, _) in &lost {
            self.resent_at.insert(*q, now);
            match ranges.last_mut() {
                Some(r) if r.1 + 1 == *q => r.1 = *q,
                _ => ranges.push((*q, *q)),
            }
        }
        cx.shared.loss_ranges = ranges;
        for (_, id) in lost {
            cx.raise(Event::SegmentLost, Arg::seg(id));
        }
    }
}

impl Micro for NegativeAck {
    fn id(&self) -> MicroId {
        MicroId::NegativeAck
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentFromNet, 22)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        if let Event::Timer(_) = ev {
            return self.repeat(cx);
        }
        let Some(id) = arg.seg else { return };
        let Some(seg) = cx.seg(id) else { return };
        match (seg.kind, seg.attrs.get(NAK), seg.attrs.get(SEQ)) {
            (_, Some(v), _) => {
                cx.consume(id);
                self.on_nak(cx, v);
            }
            (Kind::Data, None, Some(q)) => self.on_data(cx, q as u32),
            _ => {}
        }
    }
}
