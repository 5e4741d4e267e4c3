//! Which captured datagrams are multiplexed (docs/protocol.md section 3.4), checked again in
//! user space for everything the iptables rule cannot express: the rule already limits the
//! queue to TCP segments toward R with only ACK among SYN/FIN/RST and a total length within
//! the threshold, but it cannot see IPv4 options, a first fragment, or whether the segment
//! carries data. Whatever fails here is accepted unchanged.

use std::net::Ipv4Addr;

use concast_wire::ipv4;

/// Smallest IPv4 datagram carrying a TCP header.
pub const MIN_TCP_DATAGRAM: u16 = 40;
/// Smallest IPv4 datagram carrying a UDP header.
pub const MIN_UDP_DATAGRAM: u16 = 28;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FlowProto {
    Tcp,
    Udp,
}

impl FlowProto {
    pub fn parse(text: &str) -> Result<FlowProto, String> {
        match text {
            "tcp" | "6" => Ok(FlowProto::Tcp),
            "udp" | "17" => Ok(FlowProto::Udp),
            other => Err(format!("\"proto\": {other:?} is not \"udp\" or \"tcp\"")),
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            FlowProto::Tcp => "tcp",
            FlowProto::Udp => "udp",
        }
    }

    pub const fn number(self) -> u8 {
        match self {
            FlowProto::Tcp => ipv4::protocol::TCP,
            FlowProto::Udp => ipv4::protocol::UDP,
        }
    }

    /// The smallest total length a datagram of this protocol has.
    pub const fn min_datagram(self) -> u16 {
        match self {
            FlowProto::Tcp => MIN_TCP_DATAGRAM,
            FlowProto::Udp => MIN_UDP_DATAGRAM,
        }
    }
}

/// Why a queued datagram goes out as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PassReason {
    /// Not a well-formed IPv4 datagram (or the kernel copied only part of it).
    Malformed,
    Fragment,
    /// Carries an IPv4 option (other than NOP/EOL padding).
    Options,
    /// To a multicast, broadcast or otherwise non-unicast address.
    NotUnicast,
    /// Longer than the flow's size threshold.
    TooLarge,
    /// Not a pure TCP ACK: data, SYN/FIN/RST, or not TCP at all.
    NotPureAck,
    /// A TCP segment of an application flow with SYN, FIN or RST: connection set-up and
    /// tear-down go as they are.
    Control,
    /// No flow is enabled toward its destination.
    NoFlow,
}

impl PassReason {
    pub const fn name(self) -> &'static str {
        match self {
            PassReason::Malformed => "malformed",
            PassReason::Fragment => "fragment",
            PassReason::Options => "options",
            PassReason::NotUnicast => "not_unicast",
            PassReason::TooLarge => "too_large",
            PassReason::NotPureAck => "not_pure_ack",
            PassReason::Control => "syn_fin_rst",
            PassReason::NoFlow => "no_flow",
        }
    }
}

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

/// True for a TCP segment with ACK, without SYN, FIN or RST, and without data (TCP options
/// such as timestamps and SACK blocks are part of the header and fine).
pub fn is_pure_ack(segment: &[u8]) -> bool {
    let (Some(&offset), Some(&flags)) = (segment.get(12), segment.get(13)) else {
        return false;
    };
    let header_len = usize::from(offset >> 4) * 4;
    header_len >= 20
        && header_len == segment.len()
        && flags & (TCP_SYN | TCP_FIN | TCP_RST) == 0
        && flags & TCP_ACK != 0
}

fn is_unicast(a: Ipv4Addr) -> bool {
    !(a.is_multicast() || a.is_broadcast() || a.is_unspecified() || a.octets()[0] >= 240)
}

/// Whether `datagram` may be multiplexed under a size threshold of `threshold` bytes of
/// total length; `Ok` means take it.
pub fn check(datagram: &[u8], threshold: u16) -> Result<(), PassReason> {
    let ip = plain_small(datagram, threshold)?;
    if ip.protocol() != ipv4::protocol::TCP || !is_pure_ack(ip.payload()) {
        return Err(PassReason::NotPureAck);
    }
    Ok(())
}

