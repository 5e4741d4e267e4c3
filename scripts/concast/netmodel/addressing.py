"""The address plan: every address, MAC and OpenFlow port number, derived only from
declaration order (so the same description always gives the same network).

    router k (k-th router declared, 1..254)
        router ID      10.0.0.k/32           source of CSP and merged datagrams
        MAC            02:cc:0a:00:00:k      one MAC for all its ports
    host j on router k (j-th host of that router, 1..254)
        subnet         10.k.j.0/24
        host           10.k.j.2               MAC 02:cc:0a:k:j:02
        gateway        10.k.j.1               the router's address on that port
    router-router link L (L-th link declared, from 0)
        subnet         172.16.0.0/16 + 4L, a /30: first-named router .1, other .2
    CPU port of router k
        switch end     MAC 02:cc:0a:00:fe:k, OpenFlow port 1000
        routerd end    MAC 02:cc:0a:00:ff:k

Ports of a router are numbered 1, 2, ... in the order its hosts and links were declared.
Root-namespace veth ends get MACs derived from their addresses, never equal to a
router MAC, so the root namespace's IP stack ignores transit frames (PACKET_OTHERHOST).
"""
from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network

from concast.netmodel import naming
from concast.netmodel.model import Topology

ROUTER_ID_NET = IPv4Network("10.0.0.0/24")
LINK_NET = IPv4Network("172.16.0.0/16")
MAX_ROUTERS = 254
MAX_HOSTS_PER_ROUTER = 254


def mac_of(first: int, addr: IPv4Address) -> str:
    """02:<first>:<the four address bytes>: readable, and unique per address."""
    return ":".join(f"{b:02x}" for b in (0x02, first, *addr.packed))


@dataclass(frozen=True)
class Port:
    ofport: int
    peer: str                   # host or router name at the other end
    peer_is_host: bool
    address: IPv4Address        # this router's address on the port
    subnet: IPv4Network
    peer_address: IPv4Address
    peer_mac: str               # where frames out of this port are addressed
    mac: str                    # MAC of the veth end that is the switch port


@dataclass(frozen=True)
class RouterPlan:
    name: str
    index: int
    capable: bool
    router_id: IPv4Address
    mac: str
    cpu_switch_mac: str
    cpu_routerd_mac: str
    ports: tuple[Port, ...]

    def own_addresses(self) -> list[IPv4Address]:
        return [self.router_id, *(p.address for p in self.ports)]

    def port(self, ofport: int) -> Port:
        return next(p for p in self.ports if p.ofport == ofport)


@dataclass(frozen=True)
class HostPlan:
    name: str
    router: str
    ip: IPv4Address
    gateway: IPv4Address
    subnet: IPv4Network
    mac: str
    gateway_mac: str            # the router's MAC (static ARP entry on the host)
    ofport: int                 # router port the host hangs off
    params: dict


@dataclass(frozen=True)
class LinkPlan:
    a: str
    b: str
    subnet: IPv4Network
    addr_a: IPv4Address
    addr_b: IPv4Address
    port_a: int
    port_b: int
    cost: int
    params: dict


@dataclass(frozen=True)
class Plan:
    routers: dict[str, RouterPlan]
    hosts: dict[str, HostPlan]
    links: list[LinkPlan]

    def address_of(self, name: str) -> IPv4Address:
        """A host's address or a router's router ID."""
        if name in self.hosts:
            return self.hosts[name].ip
        return self.routers[name].router_id


def router_mac(index: int) -> str:
    return mac_of(0xCC, ROUTER_ID_NET[index])


def plan(topo: Topology) -> Plan:
    if len(topo.routers) > MAX_ROUTERS:
        raise ValueError(f"at most {MAX_ROUTERS} routers")
    index = {name: k for k, name in enumerate(topo.routers, start=1)}
    ports: dict[str, list[Port]] = {name: [] for name in topo.routers}
    hosts: dict[str, HostPlan] = {}
    links: list[LinkPlan] = []
    hosts_on: dict[str, int] = {name: 0 for name in topo.routers}

    def next_ofport(router: str) -> int:
        n = len(ports[router]) + 1
        if n >= naming.CPU_OFPORT:
            raise ValueError(f"router {router}: too many ports")
        return n

    for kind, ref in topo.attachments:
        if kind == "host":
            h = topo.hosts[ref]
            k = index[h.router]
            hosts_on[h.router] += 1
            j = hosts_on[h.router]
            if j > MAX_HOSTS_PER_ROUTER:
                raise ValueError(f"router {h.router}: at most {MAX_HOSTS_PER_ROUTER} hosts")
            subnet = IPv4Network(f"10.{k}.{j}.0/24")
            gw, ip = subnet[1], subnet[2]
            ofport = next_ofport(h.router)
            hosts[h.name] = HostPlan(h.name, h.router, ip, gw, subnet, mac_of(0xCC, ip),
                                     router_mac(k), ofport, h.params)
            ports[h.router].append(Port(ofport, h.name, True, gw, subnet, ip,
                                        mac_of(0xCC, ip), mac_of(0xCC, gw)))
        else:
            link = topo.links[ref]
            subnet = IPv4Network((int(LINK_NET.network_address) + 4 * ref, 30))
            if not subnet.subnet_of(LINK_NET):
                raise ValueError("too many router-router links")
            addr_a, addr_b = subnet[1], subnet[2]
            pa = next_ofport(link.a)
            ports[link.a].append(Port(pa, link.b, False, addr_a, subnet, addr_b,
                                      router_mac(index[link.b]), mac_of(0xCC, addr_a)))
            pb = next_ofport(link.b)
            ports[link.b].append(Port(pb, link.a, False, addr_b, subnet, addr_a,
                                      router_mac(index[link.a]), mac_of(0xCC, addr_b)))
            links.append(LinkPlan(link.a, link.b, subnet, addr_a, addr_b, pa, pb,
                                  link.cost, link.params))

    routers = {}
    for name, spec in topo.routers.items():
        k = index[name]
        rid = ROUTER_ID_NET[k]
        routers[name] = RouterPlan(
            name, k, spec.capable, rid, router_mac(k),
            mac_of(0xCC, IPv4Address(f"10.0.254.{k}")),
            mac_of(0xCC, IPv4Address(f"10.0.255.{k}")),
            tuple(ports[name]))
    return Plan(routers, hosts, links)


def describe(plan: Plan, tag: str | None = None) -> str:
    """The address plan as a table (with `tag`: the bridge names too)."""
    lines = []
    for r in plan.routers.values():
        kind = "capable" if r.capable else "oblivious"
        br = f"  node {naming.node(tag, r.name)}" if tag else ""
        lines.append(f"router {r.name:<7} {kind:<9} id {str(r.router_id):<12} mac {r.mac}{br}")
        for p in r.ports:
            addr = f"{p.address}/{p.subnet.prefixlen}"
            lines.append(f"    port {p.ofport:<4} {addr:<17} -> {p.peer} ({p.peer_address})")
    for h in plan.hosts.values():
        lines.append(f"host   {h.name:<7} {h.ip}/{h.subnet.prefixlen} via {h.gateway} "
                     f"(router {h.router} port {h.ofport}) mac {h.mac}")
    return "\n".join(lines)
