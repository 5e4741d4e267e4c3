"""Two network namespaces joined by a veth pair, with optional random loss from nftables
`numgen random` (this kernel has no netem). Used by `concast perf` and its system test.

Everything it creates carries the prefix `cperf-<pid>-`, and it removes exactly that.

`MininetPath` is the same path between two Mininet hosts of a concast network (topologies/:
one plain router on userspace Open vSwitch between them), for `concast perf --mininet`.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from concast.netns import Scratch, ip

A_ADDR, B_ADDR = "10.77.0.1", "10.77.0.2"


def unavailable(commands) -> str | None:
    """Why namespaces cannot be built here (not root, a command missing), or None."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    for c in commands:
        if not shutil.which(c):
            return f"{c} is not installed"
    return None


class PathError(RuntimeError):
    """The namespaces could not be set up (not root, no ip or nft)."""


class Path:
    """`with Path(loss=0.05) as p: p.run("a", [...])` — hosts "a" and "b"."""

    def __init__(self, loss: float = 0.0, mtu: int = 1500, tag: str | None = None,
                 rate_mbit: float = 0.0):
        if not 0.0 <= loss < 1.0:
            raise ValueError(f"loss must be in [0, 1), got {loss}")
        if rate_mbit < 0:
            raise ValueError(f"rate must be positive, got {rate_mbit}")
        self.loss, self.mtu, self.rate_mbit = loss, mtu, rate_mbit
        self.prefix = f"cperf-{tag or os.getpid()}-"
        self.ns = {"a": self.prefix + "a", "b": self.prefix + "b"}
        self.addr = {"a": A_ADDR, "b": B_ADDR}
        self.scratch = Scratch()

    def __enter__(self) -> "Path":
        why = unavailable(("ip", "nft", "ethtool") if self.loss else ("ip",))
        if why:
            raise PathError(why)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _build(self) -> None:
        va, vb = self.prefix + "va", self.prefix + "vb"
        for h in ("a", "b"):
            self.scratch.add(self.ns[h])
        self.scratch.veth(self.ns["a"], va[:15], self.ns["b"], vb[:15], mtu=self.mtu)
        for h, v in (("a", va[:15]), ("b", vb[:15])):
            ip("-n", self.ns[h], "addr", "add", f"{self.addr[h]}/24", "dev", v)
            if self.loss:
                self._wire_sized(h, v)
                self._drop(h, self.loss)
            if self.rate_mbit:
                self._shape(h, v)

    def _wire_sized(self, host: str, dev: str) -> None:
        """No segmentation offload on a lossy path: TCP (TSO) and UDP (GSO) super-packets are
        cut to MTU size before the veth, so the loss below drops packets, not 64 KB bursts."""
        subprocess.run(["ip", "netns", "exec", self.ns[host], "ethtool", "-K", dev, "gso", "off",
                        "tso", "off", "tx-udp-segmentation", "off"], check=True, capture_output=True)

    def _shape(self, host: str, dev: str) -> None:
        """One bottleneck each way: a token bucket with about 20 ms of queue."""
        burst = max(int(self.rate_mbit * 1e6 / 8 / 250), 3 * self.mtu)
        limit = max(int(self.rate_mbit * 1e6 / 8 * 0.02), 4 * self.mtu)
        ip("netns", "exec", self.ns[host], "tc", "qdisc", "add", "dev", dev, "root", "tbf",
            "rate", f"{self.rate_mbit}mbit", "burst", str(burst), "limit", str(limit))

    def _drop(self, host: str, loss: float) -> None:
        """Drop a `loss` share of TCP and UDP arriving at `host` (both directions lose)."""
        per_mille = round(loss * 1000)
        script = (f"add table inet cperf\n"
                  f"add chain inet cperf input {{ type filter hook input priority 0; policy accept; }}\n"
                  f"add rule inet cperf input meta l4proto {{ tcp, udp }} "
                  f"numgen random mod 1000 < {per_mille} counter drop\n")
        subprocess.run(["ip", "netns", "exec", self.ns[host], "nft", "-f", "-"], input=script,
                       check=True, capture_output=True, text=True)

    def dropped(self, host: str) -> int:
        """Packets nftables dropped at `host` so far."""
        if not self.loss:
            return 0
        out = subprocess.run(["ip", "netns", "exec", self.ns[host], "nft", "list", "table",
                              "inet", "cperf"], capture_output=True, text=True).stdout
        for word, nxt in zip(out.split(), out.split()[1:]):
            if word == "packets":
                return int(nxt)
        return 0

    def popen(self, host: str, argv: list[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.ns[host], *argv],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

    def close(self) -> None:
        self.scratch.close()


class MininetPath(Path):
    """Hosts "a" and "b" of a two-host ConcastNet: each on its own /24 behind one OVS router
    (not concast-capable: plain IPv4 forwarding), loss and rate as in `Path`, applied inside
    the hosts' namespaces. RunningNet names the namespaces and stops everything it made."""

    HOSTS = {"a": "pfa", "b": "pfb"}

    def __init__(self, loss: float = 0.0, mtu: int = 1500, tag: str | None = None,
                 rate_mbit: float = 0.0):
        super().__init__(loss, mtu, tag, rate_mbit)
        self.net = None

    def _build(self) -> None:
        try:
            from concast.topologies import ConcastNet
        except ImportError as e:   # Mininet lives in Debian's python3 site-packages
            raise PathError(f"Mininet is not importable: {e}") from e
        if subprocess.run(["ovs-vsctl", "--timeout=5", "show"], capture_output=True).returncode:
            raise PathError("Open vSwitch is not running (scripts/setup.sh starts it)")
        net = ConcastNet(dataplane="ovs", emulate=False).router("pfr", capable=False)
        for h in self.HOSTS.values():
            net.host(h, router="pfr", **({"mtu": self.mtu} if self.mtu != 1500 else {}))
        self.net = net.start()
        for h, name in self.HOSTS.items():
            self.ns[h] = self.net.netns(name)
            self.addr[h] = self.net.ip(name)
            if self.loss:
                self._wire_sized(h, self.net.iface(name))
                self._drop(h, self.loss)
            if self.rate_mbit:
                self._shape(h, self.net.iface(name))

    def close(self) -> None:
        if self.net is not None:
            net, self.net = self.net, None
            net.stop()
