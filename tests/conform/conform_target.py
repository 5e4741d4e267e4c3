"""The network the suite runs against, and the two ends it plays (s1: a child; rx: R).

Everything is sent and read on the hosts' wires (conform_wire.Port); the router under test
is reached only through its data plane, as a user's router would be.
"""
from __future__ import annotations

import hashlib
import itertools
import random
import time
from pathlib import Path

import pytest

from concast import tools
from concast.scapy import (CHUNK_SIZE, CSP, CSP_Join, CSP_JoinAck, CSP_SpecChunk, classify,
                           csp_datagram)
from conform_wire import Log, Port, Wire
from signing import R_KEY

MPLEX_SPEC = tools.spec_or_build_path("multiplex")
HOLD_S = 300                  # what our child asks for: no expiry during a run
# Groups start at a random point of each run: a device (or one of our routers) tested twice
# within a hold time still has the first run's flows, which a reused group would meet.
_groups = itertools.count(random.SystemRandom().randrange(1 << 16, 1 << 31, 1 << 12))


def fresh_group() -> int:
    """A group no earlier test used, so soft state left behind never meets a new test."""
    return next(_groups)


def decode(ip: bytes):
    from scapy.layers.inet import IP
    return IP(ip)


class Target:
    """The two ends the suite plays (`s1`: a child, `rx`: R) and what it knows of the router
    under test: its own addresses (replies and its JOINs come from one of them) and the one
    unicast CSP is sent to (`router_id`)."""

    def __init__(self, ports: dict[str, Wire], addrs: dict[str, str],
                 router_addresses: list[str], kind: str, net=None) -> None:
        self.net, self.kind, self.ports = net, kind, ports
        self.dataplane: str | None = None   # linux|ovs|bmv2 on our network; None on --ports
        self.router_addresses = set(router_addresses)
        self.router_id = router_addresses[0]
        self.s1, self.rx = ports["s1"], ports["rx"]
        self.S1, self.RX = addrs["s1"], addrs["rx"]
        self.seq = itertools.count(1)
        self.spec = MPLEX_SPEC.read_bytes()
        self.spec_hash = hashlib.sha256(self.spec).digest()

    def use_log(self, log: Log) -> None:
        for p in self.ports.values():
            p.log = log

    def for_test(self, node) -> "Target":
        """Ready for the pytest item `node`: a fresh frame log (saved as a pcap if it fails)
        and both ends drained of earlier traffic."""
        log = Log()
        node.conform_log = log
        self.use_log(log)
        for p in (self.s1, self.rx):
            p.drain()
        return self

    # --- CSP as the child s1 and as the receiver rx ---------------------------------------
    def join_msg(self, group: int, proto: int = 254, dport: int = 0, seq: int | None = None,
                 body=None, **ip):
        seq = next(self.seq) if seq is None else seq
        body = body if body is not None else CSP_Join(hold_time=HOLD_S, selector_proto=proto,
                                                      selector_dport=dport, S=1)
        ip.setdefault("src", self.S1)
        ip.setdefault("dst", self.RX)
        return csp_datagram(CSP(group=group, receiver=self.RX, seq=seq) / body, ttl=64, **ip)

    def upstream_csp(self, group: int, ctype: int, timeout: float = 3.0) -> bytes | None:
        """The next CSP message of `type` about (rx, group) that reaches rx."""
        return self.rx.first(lambda d: is_csp(d, group, ctype), timeout)

    def child_csp(self, group: int, ctype: int, timeout: float = 3.0) -> bytes | None:
        return self.s1.first(lambda d: is_csp(d, group, ctype), timeout)

    def activate(self, group: int, proto: int = 254, dport: int = 0, spec: bytes | None = None,
                 path_mtu: int = 0, corrupt: bool = False, wait: float = 20.0,
                 mangle=None, before_ack=None) -> bytes | None:
        """Join (rx, group) from s1 and answer as R, naming `spec` (default: the multiplex
        spec) with `path_mtu`, serving its chunks (with one byte flipped if `corrupt`, each
        SPEC_CHUNK body passed through `mangle` if given) until r1 JOIN_ACKs s1; returns that
        JOIN_ACK (the flow is then ACTIVE at r1). When spoiling the transfer, None if it does
        not come within `wait` seconds; otherwise the test fails. `before_ack(join)` runs
        when the router's JOIN reached R, before R answers it (to offer something first)."""
        spec = self.spec if spec is None else spec
        digest = hashlib.sha256(spec).digest()
        self.s1.send(self.join_msg(group, proto, dport))
        up = self.upstream_csp(group, 1)
        if up is None:
            pytest.fail("the router sent no JOIN toward R for a child's JOIN (2.8-1)")
        join = decode(up)
        if join.src not in self.router_addresses:
            pytest.fail(f"the child's JOIN reached R from {join.src}: the router did not take "
                        "it, so no flow can be set up there (2.8-1)")
        if before_ack is not None:
            before_ack(join)
        self.rx.send(csp_datagram(
            CSP(group=group, receiver=self.RX, seq=join[CSP].seq)
            / CSP_JoinAck(hold_time=HOLD_S, path_mtu=path_mtu, spec_size=len(spec),
                          spec_hash=digest, **self.signed(group, len(spec), digest)),
            src=self.RX, dst=join.src, ttl=64))
        served = bytearray(spec)
        if corrupt:
            served[len(served) // 2] ^= 0xFF
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            for d in self.rx.datagrams(0.2):
                if is_csp(d, group, 5):
                    self.serve_chunk(decode(d), bytes(served), digest, mangle)
            ack = self.s1.first(lambda d: is_csp(d, group, 2), 0.05)
            if ack is not None:
                return ack
        if corrupt or mangle:
            return None
        pytest.fail("the router never JOIN_ACKed its child after R's JOIN_ACK and spec (2.8-1)")

    def signed(self, group: int, size: int, digest: bytes, key=R_KEY) -> dict:
        """The signature trailer R puts on its JOIN_ACK or SPEC_UPDATE (protocol.md 2.9)."""
        return key.trailer(self.RX, group, size, digest)

    def serve_chunk(self, req, spec: bytes | None = None, digest: bytes | None = None,
                    mangle=None) -> None:
        """Answer a SPEC_REQUEST as R: a chunk of `spec` (default: the multiplex spec),
        announced under `digest` (default: its own SHA-256)."""
        from concast.scapy import CSP_SpecRequest
        spec = self.spec if spec is None else spec
        digest = digest or (self.spec_hash if spec is self.spec else hashlib.sha256(spec).digest())
        r = req[CSP_SpecRequest]
        if r.spec_hash != digest:
            return
        count = -(-len(spec) // CHUNK_SIZE)
        data = spec[r.chunk_index * CHUNK_SIZE:(r.chunk_index + 1) * CHUNK_SIZE]
        chunk = CSP_SpecChunk(spec_hash=digest, spec_size=len(spec), chunk_index=r.chunk_index,
                              chunk_count=count, data=data)
        if mangle is not None:
            chunk = mangle(chunk)
        self.rx.send(csp_datagram(
            CSP(group=req[CSP].group, receiver=self.RX, seq=req[CSP].seq) / chunk,
            src=self.RX, dst=req.src, ttl=64, flags="DF"))


def on_net(net, kind: str) -> Target:
    """A Target on a network the suite started: s1 and rx are its hosts, r1 the router."""
    plan, log = net.plan, Log()
    r1 = plan.routers["r1"]
    ports = {h: Port(h, net.netns(h), net.iface(h), plan.hosts[h].mac,
                     plan.hosts[h].gateway_mac, log) for h in ("s1", "rx")}
    addrs = {h: str(plan.hosts[h].ip) for h in ("s1", "rx")}
    return Target(ports, addrs, [str(r1.router_id)] + [str(a) for a in r1.own_addresses()],
                  kind, net)


def _linux_port(role: str, iface: str, log: Log, ip: str) -> Port:
    sysfs = Path("/sys/class/net") / iface
    if not (int((sysfs / "flags").read_text(), 16) & 1):
        raise RuntimeError(f"{iface} is down: `ip link set {iface} up` first")
    mac = (sysfs / "address").read_text().strip()
    return Port(role, None, iface, mac, "", log, ip=ip)


def on_ports(dut, kind: str = "device", make_port=_linux_port) -> Target:
    """A Target on an external device under test (`concast conform --ports`): the suite's two
    ends are interfaces facing the device (a DeviceUnderTest). `make_port(role, iface, log,
    ip)` opens one end (default: an AF_PACKET socket in this namespace; PTF: its dataplane)."""
    log, ports = Log(), {}
    try:
        for role in ("s1", "rx"):
            ports[role] = port = make_port(role, dut.ifaces[role], log, dut.addrs[role])
            port.gateway_mac = dut.dut_macs.get(role) or port.resolve(dut.dut_addrs)
            if not port.gateway_mac:
                raise RuntimeError(
                    f"no answer to ARP for {', '.join(dut.dut_addrs)} on {dut.ifaces[role]}: "
                    "give the device's MAC with --dut-mac, or check the cabling")
    except BaseException:
        for port in ports.values():
            port.close()
        raise
    return Target(ports, dict(dut.addrs), list(dut.dut_addrs), kind)


def is_csp(ip: bytes, group: int, ctype: int) -> bool:
    c = classify(ip)
    return (c.kind == "csp" and c.group == group and ip[(ip[0] & 0xF) * 4 + 1] == ctype)


def build_on_ports(dut):
    """The body of the session fixture for --ports (`yield from`)."""
    if not MPLEX_SPEC.exists():
        pytest.skip(f"{MPLEX_SPEC} is not built (make specs)")
    try:
        t = on_ports(dut)
    except (RuntimeError, OSError) as e:
        pytest.fail(f"the device under test cannot be reached: {e}", pytrace=False)
    try:
        yield t
    finally:
        for p in t.ports.values():
            p.close()


def use_p4_program(compiled: str) -> None:
    """Make the BMv2 data plane load a user's compiled program ("JSON,P4INFO", from
    `concast conform --p4`) instead of p4src/concast.p4: the controller reads these paths
    when it programs each switch and when it gives routerd its --dataplane-cmd."""
    from concast.controller.p4 import pipeline
    json, p4info = compiled.split(",")
    pipeline.JSON_PATH, pipeline.P4INFO_PATH = Path(json), Path(p4info)


def start_routerd(net) -> None:
    """Our routerd, as it runs by default: it takes only specs R signed (the suite's R does)."""
    from hostdtools import HOLD
    net.start_concast(hold=float(HOLD), hosts=(), timeout=10)


def build(dataplane: str, kind: str, run_dir: Path, p4_program: str | None = None):
    """The body of the session fixture (`yield from`)."""
    from hostdtools import missing_builds
    from concast.topologies import line
    why = missing_builds()
    if why:
        pytest.skip(why)
    if not MPLEX_SPEC.exists():
        pytest.skip(f"{MPLEX_SPEC} is not built (make specs)")
    if p4_program:
        from concast.controller.p4.switch import tools_missing
        if tools_missing():
            pytest.skip(tools_missing())
        use_p4_program(p4_program)
    elif dataplane == "bmv2":
        from bmv2tools import ensure_p4_build
        ensure_p4_build()               # skips, saying why, without p4c and BMv2
    net = line(1, senders=1, capable=(kind == "ours"), dataplane=dataplane).start(run_dir=run_dir)
    t = None
    try:
        if kind == "ours":
            start_routerd(net)
        t = on_net(net, kind)
        t.dataplane = dataplane
        yield t
    finally:
        if t is not None:
            for p in t.ports.values():
                p.close()
        net.stop()


