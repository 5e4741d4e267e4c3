"""The fluent description of a concast network.

    net = (ConcastNet(dataplane="ovs")
           .router("r1").router("r2", capable=False)
           .host("h1", router="r1").host("rx", router="r2")
           .link("r1", "r2"))
    with net.start() as n:
        n["h1"].cmd("ping -c1", n.ip("rx"))
"""
from __future__ import annotations

from pathlib import Path

from concast.netmodel import addressing
from concast.netmodel.model import Topology


class ConcastNet:
    def __init__(self, dataplane: str = "ovs", emulate: bool | str | None = None) -> None:
        """emulate: True puts every link through concast-linkemu (docs/linkemu.md); None
        (default) does so when some link asks for delay, loss or max_queue_size; False
        keeps Mininet's TCLink; "netem" uses TCLink's netem where the kernel has it."""
        self.dataplane = dataplane
        self.emulate = emulate
        self.topo = Topology()
        # What made it (name, parameters, seed) and free-form facts about it (domains,
        # link classes, ...); both are saved with it (topologies/netfile.py).
        self.generator: dict | None = None
        self.meta: dict = {}
        self.cluster: dict | None = None    # set by servers(): {"servers", "placement"}
        # keyword arguments for the data plane's back end (BMv2: program, log)
        self.dataplane_options: dict = {}

    def router(self, name: str, capable: bool = True) -> "ConcastNet":
        self.topo.add_router(name, capable)
        return self

    def routers(self, *names: str, capable: bool = True) -> "ConcastNet":
        for name in names:
            self.topo.add_router(name, capable)
        return self

    def host(self, name: str, router: str, **link_params) -> "ConcastNet":
        """A host on its own /24 behind `router`. link_params, TCLink's names: delay=
        ('10ms' or ms), loss= (percent), bw= (Mbit/s), max_queue_size= (packets); and mtu=
        (bytes, both ends). This kernel has no netem, so delay, loss and queue limits are done
        by concast-linkemu."""
        self.topo.add_host(name, router, **link_params)
        return self

    def link(self, a: str, b: str, cost: int = 1, **link_params) -> "ConcastNet":
        self.topo.add_link(a, b, cost, **link_params)
        return self

    def servers(self, names: list[str] | str, placement: dict | None = None,
                state_dir: str | None = None) -> "ConcastNet":
        """Run it over these servers with Mininet Cluster Edition (docs/cluster.md): each
        stub domain with its hosts on one server, only transit links crossing (as VXLAN).
        The placement goes into meta["cluster"] (saved with save()); a saved one for the
        same servers is reused, so a distributed run can be repeated."""
        from concast.topologies.cluster import placement as placing
        from concast.topologies.cluster.serverset import parse
        names = parse(names) if isinstance(names, str) else list(names)
        saved = self.meta.get("cluster") or {}
        if placement is None and saved.get("servers") == names:
            placement = saved.get("placement")
        placement = placement or placing.place(self.topo, self.meta, names)
        placing.check(self.topo, placement, names)
        self.cluster = {"servers": names, "placement": dict(placement), "state_dir": state_dir}
        self.meta["cluster"] = {"servers": names, "placement": dict(placement)}
        return self

    def plan(self) -> addressing.Plan:
        """Every address and port, without starting anything."""
        return addressing.plan(self.topo)

    def describe(self) -> str:
        return addressing.describe(self.plan())

    def save(self, path: Path | str) -> Path:
        """Write it as JSON (topologies/netfile.py), to be started again with load()."""
        from concast.topologies import netfile
        return netfile.save(self, path)

    @classmethod
    def load(cls, path: Path | str, dataplane: str | None = None) -> "ConcastNet":
        """A network saved with save(): same routers, hosts, links, params and addresses.
        `dataplane` overrides the saved one."""
        from concast.topologies import netfile
        return netfile.load(path, cls, dataplane)

    def start(self, run_dir: Path | str | None = None, quiet: bool = True):
        """Build and start it (needs root and Open vSwitch); returns a RunningNet, which
        is a context manager that stops everything on exit."""
        if self.cluster:
            from concast.topologies.cluster.running import ClusterRunningNet
            from concast.topologies.cluster.serverset import ServerSet
            servers = ServerSet.resolve(self.cluster["servers"], self.cluster["state_dir"])
            return ClusterRunningNet(self.topo, self.dataplane,
                                     Path(run_dir) if run_dir else None, quiet, self.emulate,
                                     servers, self.cluster["placement"])
        from concast.topologies.running import RunningNet
        return RunningNet(self.topo, self.dataplane, Path(run_dir) if run_dir else None, quiet,
                          emulate=self.emulate, dataplane_options=self.dataplane_options)

    def __repr__(self) -> str:
        t = self.topo
        on = f" on {len(self.cluster['servers'])} servers" if self.cluster else ""
        return (f"ConcastNet({self.dataplane}: {len(t.routers)} routers, {len(t.hosts)} hosts, "
                f"{len(t.links)} links{on})")
