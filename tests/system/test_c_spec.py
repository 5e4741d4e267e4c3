"""A merge spec written in C on Mininet: tree(levels=2, fanout=2, senders=4) with hostd on every
host and routerd on r1 (root) and r2, r3 (leaves, two senders each). The receiver installs
sum-c (mergespecs/specs/c/sum-c.c, on the C SDK mergespecs/sdk-c) with a longer round timeout
embedded as its parameter; every router fetches and runs it, and rx gets exact sums from
fewer datagrams than were sent, as with the Rust `sum` (test_concast_tree.py)."""
from __future__ import annotations

import hashlib
import subprocess

import pytest
from hostdtools import (ROUND_TIMEOUT_US, SPEC_TOOL, SPECS, Senders, collect, concast_network,
                        round_lines, router_counters, router_flow, wait_for)

from concast.hosts import Client
from concast.topologies import tree

pytestmark = pytest.mark.mininet
SENDERS = ["s1", "s2", "s3", "s4"]
ROUTERS = ["r1", "r2", "r3"]
SUM_C = SPECS / "sum-c.wasm"


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    if not SUM_C.exists():
        pytest.skip("build/mergespecs/sum-c.wasm is not built (make specs; it needs clang and lld)")
    yield from concast_network(tree(levels=2, fanout=2, senders=4),
                               tmp_path_factory.mktemp("cspec"))


def active_flow(net, r: str, group: int) -> dict | None:
    flow = router_flow(net, r, group)
    return flow if flow and flow["state"] == "active" else None


def test_routers_merge_with_a_spec_written_in_c(net, tmp_path):
    spec = tmp_path / "sum-c-tolerant.wasm"
    subprocess.run([str(SPEC_TOOL), "embed", str(SUM_C), "--param",
                    f"timeout_us={ROUND_TIMEOUT_US}", "--output", str(spec)],
                   check=True, capture_output=True)
    group, keys = 41, list(range(1, 9))
    with Client(net.hostd_socket("rx")) as rx:
        rx.install_spec(group, spec)
        rx.subscribe(group, port=5000)
        before = router_counters(net, ROUTERS)
        senders = Senders(net, SENDERS, group)
        try:
            for h in SENDERS:
                assert any('"active"' in e for e in senders.events(h)), senders.output[h]
            flows = {r: wait_for(lambda r=r: active_flow(net, r, group), 10,
                                 f"{r} did not activate the flow") for r in ROUTERS}
            senders.send(round_lines(SENDERS, keys, lambda i, k: 1000 * (i + 1) - k))
            out = senders.finish()
            sums, counts, events = collect(rx, group, {k: len(SENDERS) for k in keys})
        finally:
            senders.kill()
    assert counts == {k: len(SENDERS) for k in keys}, "every contribution accounted for once"
    assert sums == {k: sum(1000 * (i + 1) - k for i in range(len(SENDERS))) for k in keys}
    for h in SENDERS:
        assert sum("as=merging" in line for line in out[h]) == len(keys), out[h]
    assert all(e["kind"] == "merged" for e in events)
    assert len(events) < len(SENDERS) * len(keys), f"{len(events)} datagrams reached rx"
    after = router_counters(net, ROUTERS)
    sha = hashlib.sha256(spec.read_bytes()).hexdigest()
    for r in ROUTERS:
        merged_in = after[r]["merged_in"] - before[r]["merged_in"]
        merged_out = after[r]["merged_out"] - before[r]["merged_out"]
        assert merged_in > merged_out > 0, f"{r} did not merge: in {merged_in}, out {merged_out}"
        assert (flows[r]["state"], flows[r]["spec"]) == ("active", sha), flows[r]
