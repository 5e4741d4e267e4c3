//! Direct egress: routerd sends the datagrams it writes straight out of the router's port
//! toward their next hop, as a P4 packet-out names its egress port, instead of handing them
//! back to the data plane through the CPU port. On userspace OVS that second pass through
//! the CPU port costs about 100 µs (docs/benchmarks.md); this path skips it.
//!
//! [`Table`] is the forwarding decision (longest-prefix match, TTL decrement, MAC rewrite),
//! pure and tested here; [`Egress`] adds one send-only AF_PACKET socket per port.

use std::net::Ipv4Addr;

use concast_wire::ipv4::Packet;

use crate::config::{self, Prefix};
use crate::cpu_port::{parse_mac, CpuPort};

const ETH_HEADER: usize = 14;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub net: Prefix,
    /// Index of the port (in the order the ports were given).
    pub port: usize,
    pub next_hop_mac: [u8; 6],
}

/// What became of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Rewritten in place for this port.
    Port(usize),
    /// TTL would reach 0: dropped, as the data plane would.
    TtlExpired,
    /// No route (or not IPv4): the caller sends it through the CPU port.
    NotHere,
}

/// The routes of one router, longest prefix first.
#[derive(Debug, Default, Clone)]
pub struct Table {
    routes: Vec<Route>,
    router_mac: [u8; 6],
}

impl Table {
    pub fn new(mut routes: Vec<Route>, router_mac: [u8; 6]) -> Table {
        routes.sort_by(|a, b| b.net.len.cmp(&a.net.len));
        Table { routes, router_mac }
    }

    pub fn lookup(&self, dst: Ipv4Addr) -> Option<&Route> {
        self.routes.iter().find(|r| r.net.covers(dst))
    }

    /// Forwards `frame` (Ethernet + IPv4, as routerd writes it) like the data plane would:
    /// TTL − 1 with the checksum updated, source MAC = the router, destination = next hop.
    pub fn forward(&self, frame: &mut [u8]) -> Verdict {
        if frame.len() < ETH_HEADER + 20 || frame[12..14] != [0x08, 0x00] {
            return Verdict::NotHere;
        }
        let Ok(mut ip) = Packet::new_checked(&mut frame[ETH_HEADER..]) else { return Verdict::NotHere };
        let Some(route) = self.lookup(ip.dst_addr()) else { return Verdict::NotHere };
        if ip.ttl() <= 1 {
            return Verdict::TtlExpired;
        }
        let (port, mac) = (route.port, route.next_hop_mac);
        let ttl = ip.ttl() - 1;
        ip.set_ttl(ttl);
        ip.fill_checksum();
        frame[0..6].copy_from_slice(&mac);
        frame[6..12].copy_from_slice(&self.router_mac);
        Verdict::Port(port)
    }
}

/// The table of the control plane's `egress_routes` (or `port_routes`) from the typed
/// config. Returns the table and the port interfaces, in the order the routes' `port`
/// indices refer to.
pub fn parse_routes(list: &[config::Route], router_mac: [u8; 6]) -> Result<(Table, Vec<String>), String> {
    let mut ifaces: Vec<String> = Vec::new();
    let mut routes = Vec::new();
    for r in list {
        let port = match ifaces.iter().position(|i| *i == r.iface) {
            Some(p) => p,
            None => {
                ifaces.push(r.iface.clone());
                ifaces.len() - 1
            }
        };
        let next_hop_mac = parse_mac(&r.mac).map_err(|e| format!("egress route {}: {e}", r.prefix))?;
        routes.push(Route { net: r.net()?, port, next_hop_mac });
    }
    Ok((Table::new(routes, router_mac), ifaces))
}

/// The table plus a send-only socket per port, with frames queued per port and sent in
/// batches at `flush`.
pub struct Egress {
    table: Table,
    ports: Vec<CpuPort>,
    queues: Vec<Vec<Vec<u8>>>,
    pub sent: u64,
    pub ttl_expired: u64,
    pub send_errors: u64,
}

