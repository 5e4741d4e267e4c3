"""One Linux router: a network namespace forwarding in the kernel, its names, how it is
programmed, and the run-time operations on it (as OvsRouter has them)."""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network

from concast.controller import cpuport
from concast.controller.linux import tc
from concast.controller.linux.bpf import divert_program
from concast.controller.routes import Route, egress_table
from concast.netmodel import naming
from concast.netmodel.addressing import RouterPlan
from concast.netmodel.naming import CPU_OFPORT


def run(argv: list[str], stdin: str | None = None, ok_errors: tuple[str, ...] = ()) -> str:
    """Run a command; a failure raises with its message, unless stderr says one of
    `ok_errors` (tc's "not found" for an idempotent delete)."""
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)
    if p.returncode != 0 and not any(e in p.stderr for e in ok_errors):
        raise RuntimeError(f"{' '.join(argv[:6])}...: {p.stderr.strip() or p.stdout.strip()}")
    return p.stdout


# tc's answers to deleting what is already gone: the rule, or the whole (empty) chain.
GONE = ("not found", "Cannot find")


def run_tc_batch(netns: str, lines: list[str], ok_errors: tuple[str, ...] = ()) -> None:
    """Several tc commands in one process (`-force`: each line runs even if one before it
    failed); a failure raises unless each failed line's message says one of `ok_errors`."""
    p = subprocess.run(["tc", "-n", netns, "-force", "-batch", "-"], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=60)
    if p.returncode == 0:
        return
    # tc prints a failed line's messages, then "Command failed -:N".
    failed = re.split(r"Command failed[^\n]*\n?", p.stderr)[:-1]
    bad = [m.strip() for m in failed if not any(e in m for e in ok_errors)]
    if bad or not failed:
        raise RuntimeError(f"tc -n {netns} -batch: {'; '.join(bad) or p.stderr.strip()}")


