"""The BMv2 data plane of a concast network: one `simple_switch_grpc` per router, on the
router's root-namespace veths (named like the OVS ones), programmed over P4Runtime
(docs/dataplane-bmv2.md, "In a concast network").

Each router is a Mininet switch node in the root namespace that does nothing itself
(`Bmv2Node`): Mininet creates and deletes its link veths; the switch process is started
by `configure()` after `mn.start()`, tracked by PID and start time in the run record
(so leftovers cleanup stops it after a crash) and stopped by PID in `teardown()`.
"""
from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from concast.controller.p4 import pipeline as P
from concast.controller.routes import Route, all_routes, egress_table
from concast import procs
from concast.netmodel import naming
from concast.netmodel.addressing import Plan, RouterPlan
from concast.sysfs import disable_ipv6

# Unix socket paths hold at most 107 bytes, and run directories under pytest's temporary
# space are long: the switches' sockets and logs go here, one folder per run.
SOCKET_DIR = Path("/run/concast/p4")


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_class():
    from mininet.node import Switch

    class Bmv2Node(Switch):
        """A Mininet switch node in the root namespace that runs nothing: the data plane
        starts simple_switch_grpc on its interfaces itself."""

        def __init__(self, name, **params):
            params["inNamespace"] = False
            super().__init__(name, **params)

        def start(self, controllers):
            pass

        def stop(self, deleteIntfs=True):
            super().stop(deleteIntfs)

    return Bmv2Node


