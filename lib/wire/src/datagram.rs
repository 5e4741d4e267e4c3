//! [`classify`]: what an arriving IPv4 datagram is, checked in the spec's order.
//!
//! The order matters because the first failing check names the error and every concast
//! parser must report the same name: the IPv4 header (section 1.2), the options walk
//! (section 1.1, always the whole area, whatever the protocol), then the CSP checks
//! (section 2.1) for protocol 253 or the MplexPkt checks (section 3) for protocol 254.

use core::net::Ipv4Addr;

use crate::error::Error;
use crate::{csp, ipv4, mplex, options};

/// A concast flow `(R, G)`: the one type for it in every crate (CSP state, merge engine,
/// routerd, hostd). Shown as `(R, G)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId {
    /// `R`, the IPv4 destination.
    pub receiver: Ipv4Addr,
    /// `G`, from the Concast ID option.
    pub group: u32,
}

impl FlowId {
    pub const fn new(receiver: Ipv4Addr, group: u32) -> FlowId {
        FlowId { receiver, group }
    }
}

impl core::fmt::Display for FlowId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "({}, {})", self.receiver, self.group)
    }
}

/// A well-formed datagram, by what concast does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datagram<'a> {
    /// Not concast's business: no Concast ID option (before any EOL), not protocol 253/254.
    Ipv4(ipv4::Packet<&'a [u8]>),
    /// A concast datagram of flow `(ip.dst_addr(), group)`; its payload is the flow's.
    Concast {
        ip: ipv4::Packet<&'a [u8]>,
        group: u32,
    },
    /// A CSP message (protocol 253 with Router Alert). A Concast ID option on it is ignored.
    Csp {
        ip: ipv4::Packet<&'a [u8]>,
        message: csp::Message<'a>,
    },
    /// An MplexPkt (protocol 254 with a Concast ID option), records for `ip.dst_addr()`.
    Mplex {
        ip: ipv4::Packet<&'a [u8]>,
        group: u32,
        mplex: mplex::Packet<&'a [u8]>,
    },
}

/// The variant of a [`Datagram`], named as the test vectors' `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Ipv4,
    Concast,
    Csp,
    Mplex,
}

impl Kind {
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Ipv4 => "ipv4",
            Kind::Concast => "concast",
            Kind::Csp => "csp",
            Kind::Mplex => "mplex",
        }
    }
}

impl<'a> Datagram<'a> {
    /// The IPv4 header view, whatever the kind.
    pub fn ip(&self) -> &ipv4::Packet<&'a [u8]> {
        match self {
            Datagram::Ipv4(ip)
            | Datagram::Concast { ip, .. }
            | Datagram::Csp { ip, .. }
            | Datagram::Mplex { ip, .. } => ip,
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Datagram::Ipv4(_) => Kind::Ipv4,
            Datagram::Concast { .. } => Kind::Concast,
            Datagram::Csp { .. } => Kind::Csp,
            Datagram::Mplex { .. } => Kind::Mplex,
        }
    }

    /// The concast flow this datagram travels in (concast datagrams and MplexPkts). A CSP
    /// message is *about* a flow (see [`csp::Message::group`]) but does not travel in it.
    pub fn flow(&self) -> Option<FlowId> {
        match self {
            Datagram::Concast { ip, group } | Datagram::Mplex { ip, group, .. } => {
                Some(FlowId::new(ip.dst_addr(), *group))
            }
            Datagram::Ipv4(_) | Datagram::Csp { .. } => None,
        }
    }
}

/// Checks `bytes` (one IPv4 datagram, possibly followed by link padding) and tells what it is.
///
/// Allocation-free and panic-free on any input; every view in the result covers only `bytes`.
pub fn classify(bytes: &[u8]) -> Result<Datagram<'_>, Error> {
    let ip = ipv4::Packet::new_unchecked(bytes);
    ip.check_len()?;
    let opts = options::scan(&bytes[ip.options_range()])?;
    let payload = &bytes[ip.payload_range()];
    // A fragment is never checked as CSP or MplexPkt: concast does not reassemble (spec 1.2).
    let protocol = if ip.is_fragment() { None } else { Some(ip.protocol()) };
    match protocol {
        Some(ipv4::protocol::CSP) => {
            if !opts.router_alert {
                return Err(Error::CspMissingRouterAlert);
            }
            let message = csp::Message::parse(payload)?;
            Ok(Datagram::Csp { ip, message })
        }
        Some(ipv4::protocol::MPLEX) => {
            let group = opts.concast_group.ok_or(Error::MplexMissingConcastOption)?;
            let mplex = mplex::Packet::new_checked(payload)?;
            Ok(Datagram::Mplex { ip, group, mplex })
        }
        _ => Ok(match opts.concast_group {
            Some(group) => Datagram::Concast { ip, group },
            None => Datagram::Ipv4(ip),
        }),
    }
}
