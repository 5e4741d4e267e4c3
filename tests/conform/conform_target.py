"""The network the suite runs against, and the two ends it plays (s1: a child; rx: R).

Everything is sent and read on the hosts' wires (conform_wire.Port); the router under test
is reached only through its data plane, as a user's router would be.
"""
from __future__ import annotations

import hashlib
import itertools
import time
from pathlib import Path

import pytest

from concast import ROOT
from concast.scapy import (CHUNK_SIZE, CSP, CSP_Join, CSP_JoinAck, CSP_SpecChunk, classify,
                           csp_datagram)
from conform_wire import Log, Port

MPLEX_SPEC = ROOT / "build" / "mergespecs" / "multiplex.wasm"
HOLD_S = 300                  # what our child asks for: no expiry during a run
_groups = itertools.count(1000)


def fresh_group() -> int:
    """A group no earlier test used, so soft state left behind never meets a new test."""
    return next(_groups)


def decode(ip: bytes):
    from scapy.layers.inet import IP
    return IP(ip)


class Target:
    def __init__(self, net, kind: str) -> None:
        self.net, self.kind = net, kind
        plan = net.plan
        self.r1 = plan.routers["r1"]
        self.router_addresses = {str(a) for a in self.r1.own_addresses()}
        self.router_id = str(self.r1.router_id)
        self.ports: dict[str, Port] = {}
        log = Log()
        for h in ("s1", "rx"):
            hp = plan.hosts[h]
            self.ports[h] = Port(h, net.netns(h), net.iface(h), hp.mac, hp.gateway_mac, log)
        self.s1, self.rx = self.ports["s1"], self.ports["rx"]
        self.S1, self.RX = str(plan.hosts["s1"].ip), str(plan.hosts["rx"].ip)
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
                                                      selector_dport=dport)
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
                 mangle=None) -> bytes | None:
        """Join (rx, group) from s1 and answer as R, naming `spec` (default: the multiplex
        spec) with `path_mtu`, serving its chunks (with one byte flipped if `corrupt`, each
        SPEC_CHUNK body passed through `mangle` if given) until r1 JOIN_ACKs s1; returns that
        JOIN_ACK (the flow is then ACTIVE at r1). When spoiling the transfer, None if it does
        not come within `wait` seconds; otherwise the test fails."""
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
        self.rx.send(csp_datagram(
            CSP(group=group, receiver=self.RX, seq=join[CSP].seq)
            / CSP_JoinAck(hold_time=HOLD_S, path_mtu=path_mtu, spec_size=len(spec),
                          spec_hash=digest),
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


def is_csp(ip: bytes, group: int, ctype: int) -> bool:
    c = classify(ip)
    return (c.kind == "csp" and c.group == group and ip[(ip[0] & 0xF) * 4 + 1] == ctype)


def build(dataplane: str, kind: str, run_dir: Path):
    """The body of the session fixture (`yield from`)."""
    from hostdtools import missing_builds, start_routerd
    from concast.topologies import line
    why = missing_builds()
    if why:
        pytest.skip(why)
    if not MPLEX_SPEC.exists():
        pytest.skip(f"{MPLEX_SPEC.relative_to(ROOT)} is not built (make specs)")
    if dataplane == "bmv2":
        from bmv2tools import ensure_p4_build
        ensure_p4_build()               # skips, saying why, without p4c and BMv2
    net = line(1, senders=1, capable=(kind == "ours"), dataplane=dataplane).start(run_dir=run_dir)
    t = None
    try:
        if kind == "ours":
            start_routerd(net)
        t = Target(net, kind)
        yield t
    finally:
        if t is not None:
            for p in t.ports.values():
                p.close()
        net.stop()


