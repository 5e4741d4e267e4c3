"""The Linux data plane of a concast network: each router is a Mininet node in its own
network namespace (named under /run/netns like the hosts') that forwards IPv4 in the
kernel. Diversion to routerd is tc (tc.py); routerd runs inside the namespace."""
from __future__ import annotations

import subprocess

from concast.controller.linux.router import LinuxRouter
from concast.controller.routes import all_routes
from concast.netmodel import naming
from concast.netmodel.addressing import Plan


def _node_class():
    from mininet.node import Node

    class LinuxRouterNode(Node):
        """A namespace with a shell; its interfaces are configured by LinuxRouter, not by
        Mininet (no default IP, no default route)."""

        def __init__(self, name, **params):
            params["inNamespace"] = True
            super().__init__(name, **params)

        def configDefault(self, **_):
            pass

    return LinuxRouterNode


class LinuxDataplane:
    name = "linux"

    def __init__(self, tag: str, plan: Plan) -> None:
        self.tag = tag
        self.plan = plan
        self.record = None
        self.routers: dict[str, LinuxRouter] = {}
        for r in plan.routers.values():
            self.routers[r.name] = LinuxRouter(
                r, naming.node(tag, r.name), naming.netns(tag, r.name),
                naming.cpu_switch_iface(tag, r.name) if r.capable else None,
                naming.cpu_routerd_iface(tag, r.name) if r.capable else None, tag)

    def attach(self, record) -> None:
        """The run record: router namespaces go into its `netns` list for cleanup."""
        self.record = record

    def planned_names(self) -> tuple[list[str], list[str]]:
        """No bridges and no root-namespace interfaces: everything is in the namespaces."""
        return [], []

    def add_routers(self, mn) -> dict:
        cls = _node_class()
        if self.record is not None:
            self.record.extend("netns", [r.netns for r in self.routers.values()])
        nodes = {}
        for r in self.routers.values():
            nodes[r.name] = node = mn.addHost(r.node, cls=cls)
            subprocess.run(["ip", "netns", "attach", r.netns, str(node.pid)],
                           check=True, capture_output=True, timeout=10)
        return nodes

    def configure(self, owner_pid: int, owner_start: int | None) -> dict[str, LinuxRouter]:
        routes = all_routes(self.plan)
        for r in self.routers.values():
            r.program(routes[r.name])
        return self.routers

    def teardown(self) -> None:
        """Nothing here: Mininet deletes the link veths, and the run's cleanup deletes the
        namespaces (with the CPU ports and anything still running in them)."""
