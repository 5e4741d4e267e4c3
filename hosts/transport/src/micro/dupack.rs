//! Duplicate ACK: the third duplicate acknowledgement starts a recovery: the oldest
//! unacknowledged segment, and every one with at least three segments selectively
//! acknowledged above it (RFC 6675 §4 IsLost), is declared lost (SEGMENT LOST). During
//! recovery each ACK declares lost the holes IsLost finds not declared yet, and a partial ACK
//! the hole it stops at (NewReno; not with RACK, see `count`); recovery ends when everything
//! sent before it began is acknowledged.
//!
//! With an algorithm that asks for it (`cc::CcCtl::rack`), each ACK also runs RACK's time-based
//! detection (`micro::rack`, RFC 8985), which declares a segment lost again when its
//! retransmission is lost; a reordering timer covers what is not lost yet but will be
//! unless acknowledged in time. Either way a loss outside a recovery starts one. With RACK a
//! retransmission timeout keeps what was declared (see `handle`); without it the timeout
//! starts the declarations afresh.
use std::collections::HashSet;

use crate::attr::ACK;
use super::rtxaudit::Cause;
use crate::composite::MicroId;
use crate::event::{Arg, Event, TimerId};
use crate::session::{Cx, Micro};

pub const DUP_THRESHOLD: u32 = 3;

#[derive(Default)]
pub struct DuplicateAck {
    dups: u32,
    marked: HashSet<u32>,
    /// Every unacknowledged segment below this was declared in this recovery: each ACK scans
    /// only from here to its top, not the whole scoreboard (at 20,000 segments in flight a
    /// scan per ACK cost the sender more time than the ACKs' arrival allowed, issue #23).
    declared_to: u32,
    /// RACK's reordering timer.
    timer: Option<TimerId>,
}

impl DuplicateAck {
    fn declare(&mut self, cx: &mut Cx, seqs: Vec<u32>) {
        let seqs: Vec<u32> = seqs.into_iter().filter(|q| self.marked.insert(*q)).collect();
        for q in &seqs {
            cx.shared.rack.declared(*q);
            cx.shared.rtx_audit.declared(*q, Cause::DupAck);
        }
        self.raise_lost(cx, seqs);
    }

    /// SEGMENT LOST for each of `seqs` (ascending), with the ranges for the algorithm.
    fn raise_lost(&mut self, cx: &mut Cx, seqs: Vec<u32>) {
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for q in &seqs {
            match ranges.last_mut() {
                Some(r) if r.1 + 1 == *q => r.1 = *q,
                _ => ranges.push((*q, *q)),
            }
        }
        cx.shared.loss_ranges.extend(ranges);
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
            self.declared_to = 0;
            // With RACK what was declared stays declared: a retransmission still on its way
            // is not declared again by the next duplicate ACK, only when RACK finds it lost
            // (RFC 8985 §6.2; RFC 6675 §5.1 keeps the scoreboard through an RTO). Cleared,
            // each timeout re-declared every hole below the highest SACK: after a spurious
            // one, 100 holes' retransmissions were all sent a second time (issue #23,
            // tests/timeout_redeclare.rs). Without RACK nothing else finds a lost
            // retransmission, so the timeout still starts the declarations afresh.
            if cx.shared.rack.policy.is_none() {
                self.marked.clear();
            }
            return;
        }
        if let Event::Timer(_) = ev {
            self.timer = None;
            self.rack(cx, Cause::RackTimer);
            return;
        }
        let Some(seg) = arg.seg.and_then(|id| cx.seg(id)) else { return };
        if seg.attrs.get(ACK).is_none() {
            return;
        }
        self.count(cx);
        self.rack(cx, Cause::Rack);
    }
}

impl DuplicateAck {
    /// RACK's detection (when the algorithm uses it): what it finds lost is declared even if
    /// declared before (a lost retransmission), and starts a recovery outside one.
    fn rack(&mut self, cx: &mut Cx, cause: Cause) {
        if cx.shared.rack.policy.is_none() {
            return;
        }
        let (now, srtt, min_rtt) = (cx.now, cx.shared.srtt_us, cx.shared.min_rtt_us);
        let (mut lost, wait) = cx.shared.rack.detect(now, srtt, min_rtt);
        lost.retain(|q| cx.shared.unacked.contains_key(q));
        if !lost.is_empty() {
            lost.sort_unstable();
            cx.stats.rack_losses += lost.len() as u64;
            for q in &lost {
                cx.shared.rtx_audit.declared(*q, cause);
            }
            let s = &mut cx.shared;
            if !s.in_recovery {
                s.in_recovery = true;
                s.recover = s.snd_max;
                self.declared_to = 0;
            }
            self.marked.extend(lost.iter().copied());
            self.raise_lost(cx, lost);
        }
        if let Some(t) = self.timer.take() {
            cx.cancel(t);
        }
        if let Some(w) = wait {
            self.timer = Some(cx.timer(MicroId::DuplicateAck, w.max(1), 0));
        }
    }

    /// Duplicate ACK counting and the recovery's declarations (the module comment).
    fn count(&mut self, cx: &mut Cx) {
        let s = &mut cx.shared;
        if s.ack_advanced {
            self.dups = 0;
            if s.in_recovery {
                if s.snd_una >= s.recover {
                    s.in_recovery = false;
                    self.marked.clear();
                    self.declared_to = 0;
                } else if s.rack.policy.is_some() {
                    // with RACK, only what IsLost says: the partial ack's own hole, declared
                    // as NewReno does (RFC 6582 §3.2 step 5), was the next original still on
                    // its way whenever the ACKs advanced in order through a recovery's tail:
                    // one CTCP flow at 1 Gbit/s resent 2,141 segments that way (issue #23,
                    // session 15); a hole nothing is acknowledged above is RACK's or the timer's
                    self.declare_lost(cx, false);
                } else {
                    // NewReno: the partial ack's hole too
                    self.declare_lost(cx, true);
                }
            }
        } else if s.ack_duplicate && s.in_recovery {
            self.declare_lost(cx, false);
        } else if s.ack_duplicate {
            self.dups += 1;
            if self.dups == DUP_THRESHOLD && !s.in_recovery {
                s.in_recovery = true;
                s.recover = s.snd_max;
                self.declared_to = 0;
                self.declare_lost(cx, true);
            }
        }
    }

    /// Declares the holes RFC 6675 §4's IsLost finds lost (DupThresh segments selectively
    /// acknowledged above each, `Shared::lost_below`) and, with `oldest`, the oldest
    /// unacknowledged segment whatever it finds (the first retransmission of a recovery, RFC
    /// 6675 §5 step 4.3, and NewReno's partial ACK). Until session 16 every hole below the
    /// highest selective ack was declared, a DupThresh of one: a segment overtaken by one
    /// sent after it was resent (issue #23, tests/duplicate_acks.rs).
    fn declare_lost(&mut self, cx: &mut Cx, oldest: bool) {
        let una = cx.shared.snd_una;
        if oldest && cx.shared.unacked.contains_key(&una) {
            self.declare(cx, vec![una]);
        }
        if let Some(top) = cx.shared.lost_below() {
            self.declare_below(cx, top);
        }
    }

    /// Declares every unacknowledged segment below `top` not declared yet in this recovery.
    fn declare_below(&mut self, cx: &mut Cx, top: u32) {
        let from = self.declared_to.max(cx.shared.snd_una);
        if from >= top {
            return;
        }
        let lost = cx.shared.unacked.range(from..top).map(|(q, _)| *q).collect();
        self.declared_to = top;
        self.declare(cx, lost);
    }
}