/// The same for a datagram of an application flow of protocol `proto`: any small datagram
/// is taken, TCP segments with data too, but not SYN, FIN or RST.
pub fn check_flow(datagram: &[u8], threshold: u16, proto: FlowProto) -> Result<(), PassReason> {
    let ip = plain_small(datagram, threshold)?;
    if proto == FlowProto::Tcp {
        let flags = ip.payload().get(13).ok_or(PassReason::Malformed)?;
        if flags & (TCP_SYN | TCP_FIN | TCP_RST) != 0 {
            return Err(PassReason::Control);
        }
    }
    Ok(())
}

/// Section 3.4's checks every multiplexed datagram passes: well-formed, unfragmented, no
/// options, unicast, within the threshold.
fn plain_small(datagram: &[u8], threshold: u16) -> Result<ipv4::Packet<&[u8]>, PassReason> {
    let ip = ipv4::Packet::new_checked(datagram).map_err(|_| PassReason::Malformed)?;
    let options = concast_wire::options::scan(ip.options()).map_err(|_| PassReason::Malformed)?;
    if ip.is_fragment() {
        return Err(PassReason::Fragment);
    }
    if options.has_options {
        return Err(PassReason::Options);
    }
    if !is_unicast(ip.dst_addr()) {
        return Err(PassReason::NotUnicast);
    }
    if ip.total_len() > threshold {
        return Err(PassReason::TooLarge);
    }
    Ok(ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpkt::{self, C1, R};
    use concast_wire::ipv4::Params;

    #[test]
    fn pure_acks_are_taken() {
        assert_eq!(check(&testpkt::tcp_ack(C1, R, 64, 1), 128), Ok(()));
        // PSH on an empty segment is still a pure ACK.
        assert_eq!(check(&testpkt::tcp(C1, R, 64, 1, 0x18, &[]), 128), Ok(()));
    }

    #[test]
    fn everything_else_passes_with_its_reason() {
        let t = 128;
        assert_eq!(
            check(&testpkt::tcp(C1, R, 64, 1, 0x18, b"GET /"), t),
            Err(PassReason::NotPureAck)
        );
        for flags in [0x02, 0x12, 0x11, 0x14, 0x04, 0x00] {
            assert_eq!(
                check(&testpkt::tcp(C1, R, 64, 1, flags, &[]), t),
                Err(PassReason::NotPureAck),
                "flags {flags:#x}"
            );
        }
        assert_eq!(
            check(&testpkt::udp(C1, R, b"x"), t),
            Err(PassReason::NotPureAck)
        );
        assert_eq!(
            check(&testpkt::tcp_ack(C1, R, 64, 1), 51),
            Err(PassReason::TooLarge)
        );
        assert_eq!(
            check(&testpkt::tcp_ack(C1, Ipv4Addr::new(224, 0, 0, 9), 64, 1), t),
            Err(PassReason::NotUnicast)
        );
        assert_eq!(
            check(&testpkt::tcp_ack(C1, Ipv4Addr::BROADCAST, 64, 1), t),
            Err(PassReason::NotUnicast)
        );
        assert_eq!(check(&[0x45, 0, 0], t), Err(PassReason::Malformed));

        let ack = testpkt::tcp_ack(C1, R, 64, 1);
        let seg = &ack[20..];
        let mut buf = [0u8; 128];
        let frag = Params {
            more_frags: true,
            ..Params::new(C1, R, 6)
        };
        let n = ipv4::build(&mut buf, &frag, &[], seg).unwrap();
        assert_eq!(check(&buf[..n], t), Err(PassReason::Fragment));
        let n = ipv4::build(&mut buf, &Params::new(C1, R, 6), &[0x94, 4, 0, 0], seg).unwrap();
        assert_eq!(check(&buf[..n], t), Err(PassReason::Options));
        // NOP/EOL padding alone is not an option (section 3.4).
        let n = ipv4::build(&mut buf, &Params::new(C1, R, 6), &[1, 1, 1, 0], seg).unwrap();
        assert_eq!(check(&buf[..n], t), Ok(()));
    }
}
