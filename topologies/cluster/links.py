"""Nodes and links of Mininet Cluster Edition as concast uses them (docs/cluster.md).

Cluster Edition (mininet.examples.cluster) reaches a remote node's shell over ssh and joins
nodes on different servers with a tunnel. Its GRE link needs a kernel with GRE (this one has
none); VxlanLink does the same over VXLAN, one VNI per link; SshLink is Cluster Edition's
SSH-tunnel link (a TAP at each end joined by `ssh -w`), kept as the fallback.

MTU rule: VXLAN over IPv4 adds 50 bytes (outer IPv4 20 + UDP 8 + VXLAN 8 + the inner
Ethernet header 14), so an underlay of >= 1550 bytes keeps a 1500-byte MTU inside. VxlanLink
sets the inner MTU to min(underlay - 50, 1500) and refuses an underlay under 1550 unless
told the smaller MTU is fine (allow_small_mtu=True).

`use_ssh_config(path)` points every ssh Cluster Edition runs (node shells, precheck, tunnels)
at one ssh client config (keys, known hosts), so nothing is taken from ~/.ssh.

Node shells are bounded (BoundedShell): Mininet waits for a command's output with no end, and
a node whose server died never gives any (the shell's pty stays open in this process), so a
command on it hung for good; here the wait ends, with ServerDown naming the server, as soon as
the shell (the ssh session) has ended. ssh ends it within ServerAliveInterval x CountMax of a
server going silent (servers.py), at once for one whose connections close.
"""
from __future__ import annotations

import itertools
import re
import select
import shlex
import subprocess

from mininet.examples.cluster import (ClusterCleanup, MininetCluster, RemoteLink, RemoteMixin,
                                      RemoteNode, RemoteSSHLink)
from mininet.link import Link

from concast.topologies.cluster.servers import ServerDown

VXLAN_OVERHEAD = 50     # outer IPv4 20 + UDP 8 + VXLAN 8 + inner Ethernet 14
INNER_MTU = 1500
VXLAN_PORT = 4789       # IANA's VXLAN port (RFC 7348, section 5)
FIRST_VNI = 4200        # VNIs this module hands out start here, one per link


class ClusterLinkError(RuntimeError):
    pass


# Cluster Edition registers a callback with Mininet's cleanup that runs `mn -c` on every
# server (it kills by name, machine-wide). We never run Mininet's cleanup; should anything
# in this process do so, the servers are not touched: each network removes what it made.
ClusterCleanup.cleanup = classmethod(lambda cls: None)


def use_ssh_config(path: str | None) -> None:
    """Every ssh Cluster Edition starts gets `-F path` (None: back to ssh's defaults)."""
    extra = ["-F", str(path)] if path else []
    RemoteMixin.sshbase = ["ssh", *extra, "-q", "-o", "BatchMode=yes",
                           "-o", "ForwardAgent=yes", "-tt"]
    MininetCluster.sshcmd = ["ssh", *extra, "-o", "BatchMode=yes", "-o", "ForwardAgent=yes"]
    SshLink.ssh_extra = extra


def _server_ip(node, peer_ip: str) -> str:
    """The address `node`'s server uses towards peer_ip (for localhost, not 127.0.0.1)."""
    out = node.rcmd(f"ip -o route get {peer_ip}")
    m = re.search(r"\bsrc (\S+)", out)
    if not m:
        raise ClusterLinkError(f"{node.server}: no route to {peer_ip}: {out.strip()}")
    return m.group(1)


def _underlay_mtu(node, peer_ip: str) -> int:
    out = node.rcmd(f"ip -o route get {peer_ip}")
    m = re.search(r"\bdev (\S+)", out)
    if not m:
        raise ClusterLinkError(f"{node.server}: no route to {peer_ip}: {out.strip()}")
    out = node.rcmd(f"cat /sys/class/net/{m.group(1)}/mtu")
    m = re.search(r"^(\d+)\s*$", out, re.M)
    if not m:
        raise ClusterLinkError(f"{node.server}: MTU of {m.group(1)}: {out.strip()}")
    return int(m.group(1))


def inner_mtu(underlay: int) -> int:
    return min(underlay - VXLAN_OVERHEAD, INNER_MTU)


