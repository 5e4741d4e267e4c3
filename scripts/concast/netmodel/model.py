"""What a network is made of, before any address is given or anything is started.

Pure data: no Mininet, no root needed, so the address plan and the routes can be
checked in unit tests.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from concast.netmodel import naming


@dataclass(frozen=True)
class RouterSpec:
    name: str
    capable: bool = True            # concast-capable: has a CPU port and diverts to routerd


@dataclass(frozen=True)
class HostSpec:
    name: str
    router: str                     # every host hangs off exactly one router
    params: dict = field(default_factory=dict, compare=False)   # Mininet TCLink params (bw=...)


@dataclass(frozen=True)
class LinkSpec:
    a: str
    b: str
    cost: int = 1                   # shortest-path metric
    params: dict = field(default_factory=dict, compare=False)


class Topology:
    """Routers, hosts and router-router links, in declaration order.

    Declaration order matters: it fixes router indices, host subnets, link subnets and
    OpenFlow port numbers (see netmodel/addressing.py).
    """

    def __init__(self) -> None:
        self.routers: dict[str, RouterSpec] = {}
        self.hosts: dict[str, HostSpec] = {}
        self.links: list[LinkSpec] = []
        # ("host", name) or ("link", index), in the order ports appear on routers.
        self.attachments: list[tuple[str, object]] = []

    def _check_new(self, name: str, kind: str) -> None:
        naming.check_node_name(name, kind)
        if name in self.routers or name in self.hosts:
            raise ValueError(f"name {name!r} is already used")

    def add_router(self, name: str, capable: bool = True) -> RouterSpec:
        self._check_new(name, "router")
        spec = RouterSpec(name, capable)
        self.routers[name] = spec
        return spec

    def add_host(self, name: str, router: str, **link_params) -> HostSpec:
        self._check_new(name, "host")
        if router not in self.routers:
            raise ValueError(f"host {name!r}: unknown router {router!r} (declare routers first)")
        spec = HostSpec(name, router, dict(link_params))
        self.hosts[name] = spec
        self.attachments.append(("host", name))
        return spec

    def add_link(self, a: str, b: str, cost: int = 1, **link_params) -> LinkSpec:
        for end in (a, b):
            if end not in self.routers:
                raise ValueError(f"link {a}-{b}: {end!r} is not a router "
                                 "(hosts are attached with host(name, router=...))")
        if a == b:
            raise ValueError(f"link {a}-{b}: a router cannot link to itself")
        if cost < 1:
            raise ValueError(f"link {a}-{b}: cost must be at least 1")
        spec = LinkSpec(a, b, cost, dict(link_params))
        self.links.append(spec)
        self.attachments.append(("link", len(self.links) - 1))
        return spec
