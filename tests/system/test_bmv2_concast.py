"""The router issue's concast acceptance tests on the BMv2 data plane: routerd on every
capable router (installing concast_flows entries through `python -m concast.controller.p4
... divert`) and hostd on every host, on tree(levels=2, fanout=2, senders=8). The bodies
are test_concast_tree.py's, except for malformed packets: there the P4 parser, not
routerd, drops and counts bad option lists. test_bmv2_mixed.py has the mixed network.

Skips, with the reason, unless p4c-bm2-ss and simple_switch_grpc are on PATH.
"""
from __future__ import annotations

import pytest
from bmv2tools import MARKS, bodies, ensure_p4_build
from hostdtools import Senders, concast_network, router, router_flow, tolerant, wait_for

from concast.hosts import Client
from concast.topologies import tree

pytestmark = MARKS


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    ensure_p4_build()
    yield from concast_network(tree(levels=2, fanout=2, senders=8, dataplane="bmv2"),
                               tmp_path_factory.mktemp("bmv2-concast"))


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
    tree_tests = bodies("test_concast_tree")
    csp_before = router(net, "r2")["counters"]["malformed"].get("csp_truncated", 0)
    # The P4 parser drops bad option lists and counts them by kind; CSP is diverted, so
    # routerd finds the truncated message.
    before, after = tree_tests.malformed_amid_good_traffic(
        net, rx, lambda r: net[r].counters()["malformed"])
    for name in tree_tests.MALFORMED:
        got = after["r2"][name] - before["r2"][name]
        assert got == tree_tests.COPIES, f"r2's parser counted {got} {name} datagrams"
    assert after["r1"] == before["r1"], "dropped at the first router, never forwarded"
    got = router(net, "r2")["counters"]["malformed"].get("csp_truncated", 0) - csp_before
    assert got == tree_tests.COPIES, f"routerd on r2 counted {got} truncated CSP messages"


def test_bmv2_a_looping_spec_is_quarantined_and_other_flows_keep_merging(net, rx, tmp_path):
    bodies("test_concast_tree").test_a_looping_spec_is_quarantined_and_other_flows_keep_merging(
        net, rx, tmp_path)


def test_bmv2_a_crashed_routerd_is_bypassed_and_rebuilt_from_refreshes(net, rx):
    bodies("test_concast_tree").test_a_crashed_routerd_is_bypassed_and_rebuilt_from_refreshes(
        net, rx)
