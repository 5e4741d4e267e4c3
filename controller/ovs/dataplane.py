"""The OVS data plane of a concast network: one userspace OVS bridge per router
(datapath netdev, OpenFlow 1.3, fail-mode secure, no controller: every rule comes from
here or from routerd via ovs-ofctl), a CPU port per capable router, the pipeline."""
from __future__ import annotations

import subprocess

from concast.controller import cpuport
from concast.controller.ovs import ofctl, pipeline
from concast.controller.ovs.router import OvsRouter
from concast.controller.routes import all_routes
from concast.netmodel import naming
from concast.netmodel.addressing import Plan
from concast.sysfs import disable_ipv6


class OvsDataplane:
    name = "ovs"

    def __init__(self, tag: str, plan: Plan) -> None:
        self.tag = tag
        self.plan = plan
        self.routers: dict[str, OvsRouter] = {}
        for r in plan.routers.values():
            self.routers[r.name] = OvsRouter(
                r, naming.node(tag, r.name),
                naming.cpu_switch_iface(tag, r.name) if r.capable else None,
                naming.cpu_routerd_iface(tag, r.name) if r.capable else None)

    def planned_names(self) -> tuple[list[str], list[str]]:
        """(bridges, root-namespace interfaces) this data plane will create."""
        bridges = [r.bridge for r in self.routers.values()]
        ifaces = [i for r in self.routers.values() for i in (r.cpu_switch_iface, r.cpu_iface) if i]
        return bridges, ifaces

    def add_routers(self, mn) -> dict:
        """Mininet switch nodes, one per router (links attach to these)."""
        from mininet.node import OVSSwitch
        nodes = {}
        for r in self.routers.values():
            dpid = f"cc00{int(self.tag, 36):04x}0000{r.plan.index:04x}"
            # batch: Mininet then creates every bridge in one ovs-vsctl call (it does so
            # only for switches of a Topo, not for addSwitch, unless asked).
            nodes[r.name] = mn.addSwitch(r.bridge, cls=OVSSwitch, datapath="user",
                                         protocols="OpenFlow13", failMode="secure", dpid=dpid,
                                         batch=True)
        return nodes

    def configure(self, owner_pid: int, owner_start: int | None) -> dict[str, OvsRouter]:
        """After Mininet started the bridges: tag them, add CPU ports, install the rules."""
        args = []
        for r in self.routers.values():
            args += ["--", "set", "bridge", r.bridge,
                     f"external_ids:concast-run={self.tag}",
                     f"external_ids:concast-owner={owner_pid}",
                     f"external_ids:concast-owner-start={owner_start or 0}"]
        ofctl.vsctl(*args)
        self._add_cpu_ports()
        for r in self.routers.values():
            disable_ipv6([r.bridge, *(naming.port_iface(self.tag, r.name, p.ofport)
                                      for p in r.plan.ports)])
        routes = all_routes(self.plan)
        # New bridges have no rules yet (fail-mode secure, no controller): no del-flows
        # needed, and all bridges are programmed concurrently (ofctl.add_flows_many).
        ofctl.add_flows_many({r.bridge: pipeline.router_flows(r.plan, routes[r.name])
                              for r in self.routers.values()})
        for r in self.routers.values():
            r.routes = list(routes[r.name])
        return self.routers

    def _add_cpu_ports(self) -> None:
        capable = [r for r in self.routers.values() if r.capable]
        if not capable:
            return
        args, batch = [], []
        for r in capable:
            sw, rd = r.cpu_switch_iface, r.cpu_iface
            batch += cpuport.veth_cmds(sw, r.plan.cpu_switch_mac, rd, r.plan.cpu_routerd_mac)
            args += ["--", "add-port", r.bridge, sw,
                     "--", "set", "interface", sw, f"ofport_request={naming.CPU_OFPORT}"]
        # One `ip -batch` for every CPU port rather than three processes per router.
        proc = subprocess.run(["ip", "-batch", "-"], input="\n".join(batch) + "\n", text=True,
                              capture_output=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"creating CPU ports: {proc.stderr.strip()}")
        disable_ipv6([i for r in capable for i in (r.cpu_switch_iface, r.cpu_iface)])
        ofctl.vsctl(*args)

    def teardown(self) -> None:
        """CPU ports (Mininet removes the bridges and the link veths)."""
        for r in self.routers.values():
            if r.cpu_switch_iface:
                subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-port",
                                r.bridge, r.cpu_switch_iface], capture_output=True, timeout=20)
                subprocess.run(["ip", "link", "del", r.cpu_switch_iface],
                               capture_output=True, timeout=10)
