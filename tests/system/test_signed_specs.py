"""Receiver-signed specs on Mininet (docs/protocol.md 2.9): s1, s2 - r1 - rx with hostd
everywhere (rx signs, r1 and the senders verify, all by default). An attacker (s3) sends r1
forged JOIN_ACK, SPEC_UPDATE and SPEC_CHUNK messages with rx's address as their source; r1
refuses and counts each, and the honest flow keeps merging with rx's spec."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hostdtools import (PYTHON, Senders, collect, concast_network, round_lines, router,
                        router_flow, tolerant, wait_for)

from concast.hosts import Client
from concast.topologies import line

pytestmark = pytest.mark.mininet
HERE = Path(__file__).parent
SENDERS = ["s1", "s2"]


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    yield from concast_network(line(n_routers=1, senders=3), tmp_path_factory.mktemp("signed"))


def test_forged_spec_offers_are_refused_and_counted_and_the_flow_keeps_merging(net):
    group, keys = 21, [1, 2, 3]
    spec = tolerant("sum")
    with Client(net.hostd_socket("rx")) as rx:
        assert rx.status()["spec_key"], "hostd at rx signs by default"
        rx.install_spec(group, spec)
        rx.subscribe(group, port=5000)
        senders = Senders(net, SENDERS, group)
        try:
            for h in SENDERS:
                assert any('"active"' in e for e in senders.events(h)), senders.output[h]
            wait_for(lambda: (router_flow(net, "r1", group) or {}).get("state") == "active",
                     10, "r1 did not activate the flow")
            honest = router_flow(net, "r1", group)["spec"]
            before = router(net, "r1")["csp"]
            node = router(net, "r1", "status")["node"]
            out = net["s3"].cmd(f"{PYTHON} {HERE / 'forge_csp.py'} {node} {net.ip('rx')} {group}")
            assert "sent 4" in out, out
            wait_for(lambda: router(net, "r1")["csp"]["specs_rejected"]
                     - before["specs_rejected"] >= 3, 10, "r1 did not refuse the forgeries")
            senders.send(round_lines(SENDERS, keys, lambda i, k: 10 * (i + 1) + k))
            sums, counts, _ = collect(rx, group, {k: 2 for k in keys})
            senders.finish()
        finally:
            senders.kill()
    after = router(net, "r1")["csp"]
    assert after["specs_rejected"] - before["specs_rejected"] == 3, \
        "the evil-key JOIN_ACK, the evil-key SPEC_UPDATE and the unsigned JOIN_ACK"
    assert after["chunks_unsolicited"] - before["chunks_unsolicited"] == 1
    assert counts == {k: 2 for k in keys}
    assert sums == {k: 10 + k + 20 + k for k in keys}, "merged with rx's spec, exactly"
    flow = router_flow(net, "r1", group)
    assert (flow["state"], flow["spec"]) == ("active", honest)
    assert honest == hashlib.sha256(spec.read_bytes()).hexdigest()
