"""One running OVS router: its names, and the run-time operations on it."""
from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Address

from concast.controller.routes import Route, egress_table
from concast.controller.ovs import ofctl, pipeline
from concast.controller.ovs import selectors as sel
from concast.netmodel.addressing import RouterPlan
from concast.netmodel.naming import CPU_OFPORT


@dataclass
class OvsRouter:
    plan: RouterPlan
    bridge: str                     # the OVS bridge, also its Mininet node name
    cpu_switch_iface: str | None    # the CPU port, a port of the bridge (OpenFlow port 1000)
    cpu_iface: str | None           # its peer: the end routerd opens with AF_PACKET
    routes: list[Route] = field(default_factory=list)   # as last programmed

    node = property(lambda self: self.bridge)
    name = property(lambda self: self.plan.name)
    capable = property(lambda self: self.plan.capable)
    router_id = property(lambda self: self.plan.router_id)
    mac = property(lambda self: self.plan.mac)
    cpu_ofport = CPU_OFPORT

    # --- programming -------------------------------------------------------------
    def program(self, routes: list[Route]) -> None:
        """Replace every rule with the pipeline for these routes (selectors are dropped)."""
        ofctl.del_flows(self.bridge)
        ofctl.add_flows(self.bridge, pipeline.router_flows(self.plan, routes))
        self.routes = list(routes)

    def egress_routes(self) -> list[dict]:
        """routerd's direct-egress table: the routes of table 1 (routes.egress_table)."""
        return egress_table(self.routes, self.bridge)

    def disable_diversion(self) -> None:
        """Forward like an oblivious router (routerd gone): drop the CSP, own-address and
        selector rules; ARP answers and forwarding stay."""
        mask = f"/{sel.CLASS_MASK:#018x}"
        ofctl.del_flows(self.bridge, f"cookie={sel.DIVERSION_COOKIE:#018x}{mask}")
        ofctl.del_flows(self.bridge, f"cookie={sel.SELECTOR_CLASS:#018x}{mask}")

    def enable_diversion(self) -> None:
        ofctl.add_flows(self.bridge, pipeline.diversion_flows(self.plan))

    # --- selectors (what routerd does with ovs-ofctl) ----------------------------------
    def _need_cpu(self) -> None:
        if not self.capable:
            raise ValueError(f"router {self.name} is concast-oblivious: no CPU port")

    def add_selector(self, receiver, proto: int = 0, dport: int = 0) -> sel.Selector:
        self._need_cpu()
        s = sel.Selector(IPv4Address(receiver), proto, dport)
        ofctl.add_flows(self.bridge, [s.flow()])
        return s

    def remove_selector(self, receiver, proto: int = 0, dport: int = 0) -> None:
        s = sel.Selector(IPv4Address(receiver), proto, dport)
        ofctl.del_flows(self.bridge, f"cookie={s.cookie:#018x}/-1,table=0")

    def selectors(self) -> list[sel.Selector]:
        return [sel.Selector.from_cookie(f["cookie"]) for f in self.flows()
                if f["cookie"] & sel.CLASS_MASK == sel.SELECTOR_CLASS]

    # --- counters --------------------------------------------------------------------
    def flows(self, match: str | None = None) -> list[dict]:
        return ofctl.dump_flows(self.bridge, match)

    def ports(self) -> dict[str, dict]:
        """Port counters keyed by OpenFlow port number ("1", "2", "1000" = CPU, "LOCAL")."""
        return ofctl.dump_ports(self.bridge)

    def port_to(self, peer: str) -> int:
        return next(p.ofport for p in self.plan.ports if p.peer == peer)
