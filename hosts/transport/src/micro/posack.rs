//! Positive ACK. Receiver: tracks what arrived and acknowledges it (ACK: cumulative next
//! expected, and a bitmap of the 32 segments after it; an Ack segment adds SACK blocks for
//! runs beyond, see `sack`), at once when something is out of order, else every `ack_interval` segments or after `ack_delay_us`; in a batch of
//! datagrams (`Session::begin_batch`), in-order data is acknowledged once at its end (or every
//! `BATCH_ACK_SEGS`). Sender: a data segment is done (its done barrier released) when it is
//! acknowledged either way.
use super::sack::{self, Runs};
use crate::attr::{ACK, SEQ, TS};
use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, TimerId};
use crate::segment::{Kind, Segment};
use crate::session::{Cx, Micro};

pub use crate::event::FLUSH;
/// In a batch, in-order data is still acknowledged at least every this many segments.
pub const BATCH_ACK_SEGS: u32 = 64;

#[derive(Default)]
pub struct PositiveAck {
    cum: u32,
    ooo: Runs,
    /// The latest out-of-order arrivals, latest first (`sack::MAX_BLOCKS` of them): their
    /// runs lead the SACK blocks.
    recent: Vec<u32>,
    pending: u32,
    timer: Option<TimerId>,
}

impl PositiveAck {
    pub fn ack_value(&self) -> u64 {
        (self.cum as u64) << 32 | self.ooo.bitmap(self.cum) as u64
    }

    fn send_ack(&mut self, cx: &mut Cx) {
        let mut a = Segment::new(Kind::Ack, cx.shared.conn);
        a.attrs.set(ACK, self.ack_value());
        let mut blocks = Vec::new();
        self.ooo.encode_blocks(self.cum, &self.recent, &mut blocks);
        a.payload = blocks.into();
        cx.send_control(a);
        self.pending = 0;
        if let Some(t) = self.timer.take() {
            cx.cancel(t);
        }
    }

    fn on_data(&mut self, cx: &mut Cx, seq: u32) {
        let in_order = seq == self.cum;
        if seq > self.cum && !cx.composite.has(MicroId::Retransmit) {
            // CTP §III-B: an ACK says the segments before it are no longer needed, received or
            // not. Without Retransmit a hole will never be filled, so its reliability
            // constraint is met: acknowledge past it, and the sender's segments in it are done
            // (window freed, close not held). Nothing is held out of order here, as each
            // arrival past the ACK moves it.
            self.cum = seq + 1;
        } else if seq == self.cum {
            self.cum += 1;
            if let Some(end) = self.ooo.take_from(self.cum) {
                self.cum = end;
            }
        } else if seq > self.cum && self.ooo.len() < cx.cfg.recv_wnd_segs as usize {
            self.ooo.insert(seq);
            self.recent.retain(|q| *q != seq);
            self.recent.insert(0, seq);
            self.recent.truncate(sack::MAX_BLOCKS);
        }
        self.pending += 1;
        let due = if cx.shared.batching { BATCH_ACK_SEGS } else { cx.shared.ack_interval };
        if !in_order || !self.ooo.is_empty() || self.pending >= due {
            self.send_ack(cx);
        } else if self.timer.is_none() {
            let d = cx.shared.ack_delay_us;
            self.timer = Some(cx.timer(MicroId::PositiveAck, d, 0));
        }
    }