@dataclass
class LinuxRouter:
    plan: RouterPlan
    node: str                       # Mininet node name = prefix of its interfaces' names
    netns: str                      # under /run/netns
    cpu_switch_iface: str | None    # CPU port, kernel end: diversion's mirred target
    cpu_iface: str | None           # its peer: the end routerd opens with AF_PACKET
    tag: str = ""
    routes: list[Route] = field(default_factory=list)

    name = property(lambda self: self.plan.name)
    capable = property(lambda self: self.plan.capable)
    router_id = property(lambda self: self.plan.router_id)
    mac = property(lambda self: self.plan.mac)
    cpu_ofport = CPU_OFPORT

    def port_name(self, ofport: int) -> str:
        return naming.port_iface(self.tag, self.name, ofport)

    def ifaces(self) -> list[str]:
        """Every interface of the router (ports, then the CPU port's two ends)."""
        cpu = [self.cpu_switch_iface, self.cpu_iface] if self.capable else []
        return [self.port_name(p.ofport) for p in self.plan.ports] + cpu

    # --- programming -------------------------------------------------------------------
    def sysctls(self) -> list[str]:
        keys = ["net.ipv4.ip_forward=1", "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1"]
        # No reverse-path filter (a datagram routerd re-injects comes in on the CPU port
        # from any source), no ICMP redirects (a tree router forwards out of the port a
        # datagram came in on when routerd turned it around).
        for scope in ["all", "default", *self.ifaces()]:
            keys += [f"net.ipv4.conf.{scope}.rp_filter=0",
                     f"net.ipv4.conf.{scope}.send_redirects=0"]
        if self.capable:
            # routerd's CSP and merged datagrams come from the router ID, an own address.
            keys.append(f"net.ipv4.conf.{self.cpu_switch_iface}.accept_local=1")
        return keys

    def ip_cmds(self, routes: list[Route]) -> list[str]:
        """`ip -batch` lines: CPU port, MACs, addresses, pinned neighbours, routes."""
        p = self.plan
        cmds = ["link set dev lo up", f"address add {p.router_id}/32 dev lo"]
        if self.capable:
            cmds += cpuport.veth_cmds(self.cpu_switch_iface, p.mac, self.cpu_iface, p.cpu_routerd_mac)
        for port in p.ports:
            dev = self.port_name(port.ofport)
            # One MAC for every port: the router MAC hosts and neighbours address.
            cmds += [f"link set dev {dev} address {p.mac}",
                     f"address add {port.address}/{port.subnet.prefixlen} dev {dev}",
                     f"link set dev {dev} up",
                     f"neigh replace {port.peer_address} lladdr {port.peer_mac} dev {dev}"
                     " nud permanent"]
        direct = {port.subnet for port in p.ports}
        for r in routes:
            if r.ofport is None or IPv4Network(r.prefix) in direct:
                continue          # own addresses and connected subnets: the kernel's own
            port = p.port(r.ofport)
            cmds.append(f"route replace {r.prefix} via {port.peer_address}"
                        f" dev {self.port_name(port.ofport)}")
        return cmds

    def tc_cmds(self) -> list[str]:
        if not self.capable:
            return []
        cmds = [tc.qdisc_cmd(self.port_name(port.ofport)) for port in self.plan.ports]
        return cmds + tc.static_cmds(self.plan.own_addresses(), self.cpu_switch_iface)

    def program(self, routes: list[Route]) -> None:
        """Everything, in three commands (the CPU port must exist before its sysctls)."""
        run(["ip", "-n", self.netns, "-batch", "-"], "\n".join(self.ip_cmds(routes)) + "\n")
        run(["ip", "netns", "exec", self.netns, "sysctl", "-qw", *self.sysctls()])
        cmds = self.tc_cmds()
        if cmds:
            run(["tc", "-n", self.netns, "-batch", "-"], "\n".join(cmds) + "\n")
        self.routes = list(routes)

    def egress_routes(self) -> list[dict]:
        """routerd's direct-egress table: the port names are the same inside the namespace."""
        return egress_table(self.routes, self.node)

    def routerd_config(self) -> dict:
        """What routerd's config carries for this data plane (routerd calls tc itself)."""
        return {"netns": self.netns, "tc_block": tc.BLOCK, "tc_cpu_dev": self.cpu_switch_iface,
                "egress_routes": self.egress_routes()}

    # --- diversion at run time ---------------------------------------------------------
    def _tc(self, *args: str, ok_errors: tuple[str, ...] = ()) -> str:
        return run(["tc", "-n", self.netns, *args], ok_errors=ok_errors)

    def _need_cpu(self) -> None:
        if not self.capable:
            raise ValueError(f"router {self.name} is concast-oblivious: no CPU port")

    def disable_diversion(self) -> None:
        """Forward like an oblivious router (routerd gone): every diversion rule goes, in one
        tc process (a bypass is as fast as the control plane can make it)."""
        run_tc_batch(self.netns, [" ".join(tc.delete_argv(pref))
                                  for pref in (tc.PREF_OWN, tc.PREF_CSP, tc.PREF_SELECTOR)],
                     ok_errors=GONE)

    def enable_diversion(self) -> None:
        self._need_cpu()
        stdin = "\n".join(tc.static_cmds(self.plan.own_addresses(), self.cpu_switch_iface))
        run(["tc", "-n", self.netns, "-batch", "-"], stdin + "\n")

    def add_selector(self, receiver, proto: int = 0, dport: int = 0) -> int:
        """Divert (R, P, D) to the CPU port (as routerd does); returns the rule's handle."""
        self._need_cpu()
        want = (str(IPv4Address(receiver)), proto, dport if proto in (6, 17) else 0)
        used = [f["handle"] for f in self.flows() if f["pref"] == tc.PREF_SELECTOR]
        for f in self.flows():
            if f["pref"] == tc.PREF_SELECTOR and (f["dst"], f["proto"], f["dport"]) == want:
                return f["handle"]
        handle = max([h for h in used if h >= tc.SELECTOR_HANDLE_PEOPLE],
                     default=tc.SELECTOR_HANDLE_PEOPLE - 1) + 1
        line = tc.filter_cmd(tc.PREF_SELECTOR, handle, divert_program(*want),
                             self.cpu_switch_iface)
        run(["tc", "-n", self.netns, "-batch", "-"], line + "\n")
        return handle

    def remove_selector(self, receiver, proto: int = 0, dport: int = 0) -> None:
        want = (str(IPv4Address(receiver)), proto, dport if proto in (6, 17) else 0)
        for f in self.flows():
            if f["pref"] == tc.PREF_SELECTOR and (f["dst"], f["proto"], f["dport"]) == want:
                self._tc(*tc.delete_argv(tc.PREF_SELECTOR, f["handle"]),
                         ok_errors=GONE)

    def selectors(self) -> list[tuple[str, int, int]]:
        return [(f["dst"], f["proto"], f["dport"]) for f in self.flows()
                if f["pref"] == tc.PREF_SELECTOR]

    # --- counters ----------------------------------------------------------------------
    def flows(self) -> list[dict]:
        """Every diversion rule with its packet and byte counts (tc filter statistics)."""
        if not self.capable:
            return []
        out = self._tc("-s", "-j", "filter", "show", "block", str(tc.BLOCK))
        return tc.parse_filters(json.loads(out or "[]"))

    def ports(self) -> dict[str, dict]:
        """Kernel interface counters keyed like OVS ports ("1", "2", ..., "1000" = the CPU
        port's kernel end: tx = diverted, rx = written back by routerd)."""
        out = run(["ip", "-n", self.netns, "-s", "-j", "link", "show"])
        links = tc.parse_links(json.loads(out or "[]"))
        ports = {str(p.ofport): links[self.port_name(p.ofport)] for p in self.plan.ports
                 if self.port_name(p.ofport) in links}
        if self.capable and self.cpu_switch_iface in links:
            ports[str(CPU_OFPORT)] = links[self.cpu_switch_iface]
        return ports

    def port_to(self, peer: str) -> int:
        return next(p.ofport for p in self.plan.ports if p.peer == peer)
