"""Choosing host pairs for cross traffic on any topology, reproducibly (seeded).

A pair (src, dst) qualifies when the hosts sit at least `min_hops` router hops apart
and, if `group_of` is given, in different groups; for a transit-stub network pass the
host's stub domain as its group (and a min_hops that crosses the core) to get
stub-to-stub pairs across the core.
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
                 exclude: Iterable[str] = (), reuse: bool = False) -> list[tuple[str, str]]:
    """`n` distinct (src, dst) pairs drawn at random from the qualifying ones.
    `hosts`: candidate sources (default: every host not excluded); `dst_hosts`:
    candidate destinations (default: the same set). `reuse`: allow drawing a pair more
    than once when there are fewer qualifying pairs than `n`."""
    plan = _plan(net)
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
