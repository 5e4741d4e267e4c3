"""Topology -> per-router IPv4 route tables, for any data plane.

Shortest paths by link cost (Dijkstra from every router; ties broken by neighbour
name then port, so routes are deterministic). Every router gets a route for every
host subnet, every router ID and every router-router link subnet, plus one local
/32 route per own address.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from ipaddress import IPv4Network

from concast.netmodel.addressing import Plan


@dataclass(frozen=True)
class Route:
    prefix: IPv4Network
    ofport: int | None          # None: one of the router's own addresses
    next_hop: str | None        # neighbour (host or router) the datagram goes to
    next_hop_mac: str | None


@dataclass(frozen=True)
class Hop:
    dist: int
    ofport: int                 # first port out of the source router
    neighbour: str


def _adjacency(plan: Plan) -> dict[str, list[tuple[int, str, int]]]:
    adj: dict[str, list[tuple[int, str, int]]] = {r: [] for r in plan.routers}
    for link in plan.links:
        adj[link.a].append((link.cost, link.b, link.port_a))
        adj[link.b].append((link.cost, link.a, link.port_b))
    for edges in adj.values():
        edges.sort(key=lambda e: (e[1], e[2]))
    return adj


def first_hops(plan: Plan, source: str) -> dict[str, Hop]:
    """For every router reachable from `source`: distance and first hop."""
    adj = _adjacency(plan)
    best: dict[str, Hop] = {}
    heap: list[tuple[int, str, int, str]] = []   # (dist, node, first port, first neighbour)
    for cost, nbr, port in adj[source]:
        heapq.heappush(heap, (cost, nbr, port, nbr))
    done = {source}
    while heap:
        dist, node, port, first = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        best[node] = Hop(dist, port, first)
        for cost, nbr, _ in adj[node]:
            if nbr not in done:
                heapq.heappush(heap, (dist + cost, nbr, port, first))
    return best


def _owner_candidates(plan: Plan) -> list[tuple[IPv4Network, tuple[str, ...]]]:
    """Every destination prefix and the routers it is attached to."""
    out: list[tuple[IPv4Network, tuple[str, ...]]] = []
    for h in plan.hosts.values():
        out.append((h.subnet, (h.router,)))
    for r in plan.routers.values():
        out.append((IPv4Network(r.router_id), (r.name,)))
    for link in plan.links:
        out.append((link.subnet, (link.a, link.b)))
    return out


def routes_for(plan: Plan, router: str) -> list[Route]:
    me = plan.routers[router]
    hops = first_hops(plan, router)
    table: list[Route] = [Route(IPv4Network(a), None, None, None) for a in me.own_addresses()]
    direct = {p.subnet: p for p in me.ports}
    for prefix, owners in _owner_candidates(plan):
        if prefix in direct:
            p = direct[prefix]
            table.append(Route(prefix, p.ofport, p.peer, p.peer_mac))
            continue
        if router in owners:
            continue                                   # own router ID: local route above
        reachable = [hops[o] for o in owners if o in hops]
        if not reachable:
            continue                                   # partitioned topology
        hop = min(reachable, key=lambda h: (h.dist, h.neighbour, h.ofport))
        port = me.port(hop.ofport)
        table.append(Route(prefix, port.ofport, port.peer, port.peer_mac))
    return table


def all_routes(plan: Plan) -> dict[str, list[Route]]:
    return {r: routes_for(plan, r) for r in plan.routers}


def router_hops(plan: Plan, src_host: str, dst_host: str) -> int:
    """Routers a datagram from one host to another crosses (each decrements TTL once)."""
    a, b = plan.hosts[src_host].router, plan.hosts[dst_host].router
    if a == b:
        return 1
    return _hop_count(plan, a, b) + 1


def _hop_count(plan: Plan, a: str, b: str) -> int:
    """Routers after `a` on the chosen path to `b`."""
    n, node = 0, a
    while node != b:
        node = first_hops(plan, node)[b].neighbour
        n += 1
    return n


def egress_table(routes: list[Route], bridge: str) -> list[dict]:
    """The forwarding routes for routerd's direct egress (docs/routerd.md): prefix, the port's
    interface (`<bridge>-<port>`, the router's end of the link in the root namespace) and
    next-hop MAC, exactly as the data plane forwards."""
    return [{"prefix": str(r.prefix), "iface": f"{bridge}-{r.ofport}", "mac": r.next_hop_mac}
            for r in routes if r.ofport is not None]
