"""Choosing host pairs for cross traffic on any topology, reproducibly (seeded).

A pair (src, dst) qualifies when the hosts sit at least `min_hops` router hops apart
and, if `group_of` is given, in different groups. For a transit-stub network pass
`domains=net.meta["domains"]` (router -> "T1", "S7", ...): the hosts' routers must then
be in different stub domains, so every pair's path crosses the core.
"""
from __future__ import annotations

import random
from collections import deque
from typing import Callable, Iterable


def _plan(net):
    """A RunningNet (.plan), a ConcastNet (.plan()) or an addressing.Plan."""
    p = getattr(net, "plan", net)
    return p() if callable(p) else p


def router_hops(plan) -> dict[str, dict[str, int]]:
    """Router-to-router hop counts over the declared links (breadth first)."""
    adj: dict[str, list[str]] = {r: [] for r in plan.routers}
    for ln in plan.links:
        adj[ln.a].append(ln.b)
        adj[ln.b].append(ln.a)
    out = {}
    for start in plan.routers:
        dist = {start: 0}
        todo = deque([start])
        while todo:
            r = todo.popleft()
            for nb in adj[r]:
                if nb not in dist:
                    dist[nb] = dist[r] + 1
                    todo.append(nb)
        out[start] = dist
    return out


def choose_pairs(net, n: int, seed: int = 0, hosts: Iterable[str] | None = None,
                 dst_hosts: Iterable[str] | None = None, min_hops: int = 1,
                 group_of: Callable[[str], object] | None = None,
                 exclude: Iterable[str] = (), reuse: bool = False,
                 domains: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """`n` distinct (src, dst) pairs drawn at random from the qualifying ones.
    `hosts`: candidate sources (default: every host not excluded); `dst_hosts`:
    candidate destinations (default: the same set). `reuse`: allow drawing a pair more
    than once when there are fewer qualifying pairs than `n`. `domains`: router ->
    domain; only hosts on stub routers (domain not starting with "T") take part, the
    two of a pair in different stub domains."""
    plan = _plan(net)
    if domains is not None:
        if group_of is not None:
            raise ValueError("give group_of or domains, not both")
        missing = [h for h in plan.hosts.values() if h.router not in domains]
        if missing:
            raise ValueError(f"host {missing[0].name!r}: its router {missing[0].router!r} "
                             "has no domain")
        on_transit = [h.name for h in plan.hosts.values() if domains[h.router].startswith("T")]
        exclude = (*exclude, *on_transit)
        group_of = lambda h: domains[plan.hosts[h].router]      # noqa: E731
    excluded = set(exclude)
    srcs = [h for h in (hosts or plan.hosts) if h not in excluded]
    dsts = [h for h in (dst_hosts or srcs) if h not in excluded]
    for h in (*srcs, *dsts):
        if h not in plan.hosts:
            raise ValueError(f"{h!r} is not a host of this network")
    hops = router_hops(plan)
    ok = []
    for s in srcs:
        for d in dsts:
            if s == d:
                continue
            dist = hops[plan.hosts[s].router].get(plan.hosts[d].router)
            if dist is None or dist < min_hops:
                continue
            if group_of is not None and group_of(s) == group_of(d):
                continue
            ok.append((s, d))
    rng = random.Random(seed)
    if n <= len(ok):
        return rng.sample(ok, n)
    if reuse and ok:
        return [rng.choice(ok) for _ in range(n)]
    raise ValueError(f"only {len(ok)} host pairs are at least {min_hops} router hops apart"
                     f"{' in different groups' if group_of else ''}; {n} asked for")
