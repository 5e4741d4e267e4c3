"""A concast network started over several servers with Mininet Cluster Edition.

Same plan (addresses, ports, MACs, routes) as RunningNet; what differs is where things run:
every router and host is a node on its placed server (a shell over ssh), links within a
server are veth pairs, links between servers VXLAN tunnels (links.py), and every command
for a router's namespace goes through its server's shell (serverset.py). Linux data plane.

routerd and hostd run on their node's server (daemons.py): the run directory's configs are
shipped to each server at the same path, their output comes back into the driver's logs, and
the driver reaches their sockets through ssh's Unix-socket forwarding.

Links with delay, loss, rate or a queue are emulated by one concast-linkemu per server
(linkemu.py): each direction on its sending side, so each router's link state is in its own
server's /dev/shm.
"""
from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

from concast.controller.routes import all_routes
from concast.netmodel import naming
from concast.topologies import links as emu_links
from concast.topologies.cluster import placement as placing
from concast.topologies.cluster.daemons import ClusterDaemons, SocketForwards
from concast.topologies.cluster.servers import ServerDown
from concast.topologies.cluster.serverset import ServerSet
from concast.topologies.running import RunningNet

__all__ = ["ClusterRunningNet", "NotOnClusterYet", "ServerDown"]


class NotOnClusterYet(RuntimeError):
    pass


