"""A BMv2 router in a network namespace of its own, for the P4 data-plane tests.

    namespace ccp4-<pid>:   h1 -- s1 (port 1)   s1..s3: switch ends, h1..h3: test ends
                            h2 -- s2 (port 2)
                            h3 -- s3 (port 3)
                            rd -- scpu (CPU port 255)   rd: what routerd would open

The tests send and receive raw Ethernet frames on h1..h3 and rd through AF_PACKET sockets
created inside the namespace (a helper thread enters it with setns(2); a socket stays in
the namespace it was created in). Everything is removed in `finally`: the switch (by PID)
and the namespace (with its veths). Skips cleanly when p4c-bm2-ss / simple_switch_grpc are
not on PATH or we are not root.
"""
from __future__ import annotations

from ipaddress import IPv4Network
import os
import select
import socket
import subprocess
import time

import pytest

from concast.controller.p4 import pipeline as P
from concast.netns import Scratch, call_in
from concast.controller.p4.switch import Switch, tools_missing

ROUTER_MAC = "02:cc:0a:00:00:01"
ROUTER_ID = "10.0.0.1"
HOST_MAC = {"h1": "02:cc:0a:01:00:02", "h2": "02:cc:0a:02:00:02", "h3": "02:cc:0a:03:00:02",
            "rd": "02:cc:0a:00:ff:01"}
PORT_ADDR = {1: "10.1.0.1", 2: "10.2.0.1", 3: "10.3.0.1"}
IFACES = {"h1": ("s1", 1), "h2": ("s2", 2), "h3": ("s3", 3), "rd": ("scpu", P.CPU_PORT)}


def _run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def _in_netns(ns: str, fn):
    """Run fn() in a thread that has entered network namespace `ns`; return its result."""
    return call_in(ns, fn)


class Ports:
    """AF_PACKET sockets on the test ends, by name."""

    def __init__(self, ns: str):
        def open_all():
            socks = {}
            for name in IFACES:
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
                s.bind((name, 0))
                s.setblocking(False)
                socks[name] = s
            return socks
        self.socks = _in_netns(ns, open_all)

    def drain(self):
        for s in self.socks.values():
            while True:
                try:
                    s.recv(65535)
                except BlockingIOError:
                    break

    def send(self, name: str, frame: bytes):
        self.socks[name].send(bytes(frame))

    def recv_all(self, wait: float = 0.6) -> dict[str, list[bytes]]:
        """Every frame that arrived on any test end within `wait` seconds
        (the frames a socket sent itself are left out)."""
        got = {name: [] for name in self.socks}
        by_fd = {s.fileno(): (name, s) for name, s in self.socks.items()}
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(list(by_fd), [], [], left)
            for fd in ready:
                name, s = by_fd[fd]
                while True:
                    try:
                        data, addr = s.recvfrom(65535)
                    except BlockingIOError:
                        break
                    if addr[2] != socket.PACKET_OUTGOING:
                        got[name].append(data)
        return got

    def close(self):
        for s in self.socks.values():
            s.close()


class Bmv2Router:
    """The switch, its P4Runtime client, a P4Router handle and the test sockets."""

    def __init__(self, ns, switch, client, router, ports):
        self.ns, self.switch, self.client, self.router, self.ports = ns, switch, client, router, ports

    def counters(self):
        return self.router.counters()

    def exchange(self, name: str, frame: bytes, wait: float = 0.6) -> dict[str, list[bytes]]:
        self.ports.drain()
        self.ports.send(name, frame)
        return self.ports.recv_all(wait)


def _compile(outdir) -> tuple[str, str]:
    json_path, p4info = outdir / "concast.json", outdir / "concast.p4info.txt"
    r = subprocess.run(["p4c-bm2-ss", "--arch", "v1model", "-o", str(json_path),
                        "--p4runtime-files", str(p4info), str(P.P4_SOURCE)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"p4c-bm2-ss failed:\n{r.stdout}\n{r.stderr}")
    return str(p4info), str(json_path)


def _base_entries() -> list[P.Entry]:
    e = [P.arp_entry(port, addr, ROUTER_MAC) for port, addr in PORT_ADDR.items()]
    e += [P.lpm_entry(IPv4Network(f"{a}/32"), None, None, ROUTER_MAC)
          for a in [ROUTER_ID, *PORT_ADDR.values()]]
    net = IPv4Network
    e += [P.lpm_entry(net("10.1.0.0/16"), 1, HOST_MAC["h1"], ROUTER_MAC),
          P.lpm_entry(net("10.2.0.0/16"), 2, HOST_MAC["h2"], ROUTER_MAC),
          P.lpm_entry(net("10.2.5.0/24"), 3, HOST_MAC["h3"], ROUTER_MAC),   # longer prefix wins
          P.lpm_entry(net("10.3.0.0/16"), 3, HOST_MAC["h3"], ROUTER_MAC),
          P.lpm_entry(net("10.0.9.0/24"), 3, HOST_MAC["h3"], ROUTER_MAC)]   # vectors' R
    return e


@pytest.fixture(scope="module")
def bmv2(tmp_path_factory):
    why = tools_missing()
    if why:
        pytest.skip(why)
    if os.geteuid() != 0:
        pytest.skip("the BMv2 tests need root (network namespace, veth pairs)")
    from concast.controller.p4.p4rt import P4RuntimeClient   # needs the p4runtime package
    from concast.controller.p4.router import P4Router

    tmp = tmp_path_factory.mktemp("p4")
    p4info, json_path = _compile(tmp)
    ns = f"ccp4-{os.getpid()}"
    switch = client = ports = None
    scratch = Scratch()
    try:
        scratch.add(ns)
        ip = ("ip", "netns", "exec", ns)
        _run(*ip, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        _run(*ip, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
        for test_end, (switch_end, _port) in IFACES.items():
            scratch.veth(ns, test_end, ns, switch_end, mtu=9000, up=False)
            _run(*ip, "ip", "link", "set", test_end, "address", HOST_MAC[test_end])
            for dev in (test_end, switch_end):
                _run(*ip, "ip", "link", "set", dev, "up")
        switch = Switch(ns, {port: sw for sw, port in IFACES.values()}, netns=ns,
                        rundir=tmp).start()
        client = P4RuntimeClient(switch.address)
        client.set_pipeline(p4info, json_path)
        client.insert(_base_entries())
        client.insert([P.csp_divert_entry()]
                      + [P.own_address_divert_entry(a) for a in [ROUTER_ID, *PORT_ADDR.values()]])
        router = P4Router(client)
        router.static_diversion = [P.csp_divert_entry()] + [
            P.own_address_divert_entry(a) for a in [ROUTER_ID, *PORT_ADDR.values()]]
        ports = Ports(ns)
        time.sleep(0.3)
        yield Bmv2Router(ns, switch, client, router, ports)
    finally:
        if ports:
            ports.close()
        if client:
            client.close()
        if switch:
            switch.stop()
        scratch.close()