@dataclass
class Bmv2Router:
    """One BMv2 router: names (as OvsRouter has them, for router_fields), the switch and
    its P4Runtime handle (`p4`: a P4Router, primary controller, ELECTION_CONTROL)."""
    plan: RouterPlan
    node: str                       # Mininet node name = prefix of the port names
    cpu_switch_iface: str | None    # the CPU port, BMv2 port 255
    cpu_iface: str | None           # its peer: the end routerd opens with AF_PACKET
    switch: object = None           # concast.controller.p4.switch.Switch
    client: object = None           # P4RuntimeClient
    p4: object = None               # P4Router
    routes: list[Route] = field(default_factory=list)   # as installed
    p4info: Path | None = None      # the program's P4Info (None: p4src/concast.p4's)

    name = property(lambda self: self.plan.name)
    capable = property(lambda self: self.plan.capable)
    router_id = property(lambda self: self.plan.router_id)
    mac = property(lambda self: self.plan.mac)
    cpu_ofport = P.CPU_PORT

    @property
    def address(self) -> str:
        """The switch's P4Runtime address (unix:PATH)."""
        return self.switch.address

    def port_routes(self) -> list[dict]:
        """The forwarding routes with the interface each leaves by, in routerd's egress-route
        format. routerd reads its links' MTUs from them (docs/protocol.md 2.3); it never
        sends on these ports (simple_switch reads what is sent on them too)."""
        return egress_table(self.routes, self.node)

    def ports_map(self, tag: str) -> dict[int, str]:
        ports = {p.ofport: naming.port_iface(tag, self.name, p.ofport) for p in self.plan.ports}
        if self.cpu_switch_iface:
            ports[P.CPU_PORT] = self.cpu_switch_iface
        return ports

    # --- run time (the same calls routerd's command makes) ------------------------------
    def add_flow(self, receiver, group: int) -> None:
        self.p4.add_flow(receiver, group)

    def remove_flow(self, receiver, group: int) -> None:
        self.p4.remove_flow(receiver, group)

    def disable_diversion(self) -> None:
        self.p4.disable_diversion()

    def enable_diversion(self) -> None:
        self.p4.enable_diversion()

    def flows(self) -> list[tuple[str, int]]:
        """(R, G) of every concast_flows entry on the switch (also those routerd wrote)."""
        from ipaddress import IPv4Address
        return [(str(IPv4Address(r)), g) for r, g in self.p4.flows_on_switch()]

    def ports(self) -> dict:
        """The pipeline's counters (BMv2 has no per-port counters over P4Runtime here)."""
        return self.p4.counters()

    def counters(self) -> dict:
        return self.p4.counters()

    def port_counters(self, tag: str) -> dict[str, dict]:
        """The kernel counters of the switch's own interfaces (root namespace), keyed like
        OVS ports: "1", "2", ... and the CPU port under naming.CPU_OFPORT. rx = frames handed
        to simple_switch, tx = frames it sent. Frames BMv2 itself loses (its capture buffer
        or queues full) show in none of these nor in the P4 counters: only as rx that never
        became tx or a pipeline count."""
        import json
        import subprocess
        from concast.controller.linux.tc import parse_links
        out = subprocess.run(["ip", "-s", "-j", "link", "show"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
        links = parse_links(json.loads(out or "[]"))
        keys = {iface: str(naming.CPU_OFPORT if port == P.CPU_PORT else port)
                for port, iface in self.ports_map(tag).items()}
        return {key: links[iface] for iface, key in keys.items() if iface in links}

    def intake(self, tag: str) -> dict[str, dict]:
        """Per port (keyed as port_counters): `kernel_rx`, the frames the kernel delivered to
        the switch's interface; `parsed`, the frames the P4 parser handed to ingress from
        that port (counter `received`); `intake_lost`, the difference: frames simple_switch
        took from neither into its pipeline (its capture socket's buffer or its input queue
        full). Cumulative since the interface and the switch started; take differences. The
        P4 counter is read first, so a frame in flight between the two shows as lost until
        the switch has drained."""
        parsed = self.p4.received()
        kernel = self.port_counters(tag)
        out = {}
        for port in self.ports_map(tag):
            key = str(naming.CPU_OFPORT if port == P.CPU_PORT else port)
            if key in kernel:
                rx, seen = kernel[key]["rx_pkts"], parsed.get(str(port), 0)
                out[key] = {"kernel_rx": rx, "parsed": seen, "intake_lost": rx - seen}
        return out

    def egress(self, tag: str) -> dict[str, dict]:
        """What the program sent to a port against what the kernel counted out of it, for
        the CPU port (`cpu`: the `diverted` counter's frames) and the other ports together
        (`ports`: `forwarded` + `arp_answered`). simple_switch drops a frame silently when
        its egress queue for the port (64 frames) is full; `egress_lost` is the difference.
        Cumulative; take differences when the switch is idle (a queued frame shows as lost
        until it leaves)."""
        c = self.p4.counters()
        kernel = self.port_counters(tag)
        cpu = str(naming.CPU_OFPORT)
        to_cpu = sum(c["diverted"].values())
        to_ports = c["forwarded"] + c["arp_answered"]
        tx_cpu = kernel.get(cpu, {}).get("tx_pkts", 0)
        tx_ports = sum(p["tx_pkts"] for k, p in kernel.items() if k != cpu)
        return {"cpu": {"sent_by_p4": to_cpu, "kernel_tx": tx_cpu, "egress_lost": to_cpu - tx_cpu},
                "ports": {"sent_by_p4": to_ports, "kernel_tx": tx_ports,
                          "egress_lost": to_ports - tx_ports}}

    def command_line(self) -> str:
        """What routerd runs for divert/undivert/clear (--dataplane-cmd, whitespace-split)."""
        return (f"{sys.executable} -m concast.controller.p4 --switch {self.address}"
                f" --p4info {self.p4info or P.P4INFO_PATH}")


def switch_log_dir(run_dir: str | Path | None, fallback: Path) -> Path:
    """Where --bmv2-log puts the switches' logs: <run dir>/bmv2 (kept after the network
    stops, unlike the socket folder), or `fallback` when there is no run record."""
    return Path(run_dir) / "bmv2" if run_dir else fallback


class Bmv2Dataplane:
    name = "bmv2"

    def __init__(self, tag: str, plan: Plan, program: tuple[Path, Path] | None = None,
                 log: bool = False) -> None:
        """program: (BMv2 JSON, P4Info) of a compiled user program to run instead of
        p4src/concast.p4 (`concast net up --p4`, controller.p4.program); log: each switch
        writes its debug log (`--bmv2-log`) into <run dir>/bmv2/."""
        self.tag = tag
        self.plan = plan
        self.program = tuple(Path(x) for x in program) if program else None
        self.log = log
        self.log_dir: Path | None = None
        self.record = None          # the run record, given by RunningNet (attach)
        self.dir = SOCKET_DIR / naming.run_prefix(tag)
        self.routers: dict[str, Bmv2Router] = {}
        for r in plan.routers.values():
            self.routers[r.name] = Bmv2Router(
                r, naming.node(tag, r.name),
                naming.cpu_switch_iface(tag, r.name) if r.capable else None,
                naming.cpu_routerd_iface(tag, r.name) if r.capable else None)

    def attach(self, record) -> None:
        """The run record: switch PIDs go into its `daemons` list."""
        self.record = record

    def planned_names(self) -> tuple[list[str], list[str]]:
        """(bridges, root-namespace interfaces): no bridges, only the CPU veths."""
        ifaces = [i for r in self.routers.values() for i in (r.cpu_switch_iface, r.cpu_iface) if i]
        return [], ifaces

    def add_routers(self, mn) -> dict:
        cls = _node_class()
        return {r.name: mn.addSwitch(r.node, cls=cls) for r in self.routers.values()}

    def configure(self, owner_pid: int, owner_start: int | None) -> dict[str, Bmv2Router]:
        from concast.controller.p4.p4rt import P4RuntimeClient
        from concast.controller.p4.router import P4Router
        from concast.controller import cpuport
        from concast.controller.p4.switch import Switch
        import subprocess
        json_path, p4info_path = self.program or (P.JSON_PATH, P.P4INFO_PATH)
        for path in (json_path, p4info_path):
            if not Path(path).exists():
                raise RuntimeError(f"{path} is missing: run `make p4` (p4c-bm2-ss on PATH)")
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.log:
            run_dir = self.record.data.get("run_dir") if self.record is not None else None
            self.log_dir = switch_log_dir(run_dir, self.dir)
            self.log_dir.mkdir(parents=True, exist_ok=True)
        for r in self.routers.values():
            if r.capable:
                sw, rd = r.cpu_switch_iface, r.cpu_iface
                subprocess.run(["ip", "-batch", "-"], check=True, capture_output=True, timeout=10,
                               text=True, input="\n".join(cpuport.veth_cmds(
                                   sw, r.plan.cpu_switch_mac, rd, r.plan.cpu_routerd_mac)) + "\n")
                for i in (sw, rd):   # BMv2 reads and writes whole frames: no offload
                    subprocess.run(["ethtool", "-K", i, "tx", "off", "rx", "off"],
                                   capture_output=True, timeout=10)
            ports = r.ports_map(self.tag)
            disable_ipv6(list(ports.values()) + ([r.cpu_iface] if r.cpu_iface else []))
            # Thrift (unused here, but always opened) on a free loopback port: the
            # switches share the root namespace, where 9090 may be taken.
            r.switch = Switch(r.node, ports, rundir=self.dir, thrift_port=_free_port(),
                              log=self.log)
            if self.log_dir is not None:
                r.switch.logfile = self.log_dir / f"{r.name}.log"
                print(f"BMv2 log of {r.name}: {r.switch.logfile}", flush=True)
            try:
                r.switch.start(timeout=30)
            except RuntimeError as e:
                out = self.dir / f"{r.node}.out"
                tail = out.read_text(errors="replace")[-1500:] if out.exists() else ""
                raise RuntimeError(f"{r.name}: {e}: {tail}") from None
            if self.record is not None:
                pid = r.switch.proc.pid
                self.record.extend("daemons", [{"router": r.name, "name": "simple_switch_grpc",
                                                "pid": pid, "start": procs.start_time(pid)}])
        routes = all_routes(self.plan)
        for r in self.routers.values():
            r.client = P4RuntimeClient(r.switch.address)   # ELECTION_CONTROL
            r.client.set_pipeline(p4info_path, json_path)
            r.p4info = Path(p4info_path)
            r.p4 = P4Router(r.client)
            r.routes = list(routes[r.name])
            if r.capable:
                r.p4.install(r.plan, routes[r.name])
            else:
                r.client.insert(P.base_entries(r.plan, routes[r.name]))
        return self.routers

    def teardown(self) -> None:
        """Close P4Runtime, stop the switches by PID, delete the CPU ports (Mininet removes
        the link veths)."""
        import subprocess
        for r in self.routers.values():
            if r.client is not None:
                try:
                    r.client.close()
                except Exception:
                    pass
            if r.switch is not None:
                r.switch.stop()
            if r.cpu_switch_iface:
                subprocess.run(["ip", "link", "del", r.cpu_switch_iface],
                               capture_output=True, timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)
