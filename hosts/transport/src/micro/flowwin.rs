//! Windowed flow control. Receiver: advertises its free buffer (WND, in segments) on every
//! segment it sends. Sender: holds the send barrier of any segment at or beyond
//! snd_una + peer window, and releases them in order as acknowledgements open the window.
use std::collections::VecDeque;

use crate::attr::{SEQ, WND};
use crate::composite::MicroId;
use crate::event::{Arg, Barrier, Event, SegId};
use crate::session::{Cx, Micro};

#[derive(Default)]
pub struct WindowedFlow {
    held: VecDeque<(u32, SegId)>,
}

impl WindowedFlow {
    fn open(&mut self, cx: &mut Cx) {
        let limit = cx.shared.snd_una.saturating_add(cx.shared.peer_wnd);
        while let Some((q, id)) = self.held.front().copied() {
            if q >= limit {
                break;
            }
            self.held.pop_front();
            cx.release(id, Barrier::Send);
        }
    }
}

impl Micro for WindowedFlow {
    fn id(&self) -> MicroId {
        MicroId::WindowedFlow
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentToNet, 40), (Event::SendSegment, 50), (Event::SegmentFromNet, 30)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        let Some(id) = arg.seg else { return };
        match ev {
            Event::SegmentToNet => {
                let Some(q) = cx.seg(id).and_then(|s| s.attrs.get(SEQ)) else { return };
                let q = q as u32;
                if !self.held.is_empty() || q >= cx.shared.snd_una.saturating_add(cx.shared.peer_wnd) {
                    cx.hold(id, Barrier::Send);
                    self.held.push_back((q, id));
                }
            }
            Event::SendSegment => {
                let free = cx.cfg.recv_wnd_segs.saturating_sub(cx.shared.rcv_buffered);
                if let Some(seg) = cx.seg_mut(id) {
                    seg.attrs.set(WND, free as u64);
                }
            }
            Event::SegmentFromNet => {
                if let Some(w) = cx.seg(id).and_then(|s| s.attrs.get(WND)) {
                    cx.shared.peer_wnd = w as u32;
                    self.open(cx);
                }
            }
            _ => {}
        }
    }
}
