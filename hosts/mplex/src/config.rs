//! The parameters of Mplex_Control (Calvert et al.: enable multiplexing toward R with these
//! delays), checked once so every refusal names what is wrong.

use std::net::Ipv4Addr;

use crate::encap::Delays;
use crate::select::MIN_TCP_DATAGRAM;
use crate::selection::Selection;

/// Default size threshold (IPv4 total length), as in docs/protocol.md section 3.4.
pub const DEFAULT_SIZE_THRESHOLD: u16 = 128;
/// Largest threshold accepted: a one-record MplexPkt is 33 bytes longer than its datagram
/// (`encap::encapsulated_len`), so this keeps it within a 1500-byte MTU with room to spare.
pub const MAX_SIZE_THRESHOLD: u16 = 1448;
/// Longest delay accepted (ms): an ACK held longer than this has long made its sender's
/// TCP retransmit, so a larger value is a mistake, not a policy.
pub const MAX_DELAY_MS: f64 = 10_000.0;

/// A sender flow: capture what `selection` names toward `receiver` (by default pure ACKs)
/// and send it in group `group` under this flow's own delays and size threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderConfig {
    pub receiver: Ipv4Addr,
    pub selection: Selection,
    pub group: u32,
    pub delays: Delays,
    pub size_threshold: u16,
}

impl SenderConfig {
    /// Checks every field; `own` is this host's address (it cannot multiplex to itself).
    pub fn new(
        receiver: Ipv4Addr,
        own: Ipv4Addr,
        group: u64,
        max_local_delay_ms: f64,
        max_total_delay_ms: f64,
        size_threshold: Option<u64>,
    ) -> Result<SenderConfig, String> {
        if let Some(why) = receiver_problem(receiver, own) {
            return Err(format!("receiver {receiver}: {why}"));
        }
        Ok(SenderConfig {
            receiver,
            selection: Selection::Acks,
            group: check_group(group)?,
            delays: delays_from_ms(max_local_delay_ms, max_total_delay_ms)?,
            size_threshold: check_threshold(
                size_threshold.unwrap_or(u64::from(DEFAULT_SIZE_THRESHOLD)),
                MIN_TCP_DATAGRAM,
            )?,
        })
    }

    /// The same parameters for an application flow instead of the ACK capture; the size
    /// threshold is checked again against the flow's protocol (UDP datagrams start at 28).
    pub fn for_selection(self, selection: Selection, size_threshold: Option<u64>) -> Result<SenderConfig, String> {
        let t = size_threshold.unwrap_or(u64::from(DEFAULT_SIZE_THRESHOLD));
        Ok(SenderConfig {
            selection,
            size_threshold: check_threshold(t, selection.min_threshold())?,
            ..self
        })
    }
}

/// Why `a` cannot be a receiver R, if it cannot.
pub fn receiver_problem(a: Ipv4Addr, own: Ipv4Addr) -> Option<&'static str> {
    let o = a.octets();
    if a.is_unspecified() || o[0] == 0 {
        Some("not a host address (0.0.0.0/8)")
    } else if a.is_loopback() {
        Some("a loopback address never crosses a router")
    } else if a.is_multicast() || a.is_broadcast() || o[0] >= 240 {
        Some("not a unicast address")
    } else if a == own {
        Some("that is this host")
    } else {
        None
    }
}

pub fn check_group(g: u64) -> Result<u32, String> {
    match u32::try_from(g) {
        Ok(0) => Err("group 0 is not a multiplex group (the well-known one is 1)".into()),
        Ok(g) => Ok(g),
        Err(_) => Err(format!("group {g} does not fit in 32 bits")),
    }
}

