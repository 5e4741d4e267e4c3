//! The MTU of the link a route toward an address leaves by: what a CSP node needs for the
//! path MTU it learns and advertises (docs/protocol.md 2.3). The route is the longest-prefix
//! match among this network namespace's IPv4 routes (`/proc/net/route`), the MTU is its
//! interface's (`SIOCGIFMTU` on a socket, so always this namespace's interface: a process
//! moved into a namespace may still see another one's `/sys`), lowered by a route's own MTU
//! when it has one. Read afresh on every call: CSP asks only when a JOIN or JOIN_ACK goes by.

use std::net::Ipv4Addr;

/// One line of `/proc/net/route`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRoute {
    pub iface: String,
    pub dest: Ipv4Addr,
    pub mask: Ipv4Addr,
    pub metric: u32,
    /// The route's own MTU (0 = the interface's).
    pub mtu: u32,
}

const RTF_UP: u32 = 0x1;

/// The up routes of a `/proc/net/route` text. Addresses there are the raw 32-bit words in
/// host byte order, printed in hex, so their bytes in memory order are the address.
pub fn parse_routes(text: &str) -> Vec<KernelRoute> {
    let addr = |h: &str| {
        u32::from_str_radix(h, 16)
            .ok()
            .map(|v| Ipv4Addr::from(v.to_ne_bytes()))
    };
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 9 {
                return None;
            }
            let flags = u32::from_str_radix(f[3], 16).ok()?;
            (flags & RTF_UP != 0).then_some(())?;
            Some(KernelRoute {
                iface: f[0].to_string(),
                dest: addr(f[1])?,
                mask: addr(f[7])?,
                metric: f[6].parse().ok()?,
                mtu: f[8].parse().ok()?,
            })
        })
        .collect()
}

/// The route the kernel would pick toward `to`: longest mask, then lowest metric.
pub fn best_route(routes: &[KernelRoute], to: Ipv4Addr) -> Option<&KernelRoute> {
    let to = u32::from(to);
    routes
        .iter()
        .filter(|r| to & u32::from(r.mask) == u32::from(r.dest) & u32::from(r.mask))
        .max_by_key(|r| (u32::from(r.mask).count_ones(), std::cmp::Reverse(r.metric)))
}

/// An interface's MTU in this network namespace, at most 65535 (loopback says 65536; no IPv4
/// datagram is longer). None if there is no such interface.
pub fn iface_mtu(iface: &str) -> Option<u16> {
    let name = iface.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return None;
    }
    // SAFETY: a plain socket, an ifreq with a NUL-terminated name, and the fd closed below.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return None;
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (d, s) in req.ifr_name.iter_mut().zip(name) {
            *d = *s as libc::c_char;
        }
        let ok = libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) == 0;
        libc::close(fd);
        ok.then(|| req.ifr_ifru.ifru_mtu.clamp(0, 65_535) as u16)
    }
}

/// The MTU of the link this namespace's route toward `to` leaves by (None: no route, or
/// no such interface).
pub fn route_mtu(to: Ipv4Addr) -> Option<u16> {
    let text = std::fs::read_to_string("/proc/net/route").ok()?;
    let routes = parse_routes(&text);
    let r = best_route(&routes, to)?;
    let mtu = iface_mtu(&r.iface)?;
    Some(match r.mtu {
        0 => mtu,
        m => mtu.min(m.min(65_535) as u16),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // As the kernel prints them on x86 (little-endian): 10.0.0.0/8 via r1-eth1, the more
    // specific 10.0.9.0/24 via r1-eth2 (route MTU 1200), a default route, and a route
    // that is down.
    const TABLE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        r1-eth1\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n\
        r1-eth2\t0009000A\t0100000A\t0003\t0\t0\t0\t00FFFFFF\t1200\t0\t0\n\
        r1-eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
        r1-eth3\t0005000A\t00000000\t0000\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";

    #[test]
    fn routes_are_read_in_memory_byte_order_and_down_ones_skipped() {
        if cfg!(target_endian = "big") {
            return; // the table above is little-endian
        }
        let routes = parse_routes(TABLE);
        assert_eq!(routes.len(), 3);
        assert_eq!(
            (routes[1].dest, routes[1].mask),
            (Ipv4Addr::new(10, 0, 9, 0), Ipv4Addr::new(255, 255, 255, 0))
        );
        assert_eq!(routes[1].mtu, 1200);
    }

    #[test]
    fn the_longest_prefix_wins() {
        if cfg!(target_endian = "big") {
            return;
        }
        let routes = parse_routes(TABLE);
        let via = |a: [u8; 4]| best_route(&routes, Ipv4Addr::from(a)).map(|r| r.iface.as_str());
        assert_eq!(via([10, 0, 9, 9]), Some("r1-eth2"));
        assert_eq!(
            via([10, 0, 5, 1]),
            Some("r1-eth1"),
            "the down /24 is not used"
        );
        assert_eq!(via([192, 168, 1, 7]), Some("r1-eth0"));
        assert_eq!(
            best_route(&routes[..2], Ipv4Addr::new(192, 168, 1, 7)),
            None
        );
    }

    #[test]
    fn loopback_reads_as_at_most_65535() {
        assert_eq!(iface_mtu("lo").map(|m| m >= 1500), Some(true));
        assert_eq!(iface_mtu("no-such-if"), None);
        assert_eq!(iface_mtu("a-name-longer-than-ifnamsiz"), None);
    }
}
