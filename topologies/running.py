"""A started concast network: Mininet hosts, data-plane routers, daemons, teardown."""
from __future__ import annotations

import atexit
import json
import os
import re
import subprocess
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from concast.controller import dataplanes, routerdconfig
from concast.controller.daemons import Daemon, Daemons
from concast import registry
from concast.netmodel import addressing, naming
from concast.topologies import leftovers
from concast.topologies.capture import Capture
from concast.netmodel.model import Topology

RUNS_DIR = Path("/tmp/concast/runs")  # logs, configs and sockets of each run; kept for reading


def runs_dir() -> Path:
    """Where runs go: $CONCAST_RUNS_DIR if set (the tests use pytest's temporary space)."""
    return Path(os.environ.get("CONCAST_RUNS_DIR", RUNS_DIR))
_live: "weakref.WeakSet[RunningNet]" = weakref.WeakSet()


@atexit.register
def _stop_forgotten() -> None:
    for net in list(_live):
        net.stop()


def _is_veth(iface: str) -> bool:
    """A root-namespace veth (its iflink is its peer's index; a TAP's is its own)."""
    try:
        sys_dir = Path("/sys/class/net") / iface
        return (sys_dir / "iflink").read_text() != (sys_dir / "ifindex").read_text()
    except OSError:
        return False


@dataclass(frozen=True)
class PingResult:
    ok: bool
    ttl: int | None         # TTL of the echo reply as the sender saw it
    rtt_ms: float | None