/// MaxLocalDelay and MaxTotalDelay from milliseconds (fractions allowed) to microseconds.
pub fn delays_from_ms(local_ms: f64, total_ms: f64) -> Result<Delays, String> {
    for (name, v) in [("max-local-delay", local_ms), ("max-total-delay", total_ms)] {
        if !v.is_finite() || !(0.0..=MAX_DELAY_MS).contains(&v) {
            return Err(format!(
                "{name} must be between 0 and {MAX_DELAY_MS} ms, not {v}"
            ));
        }
    }
    if local_ms > total_ms {
        return Err(format!(
            "max-local-delay ({local_ms} ms) exceeds max-total-delay ({total_ms} ms): no node may hold a packet longer than the whole path may"
        ));
    }
    let us = |ms: f64| (ms * 1000.0).round() as u32;
    Ok(Delays {
        max_local_us: us(local_ms),
        max_total_us: us(total_ms),
    })
}

/// A threshold between `min` (the smallest datagram of the flow's protocol) and
/// [`MAX_SIZE_THRESHOLD`].
pub fn check_threshold(t: u64, min: u16) -> Result<u16, String> {
    if (u64::from(min)..=u64::from(MAX_SIZE_THRESHOLD)).contains(&t) {
        Ok(t as u16)
    } else {
        Err(format!("size-threshold must be between {min} (the smallest datagram of the flow) and {MAX_SIZE_THRESHOLD} bytes, not {t}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::FlowProto;

    const OWN: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 2);
    const R: Ipv4Addr = Ipv4Addr::new(10, 2, 1, 2);

    #[test]
    fn good_parameters() {
        let c = SenderConfig::new(R, OWN, 1, 2.0, 10.0, None).unwrap();
        assert_eq!(
            c.delays,
            Delays {
                max_local_us: 2000,
                max_total_us: 10_000
            }
        );
        assert_eq!(c.size_threshold, 128);
        let c = SenderConfig::new(R, OWN, 7, 0.5, 0.5, Some(80)).unwrap();
        assert_eq!(
            (c.group, c.delays.max_local_us, c.size_threshold),
            (7, 500, 80)
        );
    }

    #[test]
    fn every_refusal_says_why() {
        let e = |r| SenderConfig::new(r, OWN, 1, 2.0, 10.0, None).unwrap_err();
        assert!(e(OWN).contains("this host"));
        assert!(e(Ipv4Addr::new(224, 0, 0, 1)).contains("unicast"));
        assert!(e(Ipv4Addr::new(127, 0, 0, 1)).contains("loopback"));
        assert!(e(Ipv4Addr::UNSPECIFIED).contains("host address"));
        assert!(SenderConfig::new(R, OWN, 0, 2.0, 10.0, None)
            .unwrap_err()
            .contains("group 0"));
        assert!(SenderConfig::new(R, OWN, 1 << 32, 2.0, 10.0, None)
            .unwrap_err()
            .contains("32 bits"));
        assert!(SenderConfig::new(R, OWN, 1, 20.0, 10.0, None)
            .unwrap_err()
            .contains("exceeds"));
        assert!(SenderConfig::new(R, OWN, 1, -1.0, 10.0, None)
            .unwrap_err()
            .contains("max-local-delay"));
        assert!(SenderConfig::new(R, OWN, 1, 1.0, f64::NAN, None)
            .unwrap_err()
            .contains("max-total-delay"));
        assert!(SenderConfig::new(R, OWN, 1, 1.0, 99_999.0, None)
            .unwrap_err()
            .contains("max-total-delay"));
        assert!(SenderConfig::new(R, OWN, 1, 1.0, 2.0, Some(39))
            .unwrap_err()
            .contains("size-threshold"));
        assert!(SenderConfig::new(R, OWN, 1, 1.0, 2.0, Some(1449))
            .unwrap_err()
            .contains("size-threshold"));
        // A UDP flow may take datagrams from 28 bytes on; a TCP flow from 40.
        let c = SenderConfig::new(R, OWN, 1, 1.0, 2.0, None).unwrap();
        let udp = Selection::flow(FlowProto::Udp, Some(5000), None).unwrap();
        let tcp = Selection::flow(FlowProto::Tcp, Some(5000), None).unwrap();
        assert_eq!(c.for_selection(udp, Some(28)).unwrap().size_threshold, 28);
        assert!(c.for_selection(tcp, Some(28)).unwrap_err().contains("size-threshold"));
    }
}