    /// `echo`: the send time the ACK's timestamp echoes (0 if none), for RACK.
    fn on_ack(cx: &mut Cx, kind: Kind, val: u64, blocks: &[u8], echo: u32) {
        let (cum, bitmap) = ((val >> 32) as u32, val as u32);
        let now = cx.now;
        let s = &mut cx.shared;
        s.rack.ack_echo = echo;
        if cum > s.snd_max {
            cx.stats.malformed += 1; // acknowledges what was never sent
            return;
        }
        let blocks = match sack::decode_blocks(cum, blocks, s.snd_max) {
            Some(b) => b,
            None => {
                cx.stats.malformed += 1;
                Vec::new()
            }
        };
        s.ack_advanced = cum > s.snd_una;
        // a duplicate so far; it counts only if it selectively acknowledges something new
        // (below)
        let maybe_dup = !s.ack_advanced && kind == Kind::Ack && !s.unacked.is_empty();
        s.ack_duplicate = false;
        let mut done = Vec::new();
        let mut early = Vec::new();
        let min_rtt = s.min_rtt_us;
        if s.ack_advanced {
            s.snd_una = cum;
            while let Some(e) = s.unacked.first_entry() {
                if *e.key() >= cum {
                    break;
                }
                let q = *e.key();
                done.push(e.remove());
                s.rack.delivered(q, now, min_rtt);
                early.extend(s.rtx_audit.delivered(q, now, min_rtt));
            }
        }
        for i in (0..32).filter(|i| bitmap & 1 << i != 0) {
            let q = cum.wrapping_add(1 + i);
            if let Some(id) = s.unacked.remove(&q) {
                done.push(id);
                s.rack.delivered(q, now, min_rtt);
                early.extend(s.rtx_audit.delivered(q, now, min_rtt));
            }
            s.note_sacked(q);
        }
        for (first, end) in blocks {
            // removing a range of the map: keys first, as the map cannot be cut in place
            let keys: Vec<u32> = s.unacked.range(first..end).map(|(q, _)| *q).collect();
            for q in keys {
                done.extend(s.unacked.remove(&q));
                s.rack.delivered(q, now, min_rtt);
                early.extend(s.rtx_audit.delivered(q, now, min_rtt));
            }
            // only the highest few can be among the highest DupThresh selectively acknowledged
            for q in (first..end).rev().take(s.sacked_top.len()) {
                s.note_sacked(q);
            }
        }
        // RFC 6675 §2 ("duplicate acknowledgment"): with selective acknowledgements a
        // duplicate ACK is one that reports data not reported before. The ACK a receiver
        // sends for a segment it already holds (a spurious retransmission's) reports nothing
        // new; counted, three of them started a recovery and halved the window each round
        // trip after a spurious timeout's retransmissions (issue #23, 8 flows at 110 ms)
        s.ack_duplicate = maybe_dup && !done.is_empty();
        for c in early {
            cx.stats.rtx_early[c as usize] += 1;
        }
        for id in done {
            cx.release(id, Barrier::Done);
        }
    }
}

impl Micro for PositiveAck {
    fn id(&self) -> MicroId {
        MicroId::PositiveAck
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentToNet, 20), (Event::SegmentSent, 10), (Event::SegmentFromNet, 20)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        if let Event::Timer(_) = ev {
            if arg.tag != FLUSH {
                self.timer = None;
            }
            if self.pending > 0 {
                self.send_ack(cx);
            }
            return;
        }
        let Some(id) = arg.seg else { return };
        match ev {
            Event::SegmentToNet if cx.is_data(id) => cx.hold(id, Barrier::Done),
            Event::SegmentSent if cx.is_data(id) => {
                let first = cx.first_send(id);
                if let Some(q) = cx.seg(id).and_then(|s| s.attrs.get(SEQ)).map(|q| q as u32) {
                    if first {
                        cx.shared.unacked.insert(q, id);
                        cx.shared.snd_max = cx.shared.snd_max.max(q + 1);
                    }
                    cx.shared.rack.sent(q, cx.now, !first);
                    if !first {
                        let c = cx.shared.rtx_audit.resent(q, cx.now);
                        cx.stats.rtx_by_cause[c as usize] += 1;
                    }
                }
            }
            Event::SegmentFromNet => {
                let Some(seg) = cx.seg(id) else { return };
                let (kind, ack, seq) = (seg.kind, seg.attrs.get(ACK), seg.attrs.get(SEQ));
                let echo = seg.attrs.get(TS).map_or(0, |t| t as u32);
                // SACK blocks ride only on Ack segments (a data segment's payload is data)
                let blocks = if kind == Kind::Ack { std::mem::take(&mut cx.seg_mut(id).unwrap().payload) } else { Default::default() };
                cx.shared.ack_advanced = false;
                cx.shared.ack_duplicate = false;
                if let Some(v) = ack {
                    PositiveAck::on_ack(cx, kind, v, &blocks, echo);
                    if kind == Kind::Ack {
                        cx.consume(id);
                    }
                }
                if let (Kind::Data, Some(q)) = (kind, seq) {
                    self.on_data(cx, q as u32);
                }
            }
            _ => {}
        }
    }
}
