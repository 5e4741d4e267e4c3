//! XON/XOFF: receiver-driven flow control by two control messages. The receiver compares the
//! application's unread backlog (`Session::set_backlog`) with `Config::recv_wnd_segs` messages:
//! when a data segment arrives with the backlog at or above it, it sends XOFF; once the backlog
//! is down to half, XON (repeated a few times, since a lost XON would stall the sender). The
//! sender holds new data segments while stopped, and every `Config::keepalive_us` lets one go
//! as a probe, so a lost XON costs a probe period, not the session.
use std::collections::VecDeque;

use crate::attr::XON;
use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, SegId};
use crate::segment::{Kind, Segment};
use crate::session::{Cx, Micro};

/// How often a stopping receiver looks at the backlog again, and repeats an XOFF.
const CHECK_US: u64 = 2_000;
const XON_REPEATS: u32 = 3;
/// Timer tags.
const CHECK: u64 = 1;
const PROBE: u64 = 2;

#[derive(Default)]
pub struct XonXoff {
    // receiver
    stopped_peer: bool,
    xoff_at: Option<u64>,
    xon_left: u32,
    checking: bool,
    // sender
    stopped: bool,
    held: VecDeque<SegId>,
    probing: bool,
}

impl XonXoff {
    fn signal(cx: &mut Cx, on: bool) {
        let mut s = Segment::new(Kind::Ack, cx.shared.conn);
        s.attrs.set(XON, on as u64);
        cx.send_control(s);
    }

    fn check_later(&mut self, cx: &mut Cx) {
        if !self.checking {
            self.checking = true;
            cx.timer(MicroId::XonXoff, CHECK_US, CHECK);
        }
    }

    /// Receiver: a data segment arrived.
    fn on_data(&mut self, cx: &mut Cx) {
        let high = cx.cfg.recv_wnd_segs as usize;
        if cx.shared.app_backlog < high {
            return;
        }
        let repeat = self.xoff_at.is_none_or(|t| cx.now >= t + CHECK_US);
        if !self.stopped_peer || repeat {
            XonXoff::signal(cx, false);
            self.stopped_peer = true;
            self.xon_left = 0;
            self.xoff_at = Some(cx.now);
        }
        self.check_later(cx);
    }

    /// Receiver: time to look at the backlog again.
    fn check(&mut self, cx: &mut Cx) {
        self.checking = false;
        let low = cx.cfg.recv_wnd_segs as usize / 2;
        if self.stopped_peer && cx.shared.app_backlog <= low {
            self.stopped_peer = false;
            self.xon_left = XON_REPEATS;
        }
        if self.xon_left > 0 {
            self.xon_left -= 1;
            XonXoff::signal(cx, true);
        }
        if self.stopped_peer || self.xon_left > 0 {
            self.check_later(cx);
        }
    }

    /// Sender: let held segments go, all of them or one probe.
    fn let_go(&mut self, cx: &mut Cx, all: bool) {
        while let Some(id) = self.held.pop_front() {
            cx.release(id, Barrier::Send);
            if !all {
                break;
            }
        }
    }
}

impl Micro for XonXoff {
    fn id(&self) -> MicroId {
        MicroId::XonXoff
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentToNet, 45), (Event::SegmentFromNet, 50)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::SegmentToNet => {
                let Some(id) = arg.seg.filter(|id| cx.is_data(*id)) else { return };
                if self.stopped || !self.held.is_empty() {
                    cx.hold(id, Barrier::Send);
                    self.held.push_back(id);
                }
            }
            Event::SegmentFromNet => {
                let Some(id) = arg.seg else { return };
                let Some(seg) = cx.seg(id) else { return };
                match (seg.kind, seg.attrs.get(XON)) {
                    (_, Some(on)) => {
                        cx.consume(id);
                        self.stopped = on == 0;
                        if self.stopped && !self.probing {
                            self.probing = true;
                            let p = cx.cfg.keepalive_us;
                            cx.timer(MicroId::XonXoff, p, PROBE);
                        } else if !self.stopped {
                            self.let_go(cx, true);
                        }
                    }
                    (Kind::Data, None) => self.on_data(cx),
                    _ => {}
                }
            }
            Event::Timer(_) if arg.tag == CHECK => self.check(cx),
            Event::Timer(_) => {
                self.probing = false;
                if self.stopped {
                    self.let_go(cx, false);
                    self.probing = true;
                    let p = cx.cfg.keepalive_us;
                    cx.timer(MicroId::XonXoff, p, PROBE);
                }
            }
            _ => {}
        }
    }
}
