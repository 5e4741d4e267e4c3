//! Windowed (and paced) congestion control: hosts one CCC algorithm, calls its callbacks from
//! the events, and holds each data segment's send barrier until the algorithm's window has
//! room and its sending period has elapsed. A retransmission timeout whose first advancing ACK
//! echoes a timestamp older than the retransmission was spurious (the original arrived; Eifel
//! detection, RFC 3522): the window the timeout took is given back, recovery ends, and the
//! algorithm undoes its own response (`Ccc::on_spurious_timeout`; RFC 4015 §2).
use std::collections::{HashSet, VecDeque};

use super::cchost::CcHost;
use super::pacer::Pacer;
use crate::attr::{ACK, SEQ, TS};
use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, SegId};
use crate::segtable::IdBuildHasher;
use crate::session::{Config, Cx, Micro};

pub struct WindowedCongestion {
    host: CcHost,
    held: VecDeque<SegId>,
    inflight: HashSet<SegId, IdBuildHasher>,
    pacer: Pacer,
    /// After a timeout, until the next advancing ACK: (window before it, timestamp of the
    /// retransmission).
    undo: Option<(f64, u32)>,
    /// Proportional Rate Reduction's state while a loss recovery runs (algorithms that ask
    /// for it, `CcCtl::prr`).
    prr: Option<Prr>,
    /// A timeout's recovery is slow start, not PRR (RFC 6937 §3 applies to fast recovery).
    timed_out: bool,
    /// Segments this released to be sent (new or resent), in that order, not sent yet: their
    /// SEND SEGMENT events wait in the session's queue. No more is released until they are
    /// sent (see `release`).
    unsent: VecDeque<SegId>,
}

/// RFC 6937 §3, in segments.
#[derive(Debug, Default)]
struct Prr {
    /// Flight size when the recovery began (snd.nxt - snd.una).
    recover_fs: f64,
    /// Segments delivered (acknowledged, cumulatively or selectively) since it began.
    delivered: u64,
    /// Segments sent since it began.
    out: u64,
    /// `delivered` at the last ACK, for the ACK's own DeliveredData.
    delivered_mark: u64,
    /// What the last ACK allows to send (sndcnt), less what was sent since.
    budget: u64,
}

impl Prr {
    /// sndcnt for an ACK (RFC 6937 §3, with the slow-start reduction bound): while the pipe
    /// is above ssthresh, send in proportion to what was delivered; below it, grow back to
    /// ssthresh no faster than slow start.
    fn on_ack(&mut self, pipe: f64, ssthresh: f64) {
        let dd = self.delivered - self.delivered_mark;
        self.delivered_mark = self.delivered;
        let sndcnt = if pipe > ssthresh {
            (self.delivered as f64 * ssthresh / self.recover_fs.max(1.0)).ceil() - self.out as f64
        } else {
            let limit = (self.delivered.saturating_sub(self.out)).max(dd) as f64 + 1.0;
            (ssthresh - pipe).min(limit)
        };
        self.budget = sndcnt.max(0.0) as u64;
    }
}

impl WindowedCongestion {
    /// Panics on an unknown algorithm name: `Config` users check with `cc::by_name` first.
    pub fn new(cfg: &Config) -> WindowedCongestion {
        WindowedCongestion {
            host: CcHost::new(cfg),
            held: VecDeque::new(),
            inflight: HashSet::default(),
            pacer: Pacer::new(MicroId::WindowedCongestion),
            undo: None,
            prr: None,
            timed_out: false,
            unsent: VecDeque::new(),
        }
    }

    /// The oldest segment declared lost that is still unacknowledged and not resent yet,
    /// dropping the others (acked selectively since, or queued twice).
    fn next_rtx(&self, cx: &mut Cx) -> Option<SegId> {
        while let Some(id) = cx.shared.rtx_pending.front().copied() {
            let seq = cx.seg(id).and_then(|s| s.attrs.get(SEQ)).map(|q| q as u32);
            if seq.is_some_and(|q| cx.shared.unacked.get(&q) == Some(&id)) && !self.inflight.contains(&id) {
                return Some(id);
            }
            cx.shared.rtx_pending.pop_front();
        }
        None
    }

