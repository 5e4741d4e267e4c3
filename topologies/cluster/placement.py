"""Which server runs which router and host (docs/cluster.md, "Placement").

Rule: a host is on its router's server; a transit-stub network's stub domains stay whole and
go with the transit router they hang off (topologies/transitstub.py's meta "domains" and
"stub_parent"), so only transit links (within or between transit domains) cross servers.
With more servers than transit routers, stub domains are placed on their own (still whole),
and then transit-stub links cross too.
A network without domains (line, tree, ...) is cut into contiguous pieces in breadth-first
order from its first router, so neighbours mostly share a server.

Groups are dealt largest first to the least-loaded server (load: routers + hosts), which keeps
the servers within one group of each other. Stub domains go with their transit router unless
that leaves the busiest server more than 10 % busier than placing stub domains on their own
(e.g. 4 transit routers over 3 servers), or there are more servers than transit routers. Pure: no I/O, unit-tested in tests/unit.
"""
from __future__ import annotations

from collections import deque

from concast.netmodel.model import Topology


class PlacementError(ValueError):
    pass


def groups(topo: Topology, meta: dict, fine: bool = False) -> list[list[str]]:
    """Routers that must share a server, as lists (every router in exactly one). `fine`:
    each stub domain and each transit router a group of its own (then transit-stub links
    cross servers too); used when there are more servers than transit routers."""
    domains: dict[str, str] = meta.get("domains") or {}
    parents: dict[str, str] = meta.get("stub_parent") or {}
    if domains and set(domains) == set(topo.routers):
        by_domain: dict[str, list[str]] = {}
        for r, d in domains.items():
            by_domain.setdefault(d, []).append(r)
        out: dict[str, list[str]] = {}      # transit router -> it and its stub domains
        for d, members in by_domain.items():
            if d.startswith("T"):
                for t in members:
                    out.setdefault(t, []).append(t)
        for d, members in by_domain.items():
            if d.startswith("S"):
                parent = parents.get(d)
                key = parent if parent in out and not fine else d
                out.setdefault(key, []).extend(members)
        return list(out.values())
    return [[r] for r in _bfs_order(topo)]


def _bfs_order(topo: Topology) -> list[str]:
    adj: dict[str, list[str]] = {r: [] for r in topo.routers}
    for ln in topo.links:
        adj[ln.a].append(ln.b)
        adj[ln.b].append(ln.a)
    seen, order = set(), []
    for start in topo.routers:
        if start in seen:
            continue
        q = deque([start])
        seen.add(start)
        while q:
            r = q.popleft()
            order.append(r)
            for n in adj[r]:
                if n not in seen:
                    seen.add(n)
                    q.append(n)
    return order


def place(topo: Topology, meta: dict, servers: list[str]) -> dict[str, str]:
    """{router or host: server} for every node."""
    if not servers:
        raise PlacementError("no servers")
    if len(set(servers)) != len(servers):
        raise PlacementError(f"a server named twice: {servers}")
    hosts_of: dict[str, list[str]] = {r: [] for r in topo.routers}
    for h in topo.hosts.values():
        hosts_of[h.router].append(h.name)
    out: dict[str, str] = {}
    if meta.get("domains"):
        # Stub domains with their transit router when that balances the servers within
        # 10 % of placing stub domains on their own; else on their own (more links cross).
        coarse, c_max = _deal(groups(topo, meta), hosts_of, servers)
        fine, f_max = _deal(groups(topo, meta, fine=True), hosts_of, servers)
        transits = sum(1 for d in meta["domains"].values() if str(d).startswith("T"))
        # More servers than transit routers: whole transit groups would leave a server
        # empty (the quick study's 2 transit routers on 3 servers did).
        out = coarse if c_max <= 1.1 * f_max and len(servers) <= transits else fine
    else:
        gs = groups(topo, meta)
        weight = [sum(1 + len(hosts_of[r]) for r in g) for g in gs]
        # Contiguous pieces of the breadth-first order, each about total/len(servers).
        total, acc = sum(weight), 0
        for g, w in zip(gs, weight):
            idx = min(len(servers) - 1, acc * len(servers) // max(total, 1))
            for r in g:
                out[r] = servers[idx]
            acc += w
    for r, hs in hosts_of.items():
        for h in hs:
            out[h] = out[r]
    return out


def _deal(gs: list[list[str]], hosts_of: dict, servers: list[str]
          ) -> tuple[dict[str, str], int]:
    """Groups largest first onto the least loaded server (ties: the earlier); returns the
    routers' servers and the largest load (routers + hosts)."""
    weight = [sum(1 + len(hosts_of[r]) for r in g) for g in gs]
    load = {s: 0 for s in servers}
    out = {}
    for i in sorted(range(len(gs)), key=lambda i: -weight[i]):
        s = min(servers, key=lambda s: (load[s], servers.index(s)))
        load[s] += weight[i]
        for r in gs[i]:
            out[r] = s
    return out, max(load.values())


def crossing_links(topo: Topology, placement: dict[str, str]) -> list[tuple[str, str]]:
    """Router-router links whose ends are on different servers (the tunnels)."""
    return [(ln.a, ln.b) for ln in topo.links if placement[ln.a] != placement[ln.b]]


def check(topo: Topology, placement: dict[str, str], servers: list[str]) -> None:
    """A saved placement still fits: every node placed, on a named server, hosts with their
    router."""
    nodes = set(topo.routers) | set(topo.hosts)
    missing = sorted(nodes - set(placement))
    if missing:
        raise PlacementError(f"placement has no server for {', '.join(missing[:5])}")
    unknown = sorted({s for s in placement.values() if s not in servers})
    if unknown:
        raise PlacementError(f"placement names server(s) {unknown} not in {servers}")
    for h in topo.hosts.values():
        if placement[h.name] != placement[h.router]:
            raise PlacementError(f"host {h.name} is not on its router {h.router}'s server")
