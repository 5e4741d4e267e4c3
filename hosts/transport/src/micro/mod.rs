//! The microprotocols. Each is one small file: a struct with its own state, the events it
//! binds at which priorities, and its handlers. Priorities used on each event, lowest first:
//!
//! | event | handlers |
//! | --- | --- |
//! | MSG FROM USER | resize 20, coalesce 30, out-of-band 40, fixed-rate-jitter 45, fixed-size 50, out-of-band 60 |
//! | SEGMENT FROM USER | out-of-band 5, fixed-rate/timestamp-jitter 6, sequenced-segments 10 |
//! | SEGMENT TO NET | virtual-circuit 10, positive-ack 20, fec 30, windowed-flow 40, xon-xoff 45, rts-cts 45, windowed/rate-congestion 50 |
//! | SEND SEGMENT | rtt-estimation 50, windowed-flow 50, transport-driver 100 |
//! | SEGMENT SENT | positive-ack 10, retransmit 20, windowed/rate-congestion 30, fec 40 |
//! | SEGMENT FROM NET | fec 5, resize 7, virtual-circuit 8, positive-ack 20, negative-ack 22, rtt-estimation 25, windowed-flow 30, duplicate-ack 35, retransmit 40, windowed/rate-congestion 45, xon-xoff 50, rts-cts 50, out-of-band 55, reliable/lossy-fifo 60, fixed-rate/timestamp-jitter 90 (a Close), transport-driver 100 |
//! | SEGMENT RECEIVED | sequenced-messages 40, fixed-rate/timestamp-jitter 40, out-of-band 45, coalesce 45, fixed-size 50 |
//! | MSG FROM NET | sequenced-messages 50, fixed-rate/timestamp-jitter 60, transport-driver 100 |
//! | SEGMENT LOST | rate-congestion 10, retransmit 20, windowed-congestion 25 |
//! | SEGMENT TIMEOUT | rtt-estimation 10, windowed/rate-congestion 20, duplicate-ack 30, retransmit 90 |
//! | SEGMENT DONE | windowed-congestion 10, transport-driver 90 |
//! | CLOSE SESSION | resize 5, coalesce 10, windowed/rate-congestion 30, transport-driver 100 |
use crate::attr::SEQ;
use crate::composite::{Composite, MicroId};
use crate::event::{Arg, SegId};
use crate::segment::Kind;
use crate::session::{Config, Cx, Micro, Session};

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

pub mod cchost;
pub mod ccwin;
pub mod coalesce;
pub mod driver;
pub mod dupack;
pub mod fec;
pub mod fixed;
pub mod fixedjitter;
pub mod flowwin;
pub mod keepalive;
pub mod lfifo;
pub mod nak;
pub mod oob;
pub mod pacer;
pub mod playout;
pub mod posack;
pub mod rack;
pub mod rate;
pub mod resize;
pub mod retransmit;
pub mod rfifo;
pub mod rtscts;
pub mod rtt;
pub mod rtxaudit;
pub mod sack;
pub mod seq;
pub mod seqmsg;
pub mod tsjitter;
pub mod vc;
pub mod xonxoff;

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
                MicroId::SequencedMessages => Box::new(seqmsg::SequencedMessages::default()),
                MicroId::Coalesce => Box::new(coalesce::Coalesce::default()),
                MicroId::Resize => Box::new(resize::Resize::default()),
                MicroId::NegativeAck => Box::new(nak::NegativeAck::default()),
                MicroId::XonXoff => Box::new(xonxoff::XonXoff::default()),
                MicroId::RtsCts => Box::new(rtscts::RtsCts::default()),
                MicroId::RateCongestion => Box::new(rate::RateCongestion::new(cfg)),
                MicroId::OutOfBand => Box::new(oob::OutOfBand::default()),
                MicroId::FixedRateJitter => Box::new(fixedjitter::FixedRateJitter::default()),
                MicroId::TimestampJitter => Box::new(tsjitter::TimestampJitter::default()),
            }
        })
        .collect()
}

/// The constructors that build a session's microprotocols: here, above both, because the
/// microprotocols build on `session.rs` and not the other way round.
impl Session {
    /// Open a connection: the composite is announced in the first segment.
    pub fn connect(cfg: Config, now: u64) -> Session {
        let micros = instantiate(&cfg);
        Session::connect_with(cfg, now, micros)
    }

    /// Accept a connection from its first datagram. `serve` restricts the composites this end
    /// accepts (None: any valid one). On refusal, the Err holds the reason and the Refuse
    /// datagram to send back.
    pub fn accept(
        template: &Config,
        serve: Option<Composite>,
        first: &[u8],
        now: u64,
    ) -> Result<Session, (String, Vec<u8>)> {
        Session::accept_with(template, serve, first, now, instantiate)
    }
}
