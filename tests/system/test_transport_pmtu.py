"""Resize over real UDP finds the path MTU of a hop smaller than either host's link.

Three network namespaces: host a, a router r (ip_forward on) and host b; a-r is a veth pair at
1500 bytes (or 1400, so the largest probe is refused by a's own interface), r-b one at 1200,
with a 4 Mbit/s token bucket on r's side so the transfer lasts long enough for several of
Resize's raise rounds (`--pmtu-raise 0.05`). concast-perf sends 600 kB through Bulk+resize;
both ends report the SHA-256 and the client the segment size it ended with.

With the driver's DF (IP_PMTUDISC_PROBE) the size fits 1200 and stays there. The control
case (CONCAST_UDP_DF=off: the kernel's default, which fragments a datagram once it has learnt
the smaller path MTU) shows why DF is needed: a raise probe is then fragmented, arrives, and
Resize takes the full size. Needs root, ip and tc, and concast-perf (cargo build --release).
"""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from concast import perf, tools
from concast.netns import Scratch

HOP_MTU = 1200
IP_UDP = 28
SEGMENT_HEADER = 8  # the transport's own header, before any attribute
BYTES = 600_000


def _why_not() -> str | None:
    return perf.missing(("ip", "tc"))


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


def _run(*argv: str) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, text=True)


class RoutedPath:
    """a --(first_mtu)-- r --(HOP_MTU, 4 Mbit/s towards b)-- b, all named cpmtu-<tag>-*."""

    def __init__(self, tag: str, first_mtu: int):
        self.prefix = f"cpmtu-{tag}-"
        self.dev = f"p{tag}"[:11]  # device names: 15 characters at most
        self.ns = {h: self.prefix + h for h in "arb"}
        self.first_mtu = first_mtu
        self.scratch = Scratch()

    def __enter__(self) -> "RoutedPath":
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _build(self) -> None:
        ns = self.ns
        for n in ns.values():
            self.scratch.add(n)
        links = [("a", "r", "10.78.1", self.first_mtu), ("r", "b", "10.78.2", HOP_MTU)]
        for left, right, net, mtu in links:
            lv, rv = self.dev + left + right, self.dev + right + left
            self.scratch.veth(ns[left], lv, ns[right], rv, mtu=mtu)
            for h, v, host in ((left, lv, 1 if left == "a" else 254), (right, rv, 254 if right == "r" else 2)):
                _run("ip", "-n", ns[h], "addr", "add", f"{net}.{host}/24", "dev", v)
        _run("ip", "-n", ns["a"], "route", "add", "default", "via", "10.78.1.254")
        _run("ip", "-n", ns["b"], "route", "add", "default", "via", "10.78.2.254")
        _run("ip", "netns", "exec", ns["r"], "sysctl", "-qw", "net.ipv4.ip_forward=1")
        _run("ip", "netns", "exec", ns["r"], "tc", "qdisc", "add", "dev", self.dev + "rb", "root",
             "tbf", "rate", "4mbit", "burst", "6kb", "latency", "100ms")

    def popen(self, host: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.ns[host], *argv], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def close(self) -> None:
        self.scratch.close()


def _finish(p: subprocess.Popen, timeout: float) -> tuple[str, str]:
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()  # by its PID: only the process this test started
        return p.communicate()


def _transfer(first_mtu: int, df: bool, tag: str) -> tuple[dict, dict]:
    env = dict(os.environ)
    env.pop("CONCAST_UDP_DF", None)
    if not df:
        env["CONCAST_UDP_DF"] = "off"
    common = ["--composite", "Bulk+resize", "--pmtu-raise", "0.05"]
    with RoutedPath(tag, first_mtu) as path:
        srv = path.popen("b", [str(tools.rust_binary("concast-perf")), "server", "--listen", "0.0.0.0:15311", "--hash",
                               "--idle", "5", *common], env)
        try:
            time.sleep(0.3)
            cli = path.popen("a", [str(tools.rust_binary("concast-perf")), "client", "--to", "10.78.2.2:15311", "--bytes",
                                   str(BYTES), "--size", "20000", *common], env)
            out, err = _finish(cli, 120)
            assert cli.returncode == 0, err
        finally:
            sout, serr = _finish(srv, 30)
    sent, got = json.loads(out), json.loads(sout)
    why = {"mss": sent["mss"], "client": (sent["io"], sent["stats"], sent["state"]),
           "server": (got.get("end"), got.get("io"), got.get("stats")), "stderr": serr[-500:]}
    assert sent["closed"] and got["bytes"] == sent["bytes"] == BYTES, why
    assert got["sha256"] == sent["sha256"]
    return sent, got


def _fits(mss: int) -> bool:
    # the composite's attributes add more than nothing, so this bound is loose but exact enough:
    # the next common size Resize could take (a 1252-byte datagram) gives an mss above it
    return mss + SEGMENT_HEADER + IP_UDP <= HOP_MTU


@pytest.mark.parametrize("first_mtu", [1500, 1400])
def test_resize_settles_below_a_1200_byte_hop_and_delivers_byte_exact(first_mtu):
    sent, _ = _transfer(first_mtu, df=True, tag=f"d{first_mtu % 1000}{os.getpid() % 10000}")
    io = sent["io"]
    assert io["df"], io
    assert _fits(sent["mss"]) and sent["mss"] > 900, sent["mss"]
    if first_mtu == 1400:
        # the full-size probe is over a's own interface: refused by the kernel, counted, and
        # GSO stays on (its EINVAL for that group was the size, not GSO)
        assert io["too_big"] >= 1 and io["gso"] and io["fallback"] is None, io


def test_without_df_a_fragmented_raise_probe_fools_resize():
    sent, _ = _transfer(1500, df=False, tag=f"n{os.getpid() % 10000}")
    assert not sent["io"]["df"]
    assert not _fits(sent["mss"]), f"mss {sent['mss']}: the probes were not fragmented?"
