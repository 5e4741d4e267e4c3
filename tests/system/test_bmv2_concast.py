"""The router issue's concast acceptance tests on the BMv2 data plane: routerd on every
capable router (installing concast_flows entries through `python -m concast.controller.p4
... divert`) and hostd on every host, on tree(levels=2, fanout=2, senders=8) and on
mixed(levels=3) with an oblivious middle level. The bodies are those of
test_concast_tree.py and test_concast_mixed.py, except for malformed packets: there the
P4 parser, not routerd, drops and counts bad option lists.

Skips, with the reason, unless p4c-bm2-ss and simple_switch_grpc are on PATH.
"""
from __future__ import annotations

import pytest
from bmv2tools import MARKS, bmv2_tree, bodies
from hostdtools import (Senders, collect, missing_builds, router, router_flow, start_concast,
                        tolerant, wait_for)
from systools import send_raw

from concast.hosts import Client, aggregate

pytestmark = MARKS


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    why = missing_builds()
    if why:
        pytest.skip(why)
    n = bmv2_tree(tmp_path_factory, "bmv2-concast")
    try:
        n.routerd_daemons = start_concast(n)
        yield n
    finally:
        n.stop()


@pytest.fixture
def rx(net):
    with Client(net.hostd_socket("rx")) as c:
        yield c


def test_bmv2_eight_senders_get_exact_sums_through_merging_routers(net, rx):
    bodies("test_concast_tree").test_eight_senders_get_exact_sums_through_merging_routers(net, rx)


def test_bmv2_routers_divert_only_the_flows_routerd_activated(net, rx):
    group = 15
    rx.install_spec(group, tolerant("sum"))
    flow = (net.ip("rx"), group)
    senders = Senders(net, ["s1"], group, dport=5015)
    try:
        wait_for(lambda: (router_flow(net, "r2", group) or {}).get("state") == "active", 10,
                 "r2 did not activate the flow")
        assert flow in net["r2"].flows() and flow in net["r1"].flows()
        assert flow not in net["r3"].flows(), "r3 has no child in this flow"
        senders.finish()
    finally:
        senders.kill()
    wait_for(lambda: flow not in net["r2"].flows(), 10, "r2 kept the entry after the flow went")


def test_bmv2_malformed_packets_are_dropped_and_counted_by_the_data_plane(net, rx):
    mal = bodies("test_concast_tree").MALFORMED
    group, port, copies = 11, 5011, 3
    rx.install_spec(group, tolerant("sum"))
    rx.subscribe(group, port=port)
    senders = Senders(net, ["s1", "s3"], group, dport=port)
    try:
        wait_for(lambda: (router_flow(net, "r2", group) or {}).get("state") == "active", 10,
                 "r2 did not activate the flow")
        p4_before = {r: net[r].counters()["malformed"] for r in ("r1", "r2")}
        rd_before = router(net, "r2")["counters"]["malformed"]
        poison = aggregate.encode(9, 1000).hex()
        for opts in mal.values():
            send_raw(net["s3"], net.ip("rx"), options=opts, dport=port, payload=poison,
                     count=copies)
        # A CSP message cut short: the P4 program diverts CSP, routerd finds it truncated.
        send_raw(net["s3"], net.ip("rx"), proto=253, options="94040000", payload="0101002c",
                 count=copies)
        senders.send({"s1": "1=1", "s3": "1=2"})
        sums, counts, events = collect(rx, group, {1: 2})
        senders.finish()
    finally:
        senders.kill()
    assert sums == {1: 3} and counts == {1: 2}, "good traffic still merged and delivered"
    assert all(aggregate.decode(bytes.fromhex(e["payload"])).key != 9 for e in events)
    p4_after = {r: net[r].counters()["malformed"] for r in ("r1", "r2")}
    for name in mal:
        got = p4_after["r2"][name] - p4_before["r2"][name]
        assert got == copies, f"r2's parser counted {got} {name} datagrams, {copies} were sent"
    assert p4_after["r1"] == p4_before["r1"], "dropped at the first router, never forwarded"
    got = router(net, "r2")["counters"]["malformed"].get("csp_truncated", 0) \
        - rd_before.get("csp_truncated", 0)
    assert got == copies, f"routerd on r2 counted {got} truncated CSP messages"


def test_bmv2_a_looping_spec_is_quarantined_and_other_flows_keep_merging(net, rx, tmp_path):
    bodies("test_concast_tree").test_a_looping_spec_is_quarantined_and_other_flows_keep_merging(
        net, rx, tmp_path)


def test_bmv2_a_crashed_routerd_is_bypassed_and_rebuilt_from_refreshes(net, rx):
    bodies("test_concast_tree").test_a_crashed_routerd_is_bypassed_and_rebuilt_from_refreshes(
        net, rx)