class ClusterRunningNet(RunningNet):
    def __init__(self, topo, dataplane: str, run_dir, quiet: bool, emulate,
                 servers: ServerSet, placement: dict[str, str]) -> None:
        if dataplane != "linux":
            raise NotOnClusterYet(f"--servers: the {dataplane} data plane is not built for a "
                                  "cluster yet; use --dataplane linux")
        if emulate == "netem":
            raise NotOnClusterYet("--servers: netem links are not built for a cluster; the "
                                  "link emulator is (emulate=True or None)")
        self.servers = servers
        self.placement = placement
        self.crossing = placing.crossing_links(topo, placement)
        self._netns_made: list[tuple[str, str]] = []     # (server, netns name)
        self.forwards: SocketForwards | None = None
        self._shipped: list[str] = []       # servers that got a copy of the run directory
        self._down: set[str] = set()        # servers found down; they stay down
        self.emulators = None               # an EmulatorSet when the links are emulated
        super().__init__(topo, dataplane, run_dir, quiet, emulate=emulate)

    def _start(self, quiet: bool) -> None:
        from mininet.examples.cluster import MininetCluster
        from mininet.log import setLogLevel

        from concast.controller.dataplanes import backend
        from concast.controller.linux.dataplane import _node_class
        from concast.topologies.cluster.links import (ClusterHost, VxlanLink, remote_class,
                                                      use_ssh_config)
        from concast.topologies.cluster.linkemu import ClusterEmuLink
        if quiet:
            setLogLevel("error")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tag, plan, srv = self.tag, self.plan, self.servers
        params = [h.params for h in plan.hosts.values()] + [ln.params for ln in plan.links]
        emulated = emu_links.link_kind(self.emulate, params) == "emu"
        dropped = sorted({k for p in params for k in p if k != "mtu"})
        if dropped and not emulated:
            raise NotOnClusterYet(
                f"--servers: links with {', '.join(dropped)} without the link emulator (tc "
                "shaping) are not built for a cluster; leave emulation on")
        self.backend = backend("linux")(tag, plan)
        self.record.data.update(run_dir=str(self.run_dir), dataplane="linux",
                                cluster={**srv.describe(), "placement": self.placement},
                                cluster_daemons=[], cluster_files=[])
        self.record.save()
        # The configs go to the servers just before the first daemon starts (they are
        # final by then); daemons are the only readers of them there.
        self.daemons = ClusterDaemons(self.run_dir / "logs", srv, self.placement,
                                      self.run_dir / "pids", on_start=self._record_remote,
                                      prepare=self._ship_run_dir)
        self.forwards = SocketForwards(srv, self.run_dir / "fwd")
        use_ssh_config(srv.ssh_config)
        self.mn = mn = MininetCluster(servers=srv.names, serverIP=srv.ips, user=srv.user,
                                      link=VxlanLink, host=ClusterHost, controller=None,
                                      topo=None, build=False, autoSetMacs=False)
        link_opts = {}
        if emulated:
            link_opts = dict(cls=ClusterEmuLink, emus=self._start_emulators(), tag=tag)
        router_cls = remote_class(_node_class())
        nodes = {}

        def at(name):
            s = self.placement[name]
            return dict(server=s, serverIP=srv.ips[s], user=srv.user)
        for r in self.backend.routers.values():
            nodes[r.name] = mn.addHost(r.node, cls=router_cls, **at(r.name))
            self._attach(r.name, r.netns, nodes[r.name].pid)
        for h in plan.hosts.values():
            host = mn.addHost(h.name, ip=f"{h.ip}/{h.subnet.prefixlen}", mac=h.mac,
                              defaultRoute=f"via {h.gateway}", **at(h.name))
            self._attach(h.name, naming.netns(tag, h.name), host.pid)
        mtus = []
        for h in plan.hosts.values():
            port = plan.routers[h.router].port(h.ofport)
            lp, mtu = emu_links.split_mtu(h.params)
            link = mn.addLink(mn[h.name], nodes[h.router], port1=0, port2=h.ofport,
                              intfName1=naming.host_iface(h.name),
                              intfName2=naming.port_iface(tag, h.router, h.ofport),
                              addr1=h.mac, addr2=port.mac, **link_opts,
                              **(lp if emulated else {}))
            mtus += [(link, mtu)] if mtu else []
        for ln in plan.links:
            lp, mtu = emu_links.split_mtu(ln.params)
            link = mn.addLink(nodes[ln.a], nodes[ln.b], port1=ln.port_a, port2=ln.port_b,
                              intfName1=naming.port_iface(tag, ln.a, ln.port_a),
                              intfName2=naming.port_iface(tag, ln.b, ln.port_b),
                              addr1=plan.routers[ln.a].port(ln.port_a).mac,
                              addr2=plan.routers[ln.b].port(ln.port_b).mac, **link_opts,
                              **(lp if emulated else {}))
            mtus += [(link, mtu)] if mtu else []
        self._bring_up(mtus)

    def _start_emulators(self):
        """One concast-linkemu on every server that has nodes (linkemu.py)."""
        from concast.topologies.cluster.linkemu import EmulatorSet, ServerEmulator
        used = [s for s in self.servers.names if s in set(self.placement.values())]
        self.emulators = EmulatorSet({})
        for s in used:
            e = ServerEmulator(s, self.servers, self.daemons, self.tag, self.run_dir / "logs")
            self.emulators.by_server[s] = e
            e.start()
            self.record.extend("cluster_files", [{"server": s, "path": str(e.state_path)},
                                                 {"server": s, "path": str(e.remote_socket)}])
        self.emulator = self.emulators
        return self.emulators

    def _emulator_of(self, router: str):
        return self.emulators.of(self.placement[router]) if self.emulators else None

    def _stop_emulators(self) -> None:
        if self.emulators is None:
            return
        for s, e in self.emulators.by_server.items():
            if s in self._down:
                continue
            try:
                e.stop()
            except ServerDown as err:
                print(f"concast: {err}: its link emulator went with it")
                self._note_down(s)

    def _configure_routers(self) -> dict:
        """The one start step done differently: LinuxRouter.program()'s commands, each
        run on the router's server (the namespace names exist only there)."""
        self._program_routers()
        return self.backend.routers

    def _attach(self, node: str, netns: str, pid: int) -> None:
        """A /run/netns name for the node's namespace, on its server (PID is the server's)."""
        server = self.placement[node]
        self.servers.run(server, ["ip", "netns", "attach", netns, str(pid)])
        self._netns_made.append((server, netns))

    def _program_routers(self) -> None:
        """LinuxRouter.program(), each command run on the router's server."""
        routes = all_routes(self.plan)
        for r in self.backend.routers.values():
            s = self.placement[r.name]
            r.routes = routes[r.name]
            self.servers.run(s, ["ip", "-n", r.netns, "-batch", "-"],
                             "\n".join(r.ip_cmds(routes[r.name])) + "\n")
            self.servers.run(s, ["ip", "netns", "exec", r.netns, "sysctl", "-qw",
                                 *r.sysctls()])
            cmds = r.tc_cmds()
            if cmds:
                self.servers.run(s, ["tc", "-n", r.netns, "-batch", "-"], "\n".join(cmds) + "\n")

    # --- daemons on their servers ----------------------------------------------------------
    def _record_remote(self, d, server: str) -> None:
        # Not under "daemons": those PIDs are the servers', and `concast net cleanup` on the
        # driver must not take them for its own.
        self.record.extend("cluster_daemons", [{**d.record(), "server": server}])

    def _remote_hostd_socket(self, host: str) -> Path:
        return self.run_dir / "hosts" / f"{host}.sock"

    def host_fields(self, host: str) -> dict:
        f = super().host_fields(host)
        f["socket"] = str(self._remote_hostd_socket(host))     # where hostd binds, there
        return f

    def hostd_socket(self, host: str) -> Path:
        """The driver's end of the host's hostd socket (forwarded from its server)."""
        return self._local.get(("hostd", host)) or self._remote_hostd_socket(host)

    def routerd_socket(self, router: str) -> Path:
        return self._local.get(("routerd", router)) or super().routerd_socket(router)

    @property
    def _local(self) -> dict:
        return self.__dict__.setdefault("_local_sockets", {})

    def _ship_run_dir(self) -> None:
        """The routers' and hosts' configs to every server, at the same path (one tar each).
        A server that already sees the driver's run directory (a shared file system) is
        left alone, and its copy is never removed."""
        mark = self.run_dir / f".driver-{secrets.token_hex(4)}"
        mark.write_text("")
        rel = str(self.run_dir).lstrip("/")
        for s in self.servers.names:
            if s == "localhost" or self.servers.run(
                    s, ["sh", "-c", f"test -e '{mark}' && echo shared; true"]).strip():
                continue
            tar = subprocess.Popen(["tar", "-C", "/", "-cf", "-", f"{rel}/routers",
                                    f"{rel}/hosts"], stdout=subprocess.PIPE)
            self._shipped.append(s)
            ssh = subprocess.run(self.servers.argv(s, ["tar", "-C", "/", "-xf", "-"]),
                                 stdin=tar.stdout, capture_output=True, timeout=120)
            tar.stdout.close()
            tar.wait()
            if ssh.returncode != 0:
                raise RuntimeError(f"copying the run directory to {s}: {ssh.stderr.decode()}")
        mark.unlink()

    def start_concast(self, *args, hosts=None, routers=None, **kwargs):
        """RunningNet.start_concast, with each daemon's socket forwarded to the driver."""
        chosen_r = ([r for r, h in self.routers.items() if h.capable] if routers is None
                    else list(routers))
        chosen_h = list(self.plan.hosts) if hosts is None else list(hosts)
        for r in chosen_r:
            self._local[("routerd", r)] = self.forwards.add(
                self.placement[r], f"routerd-{r}", super().routerd_socket(r))
        for h in chosen_h:
            self._local[("hostd", h)] = self.forwards.add(
                self.placement[h], f"hostd-{h}", self._remote_hostd_socket(h))
        self.forwards.start()
        return super().start_concast(*args, hosts=hosts, routers=routers, **kwargs)

    def stop(self) -> None:
        """Stops daemons, forwards, nodes and links, namespace names and the servers' copies
        of the run directory. A server that does not answer is reported and left out;
        nothing here waits on it beyond ssh's bounded timeouts."""
        if self._stopped:
            return
        self._stopped = True
        from concast.topologies import running
        running._live.discard(self)
        from concast.topologies.cluster.links import use_ssh_config
        steps = [self._stop_daemons]
        if self.forwards is not None:
            steps.append(self.forwards.stop)
        if self.mn is not None:
            steps.append(self._stop_nodes)
        steps += [self._stop_emulators, self._delete_netns, self._remove_shipped]
        for step in steps:
            try:
                step()
            except Exception as e:
                print(f"concast: while stopping {self.tag}: {step.__qualname__}: {e}")
        self._report_down()
        use_ssh_config(None)
        self.record.remove()

    # --- servers that die --------------------------------------------------------------------
    def servers_down(self, timeout: float = 5) -> list[str]:
        """Servers whose node shells have ended or that do not answer over ssh within
        `timeout` s (ssh notices a silent server within 15 s, servers.py; a killed one at
        once), sorted. Once found down, a server stays down for this network."""
        dead = self._down
        dead |= {n.server for n in (self.mn.hosts if self.mn else []) if n.shell_ended()}
        dead |= {s for s in self.servers.names
                 if s not in dead and not self.servers.alive(s, timeout=timeout)}
        return sorted(dead)

    def _note_down(self, server: str) -> None:
        self._down.add(server)

    def _stop_daemons(self) -> None:
        for s in self.daemons.stop_all():
            self._note_down(s)

    def _report_down(self) -> None:
        down = sorted(self._down)
        if down:
            print(f"concast: server(s) {', '.join(down)} do not answer; what {self.tag} had "
                  "there went with them and was not stopped from here")

    def ping(self, src: str, dst: str, count: int = 1, timeout: float = 2):
        node = self.mn[src]
        if node.shell_ended():
            self._note_down(node.server)
            raise ServerDown(node.server, f"the shell of {src} has ended")
        return super().ping(src, dst, count, timeout)

    def _stop_nodes(self) -> None:
        """Mininet's stop (links, then node shells) without its waits on the dead: links
        and nodes on servers found down are skipped, and a server that dies meanwhile
        (ServerDown from a node's bounded shell) joins them."""
        mn, dead = self.mn, set(self.servers_down())
        for link in mn.links:
            ends = {link.intf1.node.server, link.intf2.node.server}
            if ends & dead:
                continue
            try:
                link.stop()
            except ServerDown as e:
                dead.add(e.server)
                self._note_down(e.server)
        for node in mn.hosts:
            node.terminate()        # our end of its ssh session; bounded for the dead too
        mn.links, mn.hosts = [], []
        self._netns_made = [(s, n) for s, n in self._netns_made if s not in dead]
        self._shipped = [s for s in self._shipped if s not in dead]

    def _delete_netns(self) -> None:
        by_server: dict[str, list[str]] = {}
        for s, ns in self._netns_made:
            by_server.setdefault(s, []).append(ns)
        for s, names in by_server.items():
            try:
                self.servers.run(s, ["ip", "-force", "-batch", "-"], check=False, timeout=60,
                                 stdin="".join(f"netns del {n}\n" for n in names))
            except ServerDown as e:
                print(f"concast: {e}: its namespaces {', '.join(names[:4])}... are left to it")
                self._note_down(s)
        self._netns_made = []

    def _remove_shipped(self) -> None:
        """The servers' copies of the run directory (the driver keeps its own, logs too)."""
        for s in self._shipped:
            try:
                self.servers.run(s, ["rm", "-rf", str(self.run_dir)], check=False, timeout=30)
            except ServerDown as e:
                print(f"concast: {e}: its copy of {self.run_dir} is left to it")
                self._note_down(s)
        self._shipped = []

    def describe_placement(self) -> str:
        counts: dict[str, list[int]] = {s: [0, 0] for s in self.servers.names}
        for n, s in self.placement.items():
            counts[s][0 if n in self.plan.routers else 1] += 1
        per = ", ".join(f"{s}: {r} routers + {h} hosts" for s, (r, h) in counts.items())
        return f"{per}; {len(self.crossing)} links cross servers (VXLAN)"

