//! Keep Alive: sends a keep-alive segment when the session has been quiet for a while, and
//! closes it when nothing has come from the peer for `dead_after_us`.
use crate::composite::MicroId;
use crate::event::{Arg, Event};
use crate::segment::{Kind, Segment};
use crate::session::{Cx, Micro, Output};

pub struct KeepAlive;

impl Micro for KeepAlive {
    fn id(&self) -> MicroId {
        MicroId::KeepAlive
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::OpenSession, 40)]
    }

    fn handle(&mut self, ev: Event, _arg: &Arg, cx: &mut Cx) {
        let period = cx.cfg.keepalive_us;
        if let Event::Timer(_) = ev {
            let quiet = cx.now.saturating_sub(cx.shared.last_recv_us);
            if quiet >= cx.cfg.dead_after_us {
                cx.shared.closed = true;
                cx.output(Output::Closed(format!("peer silent for {} ms", quiet / 1000)));
                return;
            }
            if cx.now.saturating_sub(cx.shared.last_send_us) >= period && cx.shared.established {
                let conn = cx.shared.conn;
                cx.send_control(Segment::new(Kind::KeepAlive, conn));
            }
        }
        cx.timer(MicroId::KeepAlive, period, 0);
    }
}
