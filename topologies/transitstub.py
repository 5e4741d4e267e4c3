"""Transit-stub networks in the style of GT-ITM (Zegura, Calvert and Bhattacharjee), seeded.

The model, as this module builds it:

- `transits` transit domains of `transit_nodes` routers each. Inside a domain the routers
  are joined by a random graph; the domains themselves are joined by a random graph over
  domains, each domain-level edge becoming one link between a random router of either side.
- Every transit router has `stubs_per_transit` stub domains hanging off it. A stub domain is
  a random graph of `stub_nodes` routers (plus or minus `stub_var`, uniformly), one of
  which (chosen at random) is linked to the stub's transit router.
- Optionally `extra_transit_stub` more links from random stub routers to random transit
  routers other than their own, and `extra_stub_stub` links between routers of different
  stub domains (GT-ITM's multi-homing knobs; none by default).

A random graph here places its nodes uniformly in the unit square and keeps each pair with
probability `p` ("pure") or Waxman's alpha * exp(-d / (beta * sqrt 2)) ("waxman"); if the
result is not connected, the closest pair of nodes between two components is linked until
it is. Everything is drawn from one random.Random(seed), in a fixed order, so a seed gives
the same network every time.

Link classes: "transit" (within or between transit domains), "transit-stub" (stub to
transit, including the extra ones), "stub" (within a stub domain), "stub-stub" (extra links
between stubs) and "access" (host to router). Core parameters go on transit and
transit-stub links, edge parameters on stub and stub-stub links, access parameters on hosts'
links. Parameter names are Mininet TCLink's: delay (ms or "10ms"), loss (%), bw (Mbit/s),
max_queue_size (packets).

Routers are t1..tN (transit) and s1..sM (stub routers, stub domain by stub domain); hosts
c1..cK (clients, dealt over the stub routers) and sv (the server, on a stub router).
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field

from concast.netmodel import addressing, naming
from concast.topologies.net import ConcastNet

GENERATOR = "transit-stub"
EDGE_MODELS = ("pure", "waxman")
PLACEMENTS = ("round-robin", "random")


def _ten_ms(bw: float) -> dict:
    return {"delay": "10ms", "bw": bw, "max_queue_size": 20}


@dataclass
class Params:
    """Everything that shapes a transit-stub network. The defaults are the ACK study's
    network: 4 + 24 * 9 = 220 routers, 200 clients, one server."""
    seed: int = 1
    transits: int = 1                   # transit domains
    transit_nodes: int = 4              # routers per transit domain
    stubs_per_transit: int = 6          # stub domains per transit router
    stub_nodes: int = 9                 # routers per stub domain (mean)
    stub_var: int = 0                   # each stub has stub_nodes +- up to this many
    edge_model: str = "pure"            # "pure" (edge probability) or "waxman"
    transit_p: float = 0.6              # pure: edge probability inside a transit domain
    stub_p: float = 0.4                 # pure: edge probability inside a stub domain
    domain_p: float = 0.5               # pure: edge probability between transit domains
    waxman_alpha: float = 0.4
    waxman_beta: float = 0.4
    extra_transit_stub: int = 0
    extra_stub_stub: int = 0
    clients: int = 200
    placement: str = "round-robin"      # clients over stub routers: "round-robin" or "random"
    server_router: str | None = None    # default: a stub router drawn from the seed
    capable: bool = True                # routers concast-capable
    core: dict = field(default_factory=lambda: _ten_ms(100.0))
    edge: dict = field(default_factory=lambda: _ten_ms(10.0))
    access: dict = field(default_factory=dict)      # hosts' links: ideal by default
    cost: int = 1                       # routing metric of every router-router link

    def check(self) -> None:
        for name in ("transits", "transit_nodes", "stub_nodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"transit-stub: {name} must be at least 1")
        for name in ("stubs_per_transit", "stub_var", "extra_transit_stub", "extra_stub_stub",
                     "clients"):
            if getattr(self, name) < 0:
                raise ValueError(f"transit-stub: {name} must not be negative")
        if self.stub_var >= self.stub_nodes:
            raise ValueError("transit-stub: stub_var must be smaller than stub_nodes "
                             "(every stub keeps at least one router)")
        for name in ("transit_p", "stub_p", "domain_p", "waxman_alpha", "waxman_beta"):
            v = getattr(self, name)
            if not 0 <= v <= 1 or (name == "waxman_beta" and v == 0):
                raise ValueError(f"transit-stub: {name} must be in (0, 1]"
                                 if name == "waxman_beta" else
                                 f"transit-stub: {name} must be in [0, 1]")
        if self.edge_model not in EDGE_MODELS:
            raise ValueError(f"transit-stub: edge_model must be one of {', '.join(EDGE_MODELS)}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"transit-stub: placement must be one of {', '.join(PLACEMENTS)}")
        if self.stubs_per_transit == 0 and (self.clients or self.server_router is None):
            raise ValueError("transit-stub: hosts need stub routers (stubs_per_transit >= 1)")
        # Checked before drawing anything: a huge request should fail at once, not after
        # building a graph of thousands of nodes. The exact count is checked afterwards.
        fewest = self.transits * self.transit_nodes * (
            1 + self.stubs_per_transit * (self.stub_nodes - self.stub_var))
        if fewest > addressing.MAX_ROUTERS:
            raise ValueError(f"transit-stub: {fewest} routers or more, but the address plan "
                             f"allows at most {addressing.MAX_ROUTERS} routers")
        if len(f"c{self.clients}") > naming.MAX_HOST_NAME:
            raise ValueError(f"transit-stub: {self.clients} clients would not fit host names")


@dataclass
class Graph:
    """The generated network before it becomes a ConcastNet: pure data."""
    transit: list[list[str]]                   # routers per transit domain
    stubs: list[list[str]]                     # routers per stub domain
    stub_parent: list[str]                     # transit router each stub domain hangs off
    links: list[tuple[str, str, str]]          # (a, b, link class)
    clients: dict[str, str]                    # client -> stub router
    server: str                                # the server's stub router

    @property
    def routers(self) -> list[str]:
        return [r for d in self.transit for r in d] + [r for d in self.stubs for r in d]

    def domain_of(self) -> dict[str, str]:
        out = {}
        for i, d in enumerate(self.transit, start=1):
            out.update({r: f"T{i}" for r in d})
        for i, d in enumerate(self.stubs, start=1):
            out.update({r: f"S{i}" for r in d})
        return out


def _random_graph(rng: random.Random, nodes: list[str], p: Params, pure_p: float
                  ) -> list[tuple[str, str]]:
    """Edges of a connected random graph over `nodes` (see the module docstring)."""
    pos = {n: (rng.random(), rng.random()) for n in nodes}
    edges = []
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            if p.edge_model == "pure":
                keep = pure_p
            else:
                d = math.dist(pos[a], pos[b])
                keep = p.waxman_alpha * math.exp(-d / (p.waxman_beta * math.sqrt(2)))
            if rng.random() < keep:
                edges.append((a, b))
    return edges + _connect(nodes, edges, pos)


def _connect(nodes: list[str], edges: list[tuple[str, str]], pos: dict) -> list[tuple[str, str]]:
    """Edges that join the components of (nodes, edges): the closest pair between the
    component of the first node and any other, repeatedly (deterministic, no draws)."""
    comp = {n: n for n in nodes}

    def find(n: str) -> str:
        while comp[n] != n:
            comp[n] = comp[comp[n]]
            n = comp[n]
        return n
    for a, b in edges:
        comp[find(a)] = find(b)
    added = []
    while len({find(n) for n in nodes}) > 1:
        root = find(nodes[0])
        inside = [n for n in nodes if find(n) == root]
        outside = [n for n in nodes if find(n) != root]
        a, b = min(((a, b) for a in inside for b in outside),
                   key=lambda e: (math.dist(pos[e[0]], pos[e[1]]), e))
        added.append((a, b))
        comp[find(a)] = find(b)
    return added


def generate_graph(p: Params) -> Graph:
    p.check()
    rng = random.Random(p.seed)
    links: list[tuple[str, str, str]] = []
    transit = [[f"t{d * p.transit_nodes + i + 1}" for i in range(p.transit_nodes)]
               for d in range(p.transits)]
    for dom in transit:
        links += [(a, b, "transit") for a, b in _random_graph(rng, dom, p, p.transit_p)]
    if p.transits > 1:
        names = [f"T{i}" for i in range(p.transits)]
        for a, b in _random_graph(rng, names, p, p.domain_p):
            da, db = transit[names.index(a)], transit[names.index(b)]
            links.append((rng.choice(da), rng.choice(db), "transit"))

    stubs: list[list[str]] = []
    parents: list[str] = []
    n = 0
    for t in (r for dom in transit for r in dom):
        for _ in range(p.stubs_per_transit):
            size = p.stub_nodes + (rng.randint(-p.stub_var, p.stub_var) if p.stub_var else 0)
            dom = [f"s{n + i + 1}" for i in range(size)]
            n += size
            stubs.append(dom)
            parents.append(t)
            links.append((t, rng.choice(dom), "transit-stub"))
            links += [(a, b, "stub") for a, b in _random_graph(rng, dom, p, p.stub_p)]

    all_transit = [r for dom in transit for r in dom]
    have = {frozenset(ln[:2]) for ln in links}

    def add_extra(count: int, draw, kind: str) -> None:
        tries = 0
        while count and tries < 1000 * count:
            tries += 1
            a, b = draw()
            if a != b and frozenset((a, b)) not in have:
                have.add(frozenset((a, b)))
                links.append((a, b, kind))
                count -= 1
        if count:
            raise ValueError(f"transit-stub: no room for {count} more {kind} links")

    def transit_stub():
        i = rng.randrange(len(stubs))
        return rng.choice([t for t in all_transit if t != parents[i]] or all_transit), \
            rng.choice(stubs[i])

    def stub_stub():
        i, j = rng.sample(range(len(stubs)), 2) if len(stubs) > 1 else (0, 0)
        return rng.choice(stubs[i]), rng.choice(stubs[j])
    add_extra(p.extra_transit_stub, transit_stub, "transit-stub")
    add_extra(p.extra_stub_stub, stub_stub, "stub-stub")

    stub_routers = [r for dom in stubs for r in dom]
    if p.server_router is None:
        server = rng.choice(stub_routers)
    elif p.server_router in stub_routers or p.server_router in all_transit:
        server = p.server_router
    else:
        raise ValueError(f"transit-stub: server_router {p.server_router!r} is not a router "
                         f"of this network (t1..t{len(all_transit)}, s1..s{len(stub_routers)})")
    if p.placement == "round-robin":
        # Interleave domains (first router of every stub, then the second, ...) so that
        # fewer clients than stub routers still reach every stub domain.
        order = [dom[i] for i in range(max(map(len, stubs), default=0))
                 for dom in stubs if i < len(dom)]
        clients = {f"c{k + 1}": order[k % len(order)] for k in range(p.clients)}
    else:
        clients = {f"c{k + 1}": rng.choice(stub_routers) for k in range(p.clients)}
    return Graph(transit, stubs, parents, links, clients, server)


def to_net(g: Graph, p: Params, dataplane: str = "ovs") -> ConcastNet:
    net = ConcastNet(dataplane)
    net.routers(*g.routers, capable=p.capable)
    params = {"transit": p.core, "transit-stub": p.core, "stub": p.edge, "stub-stub": p.edge}
    for a, b, kind in g.links:
        net.link(a, b, p.cost, **params[kind])
    for c, r in g.clients.items():
        net.host(c, router=r, **p.access)
    net.host("sv", router=g.server, **p.access)
    net.generator = {"name": GENERATOR, "params": asdict(p), "seed": p.seed}
    net.meta = {
        "domains": g.domain_of(),
        "stub_parent": {f"S{i}": t for i, t in enumerate(g.stub_parent, start=1)},
        "link_classes": [kind for _, _, kind in g.links],
        "host_class": "access",
        "server": "sv",
        "clients": list(g.clients),
    }
    check_limits(net)
    return net


def check_limits(net: ConcastNet) -> None:
    """Raise ValueError now if the network could not be started: the address plan's
    limits (routers, hosts per router, links) and interface names with any run tag."""
    plan = addressing.plan(net.topo)
    for r in plan.routers.values():
        if r.ports:
            naming.port_iface("zz", r.name, max(p.ofport for p in r.ports))


def transit_stub(dataplane: str = "ovs", **params) -> ConcastNet:
    """An unstarted ConcastNet of a transit-stub network; keyword arguments are Params
    fields (seed=, clients=, stub_nodes=, core={...}, ...)."""
    unknown = set(params) - set(Params.__dataclass_fields__)
    if unknown:
        raise TypeError(f"transit_stub: unknown parameter(s) {', '.join(sorted(unknown))}")
    p = Params(**params)
    return to_net(generate_graph(p), p, dataplane)
