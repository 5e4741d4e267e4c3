"""Ready-made networks. Each returns an unstarted ConcastNet, so it can be extended
(`tree().host("extra", router="r1").start()`).

Naming: routers r1, r2, ... (breadth first from the receiver's side); senders s1..sN,
receiver rx; multiplex clients c1..cN and server sv.
"""
from __future__ import annotations

from concast.topologies.net import ConcastNet


def line(n_routers: int = 2, senders: int = 1, capable: bool = True,
         dataplane: str = "ovs") -> ConcastNet:
    """s1..sN - r1 - r2 - ... - rN - rx."""
    if n_routers < 1:
        raise ValueError("at least one router")
    net = ConcastNet(dataplane)
    names = [f"r{i}" for i in range(1, n_routers + 1)]
    net.routers(*names, capable=capable)
    for i in range(1, senders + 1):
        net.host(f"s{i}", router=names[0])
    net.host("rx", router=names[-1])
    for a, b in zip(names, names[1:]):
        net.link(a, b)
    return net


def tree(levels: int = 2, fanout: int = 2, senders: int = 8, capable: bool = True,
         oblivious: tuple[str, ...] = (), oblivious_levels: tuple[int, ...] = (),
         dataplane: str = "ovs") -> ConcastNet:
    """A complete `fanout`-ary tree of routers, `levels` deep. The receiver rx hangs off
    the root r1; senders s1..sN are dealt round-robin to the leaf routers, so a sender's
    datagrams cross `levels` routers. Level 1 is the root."""
    if levels < 1 or fanout < 1:
        raise ValueError("levels and fanout must be at least 1")
    net = ConcastNet(dataplane)
    by_level: list[list[str]] = []
    n = 0
    for level in range(1, levels + 1):
        names = [f"r{n + i + 1}" for i in range(fanout ** (level - 1))]
        n += len(names)
        for name in names:
            net.router(name, capable=capable and name not in oblivious
                       and level not in oblivious_levels)
        by_level.append(names)
    net.host("rx", router="r1")
    for level in range(1, levels):
        for i, child in enumerate(by_level[level]):
            net.link(by_level[level - 1][i // fanout], child)
    leaves = by_level[-1]
    for i in range(senders):
        net.host(f"s{i + 1}", router=leaves[i % len(leaves)])
    return net


def mixed(levels: int = 3, fanout: int = 2, senders: int = 8,
          oblivious_levels: tuple[int, ...] = (2,), oblivious: tuple[str, ...] = (),
          dataplane: str = "ovs") -> ConcastNet:
    """tree() with some routers concast-oblivious: by default the middle level, so every
    path is capable leaf -> oblivious -> capable root (a join must skip a router)."""
    return tree(levels, fanout, senders, True, oblivious, oblivious_levels, dataplane)


def star(clients: int = 4, capable: bool = True, dataplane: str = "ovs") -> ConcastNet:
    """c1..cN and the server sv on one router r1."""
    net = ConcastNet(dataplane).router("r1", capable=capable)
    for i in range(1, clients + 1):
        net.host(f"c{i}", router="r1")
    return net.host("sv", router="r1")


def dumbbell(clients: int = 4, capable: bool = True, bw: float | None = None,
             dataplane: str = "ovs") -> ConcastNet:
    """c1..cN - r1 ==== r2 - sv; `bw` (Mbit/s) limits the r1-r2 link with HTB."""
    net = ConcastNet(dataplane).routers("r1", "r2", capable=capable)
    for i in range(1, clients + 1):
        net.host(f"c{i}", router="r1")
    net.host("sv", router="r2")
    return net.link("r1", "r2", **({"bw": bw} if bw else {}))
