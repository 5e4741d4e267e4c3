//! Which of a sender's datagrams toward R one multiplex flow takes (docs/multiplex.md,
//! "Per-flow multiplexing"): either the kernel's pure TCP ACKs of every connection to R
//! (the service as the paper's ACK study uses it), or one application's own flow, named by
//! protocol and port(s), whose small datagrams (UDP, or TCP segments with or without data)
//! are multiplexed under that flow's own delays and size threshold.

use std::fmt;
use std::net::Ipv4Addr;

use concast_wire::ipv4;

pub use crate::select::{FlowProto, MIN_TCP_DATAGRAM, MIN_UDP_DATAGRAM};
use crate::select::{self, PassReason};

/// What a sender flow captures. Ordered so that application flows come before the ACK
/// capture: a datagram is given to the first selection it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Selection {
    /// One application flow: `proto`, this host's port `sport` and/or R's port `dport`.
    Flow {
        proto: FlowProto,
        sport: Option<u16>,
        dport: Option<u16>,
    },
    /// Pure TCP ACKs of every connection toward R.
    Acks,
}

impl Selection {
    /// An application flow; at least one port must name it.
    pub fn flow(proto: FlowProto, sport: Option<u16>, dport: Option<u16>) -> Result<Selection, String> {
        if sport.is_none() && dport.is_none() {
            return Err("a flow is named by \"sport\" (this host's port) and/or \"dport\" (R's port)".into());
        }
        if sport == Some(0) || dport == Some(0) {
            return Err("ports are 1..65535".into());
        }
        Ok(Selection::Flow { proto, sport, dport })
    }

    /// The iptables match for this selection (after `-d R/32`). The ACK capture limits the
    /// length, so data segments never wake the daemon; an application flow's rule takes every
    /// datagram of the flow, so one that cannot be multiplexed (too large, SYN/FIN/RST) is
    /// seen and sent only after the flow's held datagrams (per-flow order).
    pub fn rule_match(&self, threshold: u16) -> Vec<String> {
        let s = |v: &str| v.to_string();
        match *self {
            Selection::Acks => vec![
                s("-p"),
                s("tcp"),
                s("--tcp-flags"),
                s("SYN,FIN,RST,ACK"),
                s("ACK"),
                s("-m"),
                s("length"),
                s("--length"),
                format!("{MIN_TCP_DATAGRAM}:{threshold}"),
            ],
            Selection::Flow { proto, sport, dport } => {
                let mut m = vec![s("-p"), s(proto.name())];
                if let Some(p) = sport {
                    m.extend([s("--sport"), p.to_string()]);
                }
                if let Some(p) = dport {
                    m.extend([s("--dport"), p.to_string()]);
                }
                m
            }
        }
    }

    /// Whether `datagram` (a checked IPv4 datagram toward R) belongs to this selection.
    pub fn matches(&self, datagram: &[u8]) -> bool {
        match *self {
            // The rule already chose: whatever reached the queue for R and no flow claimed.
            Selection::Acks => true,
            Selection::Flow { proto, sport, dport } => {
                let Ok(ip) = ipv4::Packet::new_checked(datagram) else {
                    return false;
                };
                let p = ip.payload();
                if ip.protocol() != proto.number() || ip.frag_offset() != 0 || p.len() < 4 {
                    return false;
                }
                let (s, d) = (
                    u16::from_be_bytes([p[0], p[1]]),
                    u16::from_be_bytes([p[2], p[3]]),
                );
                sport.is_none_or(|x| x == s) && dport.is_none_or(|x| x == d)
            }
        }
    }

    /// Whether a datagram of this selection is multiplexed (`Ok`) or goes out as it is.
    pub fn check(&self, datagram: &[u8], threshold: u16) -> Result<(), PassReason> {
        match self {
            Selection::Acks => select::check(datagram, threshold),
            Selection::Flow { proto, .. } => select::check_flow(datagram, threshold, *proto),
        }
    }

