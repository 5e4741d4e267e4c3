"""Link emulation over the servers: one concast-linkemu per server (docs/cluster.md, "Links").

Each server's emulator emulates the link directions whose sending side is on that server, so
routerd's queue access (`link_state` + `link_slot` in its config) reads its own output link
in its own server's /dev/shm:

- a link within one server (every host link, and most router links): the server's emulator
  joins the two nodes' TAPs as on one machine, both directions emulated there;
- a link between servers: on each side the server's emulator joins the node's TAP to a TAP in
  the server's root namespace, emulating only node -> root (the direction this side sends);
  the root TAP is bridged to a VXLAN device towards the other server (one VNI per link).
  Each direction is thus emulated once, on its sending side; the other direction on each
  side is a pass-through (no delay, loss or rate).

The emulator's control socket is in the server's own runtime directory
(links.control_socket), forwarded to the driver over ssh; its log comes back into the
driver's logs/ (ClusterDaemons); its state file and runtime directory are removed on its
server at stop.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from concast.topologies import links as emu_links
from concast.topologies.cluster.servers import ClusterError, ServerDown
from concast.topologies.cluster.serverset import ServerSet


class ServerEmulator(emu_links.LinkEmulator):
    """A LinkEmulator whose daemon runs on `server`; its control socket is reached through
    an ssh forward (the driver's end is `socket_path`; the server's is `remote_socket`)."""

    def __init__(self, server: str, servers: ServerSet, daemons, tag: str, log_dir: Path,
                 **kwargs) -> None:
        super().__init__(log_dir, tag, daemons=daemons, **kwargs)
        self.tag = tag
        self.server = server
        self.servers = servers
        self.remote_socket = emu_links.control_socket(tag)   # on the server
        self.forward: subprocess.Popen | None = None
        if server != "localhost":
            self.socket_path = emu_links.runtime_dir(tag) / f"fwd-{server}.sock"
            if len(str(self.socket_path).encode()) > emu_links.SUN_PATH_MAX:
                raise ValueError(f"server name {server!r} too long for a socket path")

    def start(self, timeout: float = 15.0) -> "ServerEmulator":
        if not self.binary.exists():
            raise emu_links.LinkEmuError(f"{self.binary} is missing: run `make build`")
        s = self.server
        run = emu_links.runtime_dir(self.tag)
        self.servers.run(s, ["sh", "-c", f"mkdir -p -m 0700 {run} && rm -f {self.remote_socket}"])
        argv = [str(self.binary), "--control", str(self.remote_socket), "--state",
                str(self.state_path), "--slots", str(self.slots), "--realtime",
                str(self.realtime)]
        self.daemon = self.daemons.start(f"emu-{s}", argv, name="linkemu", server=s)
        self.popen = self.daemon.popen
        deadline = time.monotonic() + timeout
        while self.servers.run(s, ["sh", "-c", f"test -S {self.remote_socket} && echo y; true"],
                               timeout=10).strip() != "y":
            if self.popen.poll() is not None:
                raise emu_links.LinkEmuError(f"concast-linkemu on {s} exited with "
                                             f"{self.popen.returncode}; see {self.daemon.log}")
            if time.monotonic() > deadline:
                raise emu_links.LinkEmuError(f"concast-linkemu on {s}: no control socket")
            time.sleep(0.05)
        if s != "localhost":
            self._forward()
        while True:
            try:
                self.ping()
                return self
            except (OSError, emu_links.LinkEmuError):
                if time.monotonic() > deadline:
                    raise emu_links.LinkEmuError(f"concast-linkemu on {s} did not answer "
                                                 f"through {self.socket_path}")
                time.sleep(0.05)

    def _forward(self) -> None:
        self.socket_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        self.forward = subprocess.Popen(
            [*self.servers.ssh_argv(self.server), "-N", "-o", "StreamLocalBindUnlink=yes",
             "-o", "ExitOnForwardFailure=yes", "-o", "ControlMaster=no", "-o",
             "ControlPath=none", "-L", f"{self.socket_path}:{self.remote_socket}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 15
        while not self.socket_path.exists():
            if self.forward.poll() is not None:
                raise emu_links.LinkEmuError(f"forwarding {self.server}'s linkemu socket: "
                                             f"ssh exited ({self.forward.returncode})")
            if time.monotonic() > deadline:
                raise emu_links.LinkEmuError(f"forwarding {self.server}'s linkemu socket: "
                                             "not up within 15 s")
            time.sleep(0.05)

    def stop(self) -> None:
        """The daemon (by its PID on its server), the forward, and on the server its state
        file and runtime directory. A server that does not answer is left to itself."""
        self._close()
        if self.daemon is not None:
            self.daemons.stop(self.daemon)
        if self.forward is not None:
            if self.forward.poll() is None:
                self.forward.terminate()
                try:
                    self.forward.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    self.forward.kill()
                    self.forward.wait()
            self.forward = None
        if self.server != "localhost":
            self.socket_path.unlink(missing_ok=True)
            try:
                self.socket_path.parent.rmdir()     # the last forward of this run removes it
            except OSError:
                pass
        try:
            self.servers.run(self.server, ["rm", "-rf", str(self.state_path),
                                           str(self.remote_socket.parent)],
                             check=False, timeout=20)
        except ServerDown as e:
            print(f"concast: {e}: its link emulator's files are left to it")


class EmulatorSet:
    """The per-server emulators seen as one, for what reads every link (the ACK study's
    before/after snapshots): `call("stats")` lists every link once, a link between servers
    merged from its two halves (each half's emulated direction), and the daemon-wide
    lateness figures are the worst over the servers."""

    def __init__(self, by_server: dict[str, ServerEmulator]) -> None:
        self.by_server = by_server
        self.halves: dict[str, tuple[str, str]] = {}   # link id -> (server of a, server of b)
        self.where: dict[str, str] = {}                # link id (within a server) -> server

    def __iter__(self):
        return iter(self.by_server.values())

    def of(self, server: str) -> ServerEmulator:
        return self.by_server[server]

    def call(self, cmd: str, **fields) -> dict:
        if cmd == "stats" and "id" not in fields:
            return self._stats(**fields)
        if "id" in fields and fields["id"] in self.where:
            return self.by_server[self.where[fields["id"]]].call(cmd, **fields)
        raise emu_links.LinkEmuError(f"{cmd} across servers: name one link (id) or use stats")

    def stats(self, link_id: str | None = None):
        if link_id is None:
            return self._stats()["links"]
        return self.call("stats", id=link_id)["stats"]

    def _stats(self, **fields) -> dict:
        replies = {s: e.call("stats", **fields) for s, e in self.by_server.items()}
        merged = {k: max((r.get(k) or 0) for r in replies.values())
                  for r0 in replies.values() for k, v in r0.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool)}
        out, halves = [], {}
        for s, r in replies.items():
            for link in r.get("links", []):
                lid = link.get("id", "")
                if lid in self.halves:
                    halves.setdefault(lid, {})[s] = link
                else:
                    out.append(link)
        for lid, (sa, sb) in self.halves.items():
            a, b = halves.get(lid, {}).get(sa, {}), halves.get(lid, {}).get(sb, {})
            # Each half's a -> b is its node sending: a's is the link's a -> b, b's its b -> a.
            out.append({"id": lid, "a": a.get("a", {}), "b": b.get("a", {}),
                        "ab": a.get("ab", {}), "ba": b.get("ab", {}), "servers": [sa, sb]})
        return {**merged, "ok": True, "links": out, "servers": sorted(replies)}


def _root_names(tag: str, vni: int) -> tuple[str, str, str]:
    """The root-namespace TAP, VXLAN device and bridge of one crossing link's side."""
    return f"cc{tag}t{vni}", f"cc{tag}v{vni}", f"cc{tag}b{vni}"


class ClusterEmuLink(emu_links.EmuLink):
    """EmuLink over the servers: within a server, the server's emulator joins both TAPs;
    between servers, each side's emulator emulates its own sending direction and a bridge
    in its server's root namespace joins it to a VXLAN tunnel (module docstring)."""

    def __init__(self, node1, node2, emus: EmulatorSet | None = None, tag: str = "",
                 **kwargs) -> None:
        self.emus = emus
        self.tag = tag
        self.vni: int | None = None
        self.mtu: int | None = None
        self.crossing = node1.server != node2.server
        self.sides: list[tuple] = []        # (node, emulator, root tap, vxlan, bridge)
        emu = emus.of(node1.server)
        super().__init__(node1, node2, emu=emu, **kwargs)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None,
                     node2=None, deleteIntfs=True):
        node1 = self.node1 if node1 is None else node1
        node2 = self.node2 if node2 is None else node2
        self.link_id = self.link_id or f"{intfname1}:{intfname2}"
        if not self.crossing:
            super().makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2)
            self.emus.where[self.link_id] = node1.server
            return
        from concast.topologies.cluster import links as cl
        self.vni = next(cl.VxlanLink._vni)
        ip1 = cl._server_ip(node1, node2.serverIP)
        ip2 = cl._server_ip(node2, node1.serverIP)
        underlay = min(cl._underlay_mtu(node1, ip2), cl._underlay_mtu(node2, ip1))
        self.mtu = cl.inner_mtu(underlay)
        if self.mtu < cl.INNER_MTU:
            raise cl.ClusterLinkError(
                f"link {node1}-{node2}: underlay MTU {underlay} between {node1.server} and "
                f"{node2.server} leaves {self.mtu} inside VXLAN; emulated links need >= "
                f"{cl.INNER_MTU + cl.VXLAN_OVERHEAD}")
        self.emus.halves[self.link_id] = (node1.server, node2.server)
        slots = []
        for node, name, addr, local, remote in ((node1, intfname1, addr1, ip1, ip2),
                                                (node2, intfname2, addr2, ip2, ip1)):
            emu = self.emus.of(node.server)
            tap, vx, br = _root_names(self.tag, self.vni)
            # This side's half: node -> root emulated (this node sends), root -> node not.
            ab = emu.add(self.link_id, self._end(node, name, addr), {"netns": None,
                         "name": tap, "mac": None}, ab=self.emu_params or None)
            slots.append(ab[0])
            self.sides.append((node, emu, tap, vx, br))
            script = (f"ip link add {vx} mtu {self.mtu} type vxlan id {self.vni} local {local} "
                      f"remote {remote} dstport {cl.VXLAN_PORT} nolearning && "
                      f"ip link add {br} mtu {self.mtu} type bridge && "
                      f"ip link set {tap} master {br} && ip link set {vx} master {br} && "
                      f"ip link set {tap} up && ip link set {vx} up && ip link set {br} up")
            try:
                emu.servers.run(node.server, ["sh", "-c", script], timeout=30)
            except ClusterError as e:
                raise cl.ClusterLinkError(f"crossing link {self.link_id}: {e}") from None
        self.slots = tuple(slots)

    def delete(self) -> None:
        if not self.crossing:
            return super().delete()
        for node, emu, tap, vx, br in self.sides:
            try:
                emu.delete(self.link_id)
            except (OSError, emu_links.LinkEmuError):
                pass                        # emulator already gone: so are its TAPs
            emu.servers.run(node.server, ["sh", "-c", f"ip link del {br}; ip link del {vx}; "
                                          f"ip link del {tap}; true"], check=False, timeout=30)
        self.sides = []
        self.intf1.node.delIntf(self.intf1)
        self.intf2.node.delIntf(self.intf2)
        self.intf1 = self.intf2 = None

    def status(self) -> str:
        extra = f" vxlan vni {self.vni}, each direction emulated on its sender's server" \
            if self.crossing else ""
        return f"{self.intf1}<->{self.intf2}{extra}"