    /// Sends what the window and the pacing allow: retransmissions first (RFC 6675 §5: they
    /// count in the pipe as new data does), then held new segments.
    ///
    /// Segments leave in the order released here. The session runs the events a handler
    /// raises after it, one by one, and the events those raise before the next: a release
    /// run while this one's sends were still queued (on the first one's SEGMENT SENT) sent
    /// its segments ahead of the rest. So nothing is released while an earlier release's
    /// segments are unsent, and a new segment only when no other microprotocol holds it (it
    /// would leave when that one lets go, out of this order). Both happened when one
    /// cumulative ACK opened the peer's window by 10,858 segments: the SEGMENT DONE it raised
    /// ran this before Windowed Flow had read the new window, then Windowed Flow's release
    /// ran this again; 14,170 segments left as 67996, 78854-82110, 67997-78853, and duplicate
    /// ACKs declared the 10,857 still queued behind the bottleneck lost on the SACKs of the
    /// 3,257 sent ahead of them (issue #23, tests/gig_overflow.rs).
    fn release(&mut self, cx: &mut Cx) {
        // (all are sent before the session takes its next datagram or timer; one freed, its
        // slot perhaps reused by a segment that is not data, is not waited for)
        while self.unsent.front().is_some_and(|id| !cx.is_data(*id)) {
            self.unsent.pop_front();
        }
        if !self.unsent.is_empty() {
            return;
        }
        if !self.release_paced(cx) {
            self.pacer.stopped();
        }
    }

    /// `release`'s loop; false when it stopped for anything but the pacing period.
    fn release_paced(&mut self, cx: &mut Cx) -> bool {
        loop {
            let rtx = self.next_rtx(cx);
            let Some(id) = rtx.or_else(|| self.held.front().copied()) else { return false };
            if rtx.is_none() && (beyond_flow_window(cx, id) || cx.send_holds(id) > 1) {
                // the usable window is the smaller of cwnd and the peer's (RFC 5681 §2): a
                // segment Windowed Flow still holds is not in flight, yet counted here it
                // filled the pipe and held back the retransmissions (issue #23)
                return false;
            }
            match self.prr.as_ref() {
                Some(p) if p.budget == 0 => return false,
                Some(_) => {}
                None if self.inflight.len() as f64 >= self.host.ctl.cwnd.max(1.0).floor() => return false,
                None => {}
            }
            let period = self.host.ctl.pkt_snd_period_us;
            if period > 0.0 && !self.pacer.admit(period, cx) {
                return true;
            }
            self.inflight.insert(id);
            if let Some(p) = self.prr.as_mut() {
                p.budget -= 1;
                p.out += 1;
            }
            if rtx.is_some() {
                cx.shared.rtx_pending.pop_front();
                cx.stats.retransmits += 1;
                cx.raise(Event::SendSegment, Arg::seg(id));
            } else {
                self.held.pop_front();
                cx.release(id, Barrier::Send);
            }
            self.unsent.push_back(id);
        }
    }
}