class RunningNet:
    """`n["h1"]` is a Mininet host, `n["r1"]` a router handle (OvsRouter for OVS)."""

    def __init__(self, topo: Topology, dataplane: str = "ovs", run_dir: Path | None = None,
                 quiet: bool = True, emulate: bool | str | None = None,
                 dataplane_options: dict | None = None) -> None:
        """dataplane_options: keyword arguments for the data plane's back end (BMv2: program,
        log; `concast net up --p4/--bmv2-log`)."""
        if os.geteuid() != 0:
            raise PermissionError("starting a concast network needs root (Mininet, OVS)")
        self.plan = addressing.plan(topo)
        self.dataplane_name = dataplane
        self.mn = None
        self.backend = None
        self.routers: dict = {}
        self.emulate = emulate
        self.dataplane_options = dict(dataplane_options or {})
        self.emulator = None        # a LinkEmulator when the links are emulated (links.py)
        self._stopped = False
        self.record = registry.RunRecord.reserve()
        self.tag = self.record.tag
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.run_dir = Path(run_dir) if run_dir else runs_dir() / f"{stamp}-{self.tag}"
        self.daemons = Daemons(self.run_dir / "logs", on_start=self._record_daemon)
        _live.add(self)
        try:
            self._start(quiet)
        except BaseException:
            self.stop()
            raise

    # --- start / stop ------------------------------------------------------------------
    def _start(self, quiet: bool) -> None:
        from mininet.link import TCLink
        from mininet.log import setLogLevel

        from concast.topologies import links
        from mininet.net import Mininet
        if quiet:
            setLogLevel("error")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tag, plan = self.tag, self.plan
        self.backend = dataplanes.backend(self.dataplane_name)(tag, plan,
                                                               **self.dataplane_options)
        if hasattr(self.backend, "attach"):     # BMv2: switch PIDs go into the run record
            self.backend.attach(self.record)
        bridges, dp_ifaces = self.backend.planned_names()
        link_ifaces = [naming.port_iface(tag, r.name, p.ofport)
                       for r in plan.routers.values() for p in r.ports]
        self.record.data.update(
            bridges=bridges, ifaces=dp_ifaces + link_ifaces, run_dir=str(self.run_dir),
            netns=[naming.netns(tag, h) for h in plan.hosts], dataplane=self.dataplane_name)
        self.record.save()

        self.mn = mn = Mininet(topo=None, build=False, controller=None, autoSetMacs=False)
        nodes = self.backend.add_routers(mn)
        for h in plan.hosts.values():
            host = mn.addHost(h.name, ip=f"{h.ip}/{h.subnet.prefixlen}", mac=h.mac,
                              defaultRoute=f"via {h.gateway}")
            # A name under /run/netns: cleanup can find the namespace after a crash,
            # and people can `ip netns exec cc<tag>-<host> ...` into it.
            subprocess.run(["ip", "netns", "attach", naming.netns(tag, h.name), str(host.pid)],
                           check=True, capture_output=True, timeout=10)
        # No checksum offload on any veth: userspace OVS forwards what it reads, and a
        # partial checksum from the sender's kernel would arrive as a bad one.
        link_opts = dict(cls=TCLink, txo=False, rxo=False)
        all_params = [h.params for h in plan.hosts.values()] + [ln.params for ln in plan.links]
        if links.link_kind(self.emulate, all_params) == "emu":
            # One emulator for every link (no netem here); TAPs never offload checksums.
            self.emulator = links.LinkEmulator(self.run_dir, tag, self.daemons)
            self.record.data.setdefault("files", [])
            self.record.extend("files", [str(self.emulator.state_path),
                                         str(self.emulator.socket_path),
                                         str(self.emulator.socket_path.parent)])
            self.emulator.start()
            link_opts = dict(cls=links.EmuLink, emu=self.emulator)
        mtus = []           # (Mininet link, MTU) for links with an `mtu` param
        for h in plan.hosts.values():
            port = plan.routers[h.router].port(h.ofport)
            params, mtu = links.split_mtu(h.params)
            link = mn.addLink(mn[h.name], nodes[h.router], port1=0, port2=h.ofport,
                              intfName1=naming.host_iface(h.name),
                              intfName2=naming.port_iface(tag, h.router, h.ofport),
                              addr1=h.mac, addr2=port.mac, **link_opts, **params)
            mtus += [(link, mtu)] if mtu else []
        for ln in plan.links:
            mac_a = plan.routers[ln.a].port(ln.port_a).mac
            mac_b = plan.routers[ln.b].port(ln.port_b).mac
            params, mtu = links.split_mtu(ln.params)
            link = mn.addLink(nodes[ln.a], nodes[ln.b], port1=ln.port_a, port2=ln.port_b,
                              intfName1=naming.port_iface(tag, ln.a, ln.port_a),
                              intfName2=naming.port_iface(tag, ln.b, ln.port_b),
                              addr1=mac_a, addr2=mac_b, **link_opts, **params)
            mtus += [(link, mtu)] if mtu else []
        self._bring_up(mtus)

    def _bring_up(self, mtus: list) -> None:
        """The start once every node and link is added: build, MTUs, the routers'
        configuration (the one step a cluster does its own way), configs, the hosts."""
        from concast.topologies import links
        self.mn.build()
        self.mn.start()
        for link, mtu in mtus:
            links.set_mtu(link, mtu)
        self.routers = self._configure_routers()
        self._write_router_configs()
        self._write_host_configs()
        for h in self.plan.hosts.values():
            self.mn[h.name].cmd(
                "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1;"
                f" ip neigh replace {h.gateway} lladdr {h.gateway_mac}"
                f" dev {naming.host_iface(h.name)} nud permanent")

    def _configure_routers(self) -> dict:
        """The data plane's routers programmed; returns their handles by name."""
        return self.backend.configure(self.record.data["owner_pid"],
                                      self.record.data["owner_start"])

    def stop(self) -> None:
        """Stop daemons, the network and every leftover of ours. Safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        _live.discard(self)
        steps = [self.daemons.stop_all]
        if self.backend is not None:
            steps.append(self.backend.teardown)
        if self.mn is not None:
            steps += [self._delete_link_veths, self.mn.stop]
        for step in steps:
            try:
                step()
            except Exception as e:          # keep going: the record sweep below must run
                print(f"concast: while stopping {self.tag}: {step.__qualname__}: {e}")
        leftovers.remove_run(self.record.data)
        self.record.remove()

    def _delete_link_veths(self) -> None:
        """Delete every link's veth pair with one `ip -batch` when all their switch ends are
        root-namespace veths (OVS); Mininet would run one `ip link del` per interface
        through a node's shell, about 20 s for a 220-router network."""
        names = [naming.port_iface(self.tag, r.name, p.ofport)
                 for r in self.plan.routers.values() for p in r.ports]
        if not names or not all(_is_veth(n) for n in names):
            return
        # Deleting one end of a veth deletes its peer, so a router-router link's second
        # name is already gone: -force keeps going past that error.
        subprocess.run(["ip", "-force", "-batch", "-"], capture_output=True, timeout=120,
                       input="".join(f"link del {n}\n" for n in names), text=True)
        self.mn.links = []

    def __enter__(self) -> "RunningNet":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- lookups -------------------------------------------------------------------------
    def __getitem__(self, name: str):
        if name in self.routers:
            return self.routers[name]
        if name in self.plan.hosts:
            return self.mn[name]
        raise KeyError(name)

    @property
    def hosts(self) -> dict:
        return {h: self.mn[h] for h in self.plan.hosts}

    def ip(self, name: str) -> str:
        """A host's address, or a router's router ID."""
        return str(self.plan.address_of(name))

    def iface(self, host: str) -> str:
        return naming.host_iface(host)

    def netns(self, host: str) -> str:
        return naming.netns(self.tag, host)

    # --- traffic helpers ---------------------------------------------------------------
    def ping(self, src: str, dst: str, count: int = 1, timeout: float = 2) -> PingResult:
        out = self.mn[src].cmd(f"ping -n -c {count} -W {timeout} -i 0.2 {self.ip(dst)}")
        ttls = re.findall(r"ttl=(\d+)", out)
        rtts = re.findall(r"time=([\d.]+) ms", out)
        return PingResult(bool(ttls), int(ttls[-1]) if ttls else None,
                          float(rtts[-1]) if rtts else None)

    def capture(self, host: str, bpf: str = "", name: str | None = None) -> Capture:
        """tcpdump on the host's interface into <run_dir>/pcap/<name>.pcap."""
        path = self.run_dir / "pcap" / f"{name or host}.pcap"
        return Capture(self.mn[host], naming.host_iface(host), path, bpf)

    # --- daemons -------------------------------------------------------------------------
    def _record_daemon(self, d: Daemon) -> None:
        self.record.extend("daemons", [d.record()])

    def router_fields(self, router: str) -> dict:
        """What a routerd command line may refer to, as {field} in start_routerd()."""
        r = self.routers[router]
        fields = {"router": router, "node": r.node, "cpu_iface": r.cpu_iface,
                  "cpu_ofport": r.cpu_ofport, "addr": str(r.router_id),
                  "router_mac": r.mac, "cpu_mac": r.plan.cpu_routerd_mac,
                  "run_dir": str(self.run_dir), "tag": self.tag,
                  "config": str(self.run_dir / "routers" / f"{router}.json")}
        if self.dataplane_name == "ovs":      # the bridge whose selectors routerd manages
            fields["bridge"] = r.bridge
        return fields

    def _write_router_configs(self) -> None:
        """<run_dir>/routers/<router>.json: everything routerd needs to know about its
        router, for a `--config {config}` argument."""
        folder = self.run_dir / "routers"
        folder.mkdir(parents=True, exist_ok=True)
        for name, r in self.routers.items():
            cfg = {k: v for k, v in self.router_fields(name).items() if k != "config"}
            cfg.update(capable=r.capable, dataplane=self.dataplane_name,
                       addresses=[str(a) for a in r.plan.own_addresses()])
            if self.dataplane_name == "bmv2":
                # No direct egress: simple_switch also reads the frames sent on its ports,
                # so they would loop through it until their TTL ran out (measured).
                cfg.update(p4_switch=r.address, dataplane_cmd=r.command_line(),
                           port_routes=r.port_routes())
            elif self.dataplane_name == "linux":
                if r.capable:   # routerd runs in the router's namespace and calls tc itself
                    cfg.update(r.routerd_config())
            elif r.capable:
                cfg.update(egress_routes=r.egress_routes())
            emu = self._emulator_of(name)
            if emu is not None:
                # routerd reads how busy each output link is (docs/linkemu.md, state file).
                cfg["link_state"] = str(emu.state_path)
                for route in cfg.get("egress_routes", []):
                    slot = emu.slot_of_iface.get(route["iface"])
                    if slot is not None:
                        route["link_slot"] = slot
            routerdconfig.write(folder / f"{name}.json", cfg)

    def _emulator_of(self, router: str):
        """The emulator of the router's output links (a cluster has one per server)."""
        return self.emulator

    def start_daemon(self, router: str, argv: list[str], name: str = "routerd",
                     env: dict | None = None) -> Daemon:
        """Inside the router's namespace when it has one (the Linux data plane)."""
        netns = getattr(self.routers.get(router), "netns", None)
        return self.daemons.start(router, argv, name, env, netns=netns)

    def start_routerd(self, argv: list[str], routers: list[str] | None = None,
                      name: str = "routerd", env: dict | None = None) -> dict[str, Daemon]:
        """Start one daemon per capable router from a template, e.g.
        [str(tools.rust_binary("concast-routerd")), "--config", "{config}",
         "--hold", "3"]; fields: see router_fields()."""
        chosen = ([r for r, h in self.routers.items() if h.capable] if routers is None
                  else list(routers))
        return {r: self.start_daemon(r, [a.format(**self.router_fields(r)) for a in argv],
                                     name, env)
                for r in chosen}

    def routerd_socket(self, router: str) -> Path:
        """Where routerd started with `--config {config}` answers `concast router ...`."""
        return self.run_dir / "routers" / f"{router}.sock"

    def host_fields(self, host: str) -> dict:
        """What a hostd command line may refer to, as {field} in start_hostd()."""
        h = self.plan.hosts[host]
        return {"host": host, "addr": str(h.ip), "gateway": str(h.gateway),
                "iface": naming.host_iface(host), "netns": self.netns(host),
                "router": h.router, "run_dir": str(self.run_dir), "tag": self.tag,
                "socket": str(self.hostd_socket(host)),
                "config": str(self.run_dir / "hosts" / f"{host}.json")}

    def hostd_socket(self, host: str) -> Path:
        """The concast API socket of the host's hostd (Unix sockets cross namespaces)."""
        return self.run_dir / "hosts" / f"{host}.sock"

    def _write_host_configs(self) -> None:
        """<run_dir>/hosts/<host>.json: what hostd needs to know about its host, for a
        `--config {config}` argument."""
        folder = self.run_dir / "hosts"
        folder.mkdir(parents=True, exist_ok=True)
        for name in self.plan.hosts:
            cfg = {k: v for k, v in self.host_fields(name).items() if k != "config"}
            (folder / f"{name}.json").write_text(json.dumps(cfg, indent=1) + "\n")

    def start_hostd(self, argv: list[str], hosts: list[str] | None = None,
                    name: str = "hostd", env: dict | None = None) -> dict[str, Daemon]:
        """Start one daemon per host (default: every host) inside the host's namespace,
        from a template, e.g. [str(tools.rust_binary("concast-hostd")), "--config",
        "{config}"]; fields: see host_fields(). Logs go to <run_dir>/logs/<host>-<name>.log;
        PIDs are in the run record and stop() stops them like routerd."""
        chosen = list(self.plan.hosts) if hosts is None else list(hosts)
        return {h: self.daemons.start(h, [a.format(**self.host_fields(h)) for a in argv],
                                      name, env, netns=self.netns(h))
                for h in chosen}

    def start_concast(self, hold: float = 3, routerd_args: list[str] = (),
                      hostd_args: list[str] = (), routers: list[str] | None = None,
                      hosts: list[str] | None = None, timeout: float = 30.0
                      ) -> tuple[dict[str, Daemon], dict[str, Daemon]]:
        """The project's concast-routerd on every capable router and concast-hostd on every
        host (or the ones named; `hosts=()` starts none), each with `--config {config}
        --hold HOLD` plus the extra arguments; returns (routerd daemons, hostd daemons) once
        every one answers on its socket. Raises TimeoutError naming the ones that did not
        (see their logs). The one way the tests, benchmarks and experiments start them."""
        from concast import tools
        from concast.controller import routerdmgmt as routerd
        from concast.hosts.client import Client
        common = ["--config", "{config}", "--hold", f"{hold:g}"]
        rd = self.start_routerd([str(tools.rust_binary("concast-routerd")), *common,
                                 *routerd_args], routers)
        hd = self.start_hostd([str(tools.rust_binary("concast-hostd")), *common,
                               *hostd_args], hosts)

        def routerd_answers(r: str) -> bool:
            routerd.query(self.routerd_socket(r), "status", timeout=1.0)
            return True

        def hostd_answers(h: str) -> bool:
            with Client(self.hostd_socket(h), timeout=1.0) as c:
                c.status()
            return True
        waiting = {**{("routerd", r): routerd_answers for r in rd},
                   **{("hostd", h): hostd_answers for h in hd}}
        deadline = time.monotonic() + timeout
        while waiting:
            for key, check in list(waiting.items()):
                try:
                    if check(key[1]):
                        del waiting[key]
                except (OSError, TimeoutError, ValueError):
                    pass
            if not waiting:
                break
            dead = [f"{k[0]} on {k[1]}" for k in waiting
                    if not (rd if k[0] == "routerd" else hd)[k[1]].alive()]
            if dead or time.monotonic() > deadline:
                names = dead or [f"{k[0]} on {k[1]}" for k in waiting]
                why = "exited" if dead else f"did not answer within {timeout:g} s"
                raise TimeoutError(f"{', '.join(names[:8])}{' ...' if len(names) > 8 else ''}"
                                   f" {why}; logs in {self.run_dir / 'logs'}")
            time.sleep(0.05)
        return rd, hd

    def stop_daemons(self) -> None:
        self.daemons.stop_all()

    # --- counters ------------------------------------------------------------------------
    def counters(self) -> dict[str, dict]:
        """{router: {"flows": [...], "ports": {...}}} from ovs-ofctl dump-flows/dump-ports."""
        return {name: {"flows": r.flows(), "ports": r.ports()} for name, r in self.routers.items()}

    def describe(self) -> str:
        return addressing.describe(self.plan, self.tag)

