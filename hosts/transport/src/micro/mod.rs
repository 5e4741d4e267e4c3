//! The microprotocols. Each is one small file: a struct with its own state, the events it
//! binds at which priorities, and its handlers. Priorities used on each event, lowest first:
//!
//! | event | handlers |
//! | --- | --- |
//! | SEGMENT FROM USER | sequenced-segments 10 |
//! | SEGMENT TO NET | virtual-circuit 10, positive-ack 20, fec 30, windowed-flow 40, windowed-congestion 50 |
//! | SEND SEGMENT | rtt-estimation 50, windowed-flow 50, transport-driver 100 |
//! | SEGMENT SENT | positive-ack 10, retransmit 20, windowed-congestion 30, fec 40 |
//! | SEGMENT FROM NET | fec 5, virtual-circuit 8, positive-ack 20, rtt-estimation 25, windowed-flow 30, duplicate-ack 35, retransmit 40, windowed-congestion 45, reliable/lossy-fifo 60, transport-driver 100 |
//! | SEGMENT RECEIVED | fixed-size 50 |
//! | SEGMENT LOST | windowed-congestion 10, retransmit 20 |
//! | SEGMENT TIMEOUT | rtt-estimation 10, windowed-congestion 20, duplicate-ack 30, retransmit 90 |
//! | SEGMENT DONE | windowed-congestion 10, transport-driver 90 |
use crate::attr::SEQ;
use crate::composite::MicroId;
use crate::event::{Arg, SegId};
use crate::segment::Kind;
use crate::session::{Config, Cx, Micro};

/// The FIFOs' first step on a segment from the net: a data segment is taken off the event
/// (consumed) and returned with its sequence number; one without a number is counted as
/// malformed. `None` for anything else.
pub(crate) fn take_data(arg: &Arg, cx: &mut Cx) -> Option<(SegId, u32)> {
    let id = arg.seg?;
    let seg = cx.seg(id).filter(|s| s.kind == Kind::Data)?;
    let seq = seg.attrs.get(SEQ).map(|q| q as u32);
    cx.consume(id);
    if seq.is_none() {
        cx.stats.malformed += 1;
    }
    Some((id, seq?))
}

pub mod ccwin;
pub mod driver;
pub mod dupack;
pub mod fec;
pub mod fixed;
pub mod flowwin;
pub mod keepalive;
pub mod lfifo;
pub mod posack;
pub mod retransmit;
pub mod rfifo;
pub mod rtt;
pub mod seq;
pub mod vc;

/// One instance of each microprotocol in the (already checked) composite.
pub fn instantiate(cfg: &Config) -> Vec<Box<dyn Micro>> {
    cfg.composite
        .micros()
        .map(|m| -> Box<dyn Micro> {
            match m {
                MicroId::TransportDriver => Box::new(driver::TransportDriver::default()),
                MicroId::FixedSize => Box::new(fixed::FixedSize::default()),
                MicroId::SequencedSegments => Box::new(seq::SequencedSegments),
                MicroId::VirtualCircuit => Box::new(vc::VirtualCircuit::default()),
                MicroId::KeepAlive => Box::new(keepalive::KeepAlive),
                MicroId::RttEstimation => Box::new(rtt::RttEstimation),
                MicroId::PositiveAck => Box::new(posack::PositiveAck::default()),
                MicroId::DuplicateAck => Box::new(dupack::DuplicateAck::default()),
                MicroId::Retransmit => Box::new(retransmit::Retransmit::default()),
                MicroId::WindowedFlow => Box::new(flowwin::WindowedFlow::default()),
                MicroId::WindowedCongestion => Box::new(ccwin::WindowedCongestion::new(cfg)),
                MicroId::ReliableFifo => Box::new(rfifo::ReliableFifo::default()),
                MicroId::LossyFifo => Box::new(lfifo::LossyFifo::default()),
                MicroId::Fec => Box::new(fec::Fec::new(cfg.fec_n, cfg.fec_k)),
                other => unreachable!("{} is refused by Composite::from_bits", other.name()),
            }
        })
        .collect()
}