impl Micro for WindowedCongestion {
    fn id(&self) -> MicroId {
        MicroId::WindowedCongestion
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[
            (Event::OpenSession, 30),
            (Event::SegmentToNet, 50),
            (Event::SegmentSent, 30),
            (Event::SegmentDone, 10),
            (Event::SegmentFromNet, 45),
            // after Retransmit (20) has queued the segment, so it goes out here if the window
            // has room: a loss found by a timer (RACK's) has no later ACK to release it
            (Event::SegmentLost, 25),
            (Event::SegmentTimeout, 20),
            (Event::CloseSession, 30),
        ]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        self.host.observe(cx, self.inflight.len() as u32);
        self.track_recovery(cx);
        match ev {
            Event::SegmentToNet => {
                let Some(id) = arg.seg.filter(|id| cx.is_data(*id)) else { return };
                cx.hold(id, Barrier::Send);
                self.held.push_back(id);
            }
            // Done, or lost: it has left the network and no longer fills the window.
            Event::SegmentDone | Event::SegmentLost => {
                if let Some(id) = arg.seg {
                    self.inflight.remove(&id);
                    if ev == Event::SegmentDone && cx.is_data(id) {
                        if let Some(p) = self.prr.as_mut() {
                            p.delivered += 1;
                        }
                    }
                }
            }
            Event::SegmentSent => {
                if let Some(id) = arg.seg {
                    if self.unsent.front() == Some(&id) {
                        self.unsent.pop_front();
                    } else if let Some(i) = self.unsent.iter().position(|u| *u == id) {
                        self.unsent.remove(i);
                    }
                }
            }
            Event::Timer(_) if arg.tag != crate::event::LOCAL_CC => self.pacer.fired(),
            // the retransmission leaves right after this event, stamped with this time
            Event::SegmentTimeout => {
                if self.undo.is_none() {
                    self.undo = Some((self.host.ctl.cwnd, (cx.now as u32).max(1)));
                }
                self.prr = None;
                self.timed_out = true;
            }
            Event::SegmentFromNet if cx.shared.ack_advanced => {
                let seg = arg.seg.and_then(|id| cx.seg(id));
                let echo = seg.filter(|s| s.attrs.get(ACK).is_some()).and_then(|s| s.attrs.get(TS)).map(|t| t as u32);
                if let (Some((cwnd, rtx)), Some(echo)) = (self.undo, echo) {
                    self.undo = None;
                    if echo != 0 && (rtx.wrapping_sub(echo) as i32) > 0 {
                        cx.stats.spurious_timeouts += 1;
                        cx.shared.in_recovery = false;
                        (self.prr, self.timed_out) = (None, false);
                        self.host.cc.on_spurious_timeout(&mut self.host.ctl);
                        self.host.on_event(ev, arg, cx);
                        self.host.ctl.cwnd = self.host.ctl.cwnd.max(cwnd);
                        self.host.publish(cx);
                        self.release(cx);
                        return;
                    }
                }
            }
            _ => {}
        }
        self.host.on_event(ev, arg, cx);
        self.host.publish(cx);
        if ev == Event::SegmentFromNet && arg.seg.and_then(|id| cx.seg(id)).is_some_and(|s| s.attrs.get(ACK).is_some()) {
            let (pipe, ssthresh) = (self.inflight.len() as f64, self.host.ctl.cwnd);
            if let Some(p) = self.prr.as_mut() {
                p.on_ack(pipe, ssthresh);
            }
        }
        self.release(cx);
    }
}

/// Whether new segment `id` lies beyond the peer's flow window (Windowed Flow would hold it).
fn beyond_flow_window(cx: &Cx, id: SegId) -> bool {
    if !cx.cfg.composite.has(MicroId::WindowedFlow) {
        return false;
    }
    let limit = cx.shared.snd_una.saturating_add(cx.shared.peer_wnd);
    cx.seg(id).and_then(|s| s.attrs.get(SEQ)).is_some_and(|q| q as u32 >= limit)
}

impl WindowedCongestion {
    /// Starts PRR when a fast recovery begins (not a timeout's) and ends it with the recovery.
    fn track_recovery(&mut self, cx: &Cx) {
        if !cx.shared.in_recovery {
            self.prr = None;
            self.timed_out = false;
        } else if self.prr.is_none() && !self.timed_out && self.host.ctl.prr {
            let fs = cx.shared.snd_max.wrapping_sub(cx.shared.snd_una) as f64;
            self.prr = Some(Prr { recover_fs: fs, ..Prr::default() });
        }
    }
}