class VxlanLink(RemoteLink):
    """A link between nodes on different servers as a VXLAN tunnel (one VNI per link); between
    nodes on the same server, a veth pair as usual. Usable as MininetCluster's link=."""

    _vni = itertools.count(FIRST_VNI)

    def __init__(self, node1, node2, allow_small_mtu: bool = False, **kwargs) -> None:
        self.allow_small_mtu = allow_small_mtu
        self.vni: int | None = None
        self.mtu: int | None = None
        RemoteLink.__init__(self, node1, node2, **kwargs)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None,
                     node2=None, deleteIntfs=True):
        node1 = self.node1 if node1 is None else node1
        node2 = self.node2 if node2 is None else node2
        if getattr(node1, "server", "localhost") == getattr(node2, "server", "localhost"):
            return Link.makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2,
                                     deleteIntfs=deleteIntfs)
        self.makeTunnel(node1, node2, intfname1, intfname2, addr1, addr2)
        self.tunnel = None      # nothing to terminate: stop() deletes the interfaces
        return None

    def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None):
        self.vni = next(self._vni)
        ip1 = _server_ip(node1, node2.serverIP)
        ip2 = _server_ip(node2, node1.serverIP)
        underlay = min(_underlay_mtu(node1, ip2), _underlay_mtu(node2, ip1))
        self.mtu = inner_mtu(underlay)
        if self.mtu < INNER_MTU and not self.allow_small_mtu:
            raise ClusterLinkError(
                f"link {node1}-{node2}: underlay MTU {underlay} between {node1.server} and "
                f"{node2.server} leaves {self.mtu} inside VXLAN; it needs >= "
                f"{INNER_MTU + VXLAN_OVERHEAD} for {INNER_MTU} (or allow_small_mtu=True)")
        for node, name, addr, local, remote in ((node1, intfname1, addr1, ip1, ip2),
                                                (node2, intfname2, addr2, ip2, ip1)):
            # Made in the server's root namespace, where its UDP socket stays, then moved
            # into the node: the node sees a plain Ethernet interface.
            mac = f" address {addr}" if addr else ""
            out = node.rcmd(f"ip link add {name}{mac} mtu {self.mtu} type vxlan id {self.vni} "
                            f"local {local} remote {remote} dstport {VXLAN_PORT} nolearning")
            if out.strip():
                raise ClusterLinkError(f"vxlan {name} on {node.server}: {out.strip()}")
            out = node.rcmd(f"ip link set {name} netns {node.pid}")
            if out.strip():
                node.rcmd(f"ip link del {name}")
                raise ClusterLinkError(f"moving {name} into {node} on {node.server}: {out}")
        self.tunnel = None
        return None

    def stop(self) -> None:
        # Deleting the interfaces inside the nodes removes the VXLAN devices (and the veths).
        for intf in (self.intf1, self.intf2):
            if intf is not None:
                intf.delete()
        self.tunnel = None

    def status(self) -> str:
        return f"{Link.status(self)} vxlan vni {self.vni} mtu {self.mtu}" if self.vni \
            else Link.status(self)


class SshLink(RemoteSSHLink):
    """Cluster Edition's SSH-tunnel link (an Ethernet tunnel over `ssh -w`, needs PermitTunnel
    on the far server), with our ssh client config. The fallback where no VXLAN: slower (every
    frame goes through ssh) and one link at a time per pair of servers (tap9).

    The tunnel's ssh runs on node1's server; it records its PID there and stop() ends it by
    that PID and waits for it (Cluster Edition only ends our ssh to that server, after which
    the tunnel's went some time later, or, multiplexed, stayed as a master)."""

    ssh_extra: list[str] = []

    def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None):
        # Cluster Edition builds `ssh -n -o Tunnel=Ethernet -w 9:9 dest echo @`; ours adds
        # -F, no multiplexing (the tunnel is a connection of its own), and the PID file.
        self.pidfile = f"/run/ccs-sshlink-{intfname1}.pid"      # the server's own /run
        orig = node1.rpopen

        def rpopen(cmd, **opts):
            if isinstance(cmd, list) and cmd[:1] == ["ssh"]:
                inner = ["ssh", *self.ssh_extra, "-o", "ControlMaster=no",
                         "-o", "ControlPath=none", *cmd[1:]]
                script = f"echo $$ > {self.pidfile}; exec {shlex.join(inner)}"
                cmd = ["sh", "-c", shlex.quote(script)]
            return orig(cmd, **opts)
        node1.rpopen = rpopen
        try:
            return RemoteSSHLink.makeTunnel(self, node1, node2, intfname1, intfname2,
                                            addr1, addr2)
        finally:
            del node1.rpopen

    def stop(self) -> None:
        tunnel = self.tunnel
        RemoteSSHLink.stop(self)        # our ssh to node1's server, the interfaces
        if tunnel is None:
            return
        try:
            tunnel.wait(timeout=10)     # our ssh, TERMed by Cluster Edition
        except subprocess.TimeoutExpired:
            tunnel.kill()
            tunnel.wait()
        # The tunnel's ssh on node1's server, by its PID: TERM, then up to 5 s to exit.
        script = (f"p=$(cat {self.pidfile} 2>/dev/null) || exit 0; kill $p 2>/dev/null; "
                  "for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; "
                  f"kill -9 $p 2>/dev/null; rm -f {self.pidfile}")
        self.node1.rcmd(["sh", "-c", shlex.quote(script)])


class BoundedShell:
    """For RemoteMixin nodes: a command's wait ends with ServerDown when the shell has."""

    POLL_MS = 500   # how often a silent wait looks at the shell (not a timeout on commands)

    def waitOutput(self, verbose=False, findPid=True):
        # Mininet's own poller is registered for POLLOUT too, so it is always "ready" and
        # its monitor(timeoutms) blocks in read(): wait for input here, with a bound.
        poller = self.__dict__.get("_in_poller")
        if poller is None:
            poller = self._in_poller = select.poll()
            poller.register(self.stdout, select.POLLIN | select.POLLPRI)
        output = ""
        while self.waiting:
            if not self.readbuf and not poller.poll(self.POLL_MS):
                if self.shell is not None and self.shell.poll() is not None:
                    self.waiting = False
                    raise ServerDown(self.server, f"the shell of node {self.name} ended (ssh "
                                     f"exit {self.shell.returncode}) while it ran a command")
                continue
            output += self.monitor(findPid=findPid)    # input is there: read() returns
        return output

    def shell_ended(self) -> bool:
        """Whether this node's shell (its ssh session to its server) has ended."""
        return self.shell is None or self.shell.poll() is not None


def remote_class(base):
    """`base` (a Mininet node class) on a server, with a bounded shell."""
    return type(f"Cluster{base.__name__}", (BoundedShell, RemoteMixin, base), {})


class ClusterHost(BoundedShell, RemoteNode):
    """A host shell on its server (Cluster Edition's RemoteHost, with a bounded shell)."""