impl Egress {
    pub fn open(table: Table, ifaces: &[String]) -> Result<Egress, String> {
        let ports = ifaces
            .iter()
            .map(|i| CpuPort::open_tx(i).map_err(|e| format!("cannot open egress port {i}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Egress { table, queues: vec![Vec::new(); ports.len()], ports, sent: 0, ttl_expired: 0, send_errors: 0 })
    }

    /// Queues `frame` for its port; false when it is not ours to send (use the CPU port).
    pub fn take(&mut self, frame: &[u8]) -> bool {
        let mut f = frame.to_vec();
        match self.table.forward(&mut f) {
            Verdict::Port(p) => {
                self.queues[p].push(f);
                true
            }
            Verdict::TtlExpired => {
                self.ttl_expired += 1;
                true
            }
            Verdict::NotHere => false,
        }
    }

    pub fn flush(&mut self) -> Result<(), String> {
        let mut first_error = None;
        for (port, q) in self.ports.iter().zip(self.queues.iter_mut()) {
            if q.is_empty() {
                continue;
            }
            match port.send_batch(q) {
                Ok(n) => self.sent += n as u64,
                Err(e) => {
                    self.send_errors += q.len() as u64;
                    first_error.get_or_insert(e.to_string());
                }
            }
            q.clear();
        }
        first_error.map_or(Ok(()), Err)
    }

    pub fn ports(&self) -> usize {
        self.ports.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use concast_wire::build;
    use concast_wire::ipv4::Params;

    const ROUTER_MAC: [u8; 6] = [2, 0xcc, 10, 0, 0, 1];

    fn table() -> Table {
        let r = |p: &str, port, last| Route { net: Prefix::parse(p).unwrap(), port, next_hop_mac: [2, 0, 0, 0, 0, last] };
        Table::new(vec![r("10.0.0.0/8", 0, 1), r("10.1.1.0/24", 1, 2), r("10.1.1.7/32", 2, 3)], ROUTER_MAC)
    }

    fn frame(dst: &str, ttl: u8) -> Vec<u8> {
        let mut buf = vec![0; 64];
        let mut p = Params::new("10.3.1.2".parse().unwrap(), dst.parse().unwrap(), 17);
        p.ttl = ttl;
        let n = build::concast(&mut buf, &p, 7, &[1, 2, 3, 4]).unwrap();
        let mut f = ROUTER_MAC.to_vec();
        f.extend_from_slice(&[2, 0, 0, 0, 0xff, 1, 0x08, 0x00]);
        f.extend_from_slice(&buf[..n]);
        f
    }

    #[test]
    fn the_longest_prefix_wins() {
        let t = table();
        let port = |d: &str| t.lookup(d.parse().unwrap()).map(|r| r.port);
        assert_eq!((port("10.1.1.7"), port("10.1.1.8"), port("10.9.9.9"), port("192.168.0.1")), (Some(2), Some(1), Some(0), None));
    }

    #[test]
    fn forwarding_decrements_ttl_fixes_the_checksum_and_rewrites_macs() {
        let mut f = frame("10.1.1.8", 64);
        let options_before = Packet::new_checked(&f[14..]).unwrap().options().to_vec();
        assert_eq!(table().forward(&mut f), Verdict::Port(1));
        let ip = Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
        assert_eq!(ip.options(), &options_before[..], "the Concast ID option is kept");
        assert_eq!((&f[0..6], &f[6..12]), (&[2, 0, 0, 0, 0, 2][..], &ROUTER_MAC[..]));
    }

    #[test]
    fn ttl_one_is_dropped_and_unknown_destinations_go_back() {
        assert_eq!(table().forward(&mut frame("10.1.1.8", 1)), Verdict::TtlExpired);
        assert_eq!(table().forward(&mut frame("192.168.0.1", 64)), Verdict::NotHere);
        assert_eq!(table().forward(&mut vec![0; 20]), Verdict::NotHere);
    }

    #[test]
    fn routes_parse_from_the_config_and_share_ports() {
        let v: Vec<config::Route> = serde_json::from_value(serde_json::json!([
            {"prefix": "10.1.1.0/24", "iface": "p2", "mac": "02:00:00:00:00:02"},
            {"prefix": "10.2.0.0/16", "iface": "p3", "mac": "02:00:00:00:00:03"},
            {"prefix": "10.1.1.9/32", "iface": "p2", "mac": "02:00:00:00:00:02"},
        ]))
        .unwrap();
        let (t, ifaces) = parse_routes(&v, ROUTER_MAC).unwrap();
        assert_eq!(ifaces, vec!["p2", "p3"]);
        assert_eq!(t.lookup("10.2.3.4".parse().unwrap()).unwrap().port, 1);
        assert_eq!(t.lookup("10.1.1.9".parse().unwrap()).unwrap().net.len, 32);
        let route = |prefix: &str, mac: &str| config::Route { prefix: prefix.into(), iface: "p2".into(), mac: mac.into(), link_slot: None };
        let e = parse_routes(&[route("10.1.1.0/33", "02:00:00:00:00:02")], ROUTER_MAC).unwrap_err();
        assert!(e.contains("10.1.1.0/33") && e.contains("prefix length"), "{e}");
        let e = parse_routes(&[route("10.1.1.0/24", "x")], ROUTER_MAC).unwrap_err();
        assert!(e.starts_with("egress route 10.1.1.0/24:"), "{e}");
    }
}
