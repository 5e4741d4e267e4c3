//! RTT Estimation: timestamps every outgoing segment and echoes the peer's (TS attribute);
//! an echo on an advancing ACK is one RTT sample, smoothed as in RFC 6298. Backs the RTO off
//! on each timeout.
use crate::attr::{ACK, TS};
use crate::composite::MicroId;
use crate::event::{Arg, Event};
use crate::session::{Cx, Micro};

const MAX_RTO_US: u64 = 60_000_000;

pub struct RttEstimation;

/// RFC 6298 smoothing of one sample into (srtt, rttvar, min); srtt 0 means no sample yet.
/// Shared with MTP's flowtimeout (`mtp::window`).
pub fn smooth(srtt: &mut f64, rttvar: &mut f64, min: &mut f64, rtt_us: f64) {
    if *srtt == 0.0 {
        (*srtt, *rttvar, *min) = (rtt_us, rtt_us / 2.0, rtt_us);
    } else {
        *rttvar = 0.75 * *rttvar + 0.25 * (*srtt - rtt_us).abs();
        *srtt = 0.875 * *srtt + 0.125 * rtt_us;
        *min = min.min(rtt_us);
    }
}

/// The RTO of an estimate: RFC 6298 §2.3's SRTT + max(G, 4 RTTVAR), with the minimum RTO as
/// G. On a jitter-free path RTTVAR decays to almost nothing, and SRTT + 4 RTTVAR alone would
/// fall below the time a delayed ACK takes: over a 413 ms RTT that fired a spurious timeout
/// every few seconds (tests/virtual_time.rs, a_steady_stream_...).
pub fn rto(srtt_us: f64, rttvar_us: f64, min_rto_us: u64) -> u64 {
    ((srtt_us + (4.0 * rttvar_us).max(min_rto_us as f64)) as u64).clamp(min_rto_us, MAX_RTO_US)
}

/// Folds one sample into the shared estimate.
pub fn sample(cx: &mut Cx, rtt_us: f64) {
    let s = &mut cx.shared;
    smooth(&mut s.srtt_us, &mut s.rttvar_us, &mut s.min_rtt_us, rtt_us);
    s.rto_us = rto(s.srtt_us, s.rttvar_us, cx.cfg.min_rto_us);
}

#[cfg(test)]
mod tests {
    use super::rto;

    #[test]
    fn rto_keeps_the_granularity_above_a_steady_rtt() {
        assert_eq!(rto(413_000.0, 0.0, 20_000), 433_000);
        assert_eq!(rto(413_000.0, 10_000.0, 20_000), 453_000);
        assert_eq!(rto(30.0, 5.0, 20_000), 20_030);
        assert_eq!(rto(90e6, 0.0, 20_000), MAX_RTO_US_FOR_TEST);
    }
    const MAX_RTO_US_FOR_TEST: u64 = super::MAX_RTO_US;
}

impl Micro for RttEstimation {
    fn id(&self) -> MicroId {
        MicroId::RttEstimation
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SendSegment, 50), (Event::SegmentFromNet, 25), (Event::SegmentTimeout, 10)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        match ev {
            Event::SendSegment => {
                let Some(id) = arg.seg else { return };
                let (now, echo) = ((cx.now as u32).max(1), cx.shared.ts_recent);
                if let Some(seg) = cx.seg_mut(id) {
                    seg.attrs.set(TS, (now as u64) << 32 | echo as u64);
                }
            }
            Event::SegmentFromNet => {
                let Some(seg) = arg.seg.and_then(|id| cx.seg(id)) else { return };
                let Some(ts) = seg.attrs.get(TS) else { return };
                let acks = seg.attrs.get(ACK).is_some();
                cx.shared.ts_recent = (ts >> 32) as u32;
                let echo = ts as u32;
                if echo != 0 && acks && cx.shared.ack_advanced {
                    let r = (cx.now as u32).max(1).wrapping_sub(echo);
                    if r < MAX_RTO_US as u32 {
                        sample(cx, r.max(1) as f64);
                    }
                }
            }
            Event::SegmentTimeout => {
                cx.shared.rto_us = (cx.shared.rto_us * 2).min(MAX_RTO_US);
            }
            _ => {}
        }
    }
}