    /// The smallest size threshold that makes sense for this selection.
    pub fn min_threshold(&self) -> u16 {
        match self {
            Selection::Acks => MIN_TCP_DATAGRAM,
            Selection::Flow { proto, .. } => proto.min_datagram(),
        }
    }

    /// Words for logs and replies: `acks`, `udp sport 5000`, `tcp sport 4000 dport 80`.
    pub fn describe(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selection::Acks => f.write_str("acks"),
            Selection::Flow { proto, sport, dport } => {
                f.write_str(proto.name())?;
                if let Some(p) = sport {
                    write!(f, " sport {p}")?;
                }
                if let Some(p) = dport {
                    write!(f, " dport {p}")?;
                }
                Ok(())
            }
        }
    }
}

/// The first of `selections` (application flows first) that `datagram` belongs to.
pub fn classify<'a, I>(selections: I, datagram: &[u8]) -> Option<&'a Selection>
where
    I: IntoIterator<Item = &'a Selection>,
{
    selections.into_iter().find(|s| s.matches(datagram))
}

/// The receiver a queued datagram is addressed to.
pub fn destination(datagram: &[u8]) -> Option<Ipv4Addr> {
    datagram
        .get(16..20)
        .map(|b| Ipv4Addr::new(b[0], b[1], b[2], b[3]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpkt::{self, C1, R};

    #[test]
    fn flows_are_named_by_ports() {
        let f = Selection::flow(FlowProto::Udp, Some(4000), None).unwrap();
        assert!(f.matches(&testpkt::udp(C1, R, b"x")));
        assert!(!Selection::flow(FlowProto::Udp, Some(4001), None)
            .unwrap()
            .matches(&testpkt::udp(C1, R, b"x")));
        assert!(!Selection::flow(FlowProto::Tcp, Some(4000), None)
            .unwrap()
            .matches(&testpkt::udp(C1, R, b"x")));
        let t = Selection::flow(FlowProto::Tcp, None, Some(8000)).unwrap();
        assert!(t.matches(&testpkt::tcp_ack(C1, R, 64, 1)));
        assert!(Selection::flow(FlowProto::Udp, None, None).is_err());
        assert!(Selection::flow(FlowProto::Udp, Some(0), None).is_err());
        assert_eq!(f.to_string(), "udp sport 4000");
        assert_eq!(t.to_string(), "tcp dport 8000");
        // A flow's rule takes every datagram of it: the threshold is applied in user space.
        assert_eq!(f.rule_match(200).join(" "), "-p udp --sport 4000");
        assert_eq!(t.rule_match(90).join(" "), "-p tcp --dport 8000");
        // Application flows are tried before the ACK capture.
        let mut all = vec![Selection::Acks, t];
        all.sort();
        assert_eq!(classify(&all, &testpkt::tcp_ack(C1, R, 64, 1)), Some(&t));
        assert_eq!(
            classify(&all, &testpkt::udp(C1, R, b"x")),
            Some(&Selection::Acks)
        );
    }

    #[test]
    fn a_flows_small_datagrams_are_taken_with_data() {
        let u = Selection::flow(FlowProto::Udp, Some(4000), None).unwrap();
        assert_eq!(u.check(&testpkt::udp(C1, R, &[1; 40]), 128), Ok(()));
        assert_eq!(
            u.check(&testpkt::udp(C1, R, &[1; 200]), 128),
            Err(PassReason::TooLarge)
        );
        let t = Selection::flow(FlowProto::Tcp, Some(40000), None).unwrap();
        let data = testpkt::tcp(C1, R, 64, 1, 0x18, b"GET /");
        assert_eq!(t.check(&data, 128), Ok(()), "a small data segment");
        assert_eq!(
            t.check(&testpkt::tcp(C1, R, 64, 1, 0x11, &[]), 128),
            Err(PassReason::Control),
            "FIN goes as it is"
        );
        assert_eq!(
            Selection::Acks.check(&data, 128),
            Err(PassReason::NotPureAck)
        );
    }
}
