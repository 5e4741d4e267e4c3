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

/// The RTO of an estimate (the mechanism): RFC 6298 §2.3's SRTT + max(G, 4 RTTVAR), raised to
/// the minimum RTO (§2.4). Both numbers are policy (`RtoPolicy`). G keeps the RTO above the
/// time a delayed ACK takes on a jitter-free path, where RTTVAR decays to almost nothing: over a
/// 413 ms RTT, SRTT + 4 RTTVAR alone fired a spurious timeout every few seconds
/// (tests/virtual_time.rs, a_steady_stream_...).
pub fn rto(srtt_us: f64, rttvar_us: f64, p: RtoPolicy) -> u64 {
    ((srtt_us + (4.0 * rttvar_us).max(p.g_us as f64)) as u64).clamp(p.min_us.max(1), MAX_RTO_US)
}

/// Which RTO the mechanism computes: the margin G over SRTT and the minimum RTO. The session's
/// own (`Config::rto_g_us`, `Config::min_rto_us`) are CTP's fine-grained timers; a congestion
/// control algorithm may set its own (`cc::CcCtl::rto_policy`), as UDT/CCC lets an algorithm
/// redefine the RTO (§2.2.2) and as CTCP takes kernel TCP's (`cc::TCP_RTO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtoPolicy {
    pub g_us: u64,
    pub min_us: u64,
}

/// Folds one sample into the shared estimate.
pub fn sample(cx: &mut Cx, rtt_us: f64) {
    let s = &mut cx.shared;
    s.latest_rtt_us = rtt_us;
    smooth(&mut s.srtt_us, &mut s.rttvar_us, &mut s.min_rtt_us, rtt_us);
    let p = s.rto_policy.unwrap_or(RtoPolicy { g_us: cx.cfg.rto_g_us, min_us: cx.cfg.min_rto_us });
    s.rto_us = rto(s.srtt_us, s.rttvar_us, p);
}

#[cfg(test)]
mod tests {
    use super::{rto, RtoPolicy};

    #[test]
    fn rto_keeps_the_granularity_above_a_steady_rtt() {
        let p = RtoPolicy { g_us: 20_000, min_us: 20_000 };
        assert_eq!(rto(413_000.0, 0.0, p), 433_000);
        assert_eq!(rto(413_000.0, 10_000.0, p), 453_000);
        assert_eq!(rto(30.0, 5.0, p), 20_030);
        assert_eq!(rto(90e6, 0.0, p), MAX_RTO_US_FOR_TEST);
    }

    #[test]
    fn the_minimum_rto_and_the_margin_are_separate() {
        // margin 20 ms, floor 200 ms: a 110 ms SRTT waits 200 ms; a 400 ms one 420 ms
        let floor = RtoPolicy { g_us: 20_000, min_us: 200_000 };
        assert_eq!(rto(110_000.0, 0.0, floor), 200_000);
        assert_eq!(rto(400_000.0, 0.0, floor), 420_000);
        // margin 200 ms (Linux's rto_min acts as a floor on 4 RTTVAR): always 200 ms over SRTT
        let margin = RtoPolicy { g_us: 200_000, min_us: 200_000 };
        assert_eq!(rto(110_000.0, 0.0, margin), 310_000);
        assert_eq!(rto(110_000.0, 60_000.0, margin), 350_000);
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
