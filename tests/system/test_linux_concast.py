"""The router issue's concast acceptance tests on the Linux data plane (routers are network
namespaces forwarding in the kernel, diversion by tc; docs/dataplane-linux.md): routerd in
every router's namespace, hostd on every host, tree(levels=2, fanout=2, senders=8). The
bodies are test_concast_tree.py's, run against this network."""
from __future__ import annotations

import importlib

import pytest
from hostdtools import concast_network, router_flow, Senders, tolerant, wait_for

from concast.hosts import Client
from concast.topologies import tree

pytestmark = pytest.mark.mininet


def bodies():
    """Imported when a test runs, not at collection (pytest would run its module fixture)."""
    return importlib.import_module("test_concast_tree")


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    yield from concast_network(tree(levels=2, fanout=2, senders=8, dataplane="linux"),
                               tmp_path_factory.mktemp("linux-concast"))


@pytest.fixture
def rx(net):
    with Client(net.hostd_socket("rx")) as c:
        yield c


def test_linux_eight_senders_get_exact_sums_through_merging_routers(net, rx):
    bodies().test_eight_senders_get_exact_sums_through_merging_routers(net, rx)


def test_linux_router_and_host_verbs_answer_with_json(net, rx, tmp_path):
    bodies().test_router_and_host_verbs_answer_with_json(net, tmp_path)


def test_linux_datagrams_of_senders_that_never_joined_still_arrive(net, rx):
    bodies().test_datagrams_of_senders_that_never_joined_still_arrive(net, rx)


def test_linux_malformed_packets_are_counted_and_dropped_and_good_traffic_flows(net, rx):
    bodies().test_malformed_packets_are_counted_and_dropped_and_good_traffic_flows(net, rx)


def test_linux_a_crashed_routerd_is_bypassed_and_rebuilt_from_refreshes(net, rx):
    bodies().test_a_crashed_routerd_is_bypassed_and_rebuilt_from_refreshes(net, rx)


def test_linux_routerd_forwards_what_it_writes_straight_out_of_the_port(net, rx):
    bodies().test_routerd_forwards_what_it_writes_straight_out_of_the_port_with_ttl_rules(net, rx)


def test_linux_routerd_installs_one_tc_rule_per_selector_and_removes_it(net, rx):
    """routerd's selector for an active flow is a tc rule in the router's block (the
    control plane reads it back); when the flow goes, so does the rule."""
    group, port = 17, 5017
    rx.install_spec(group, tolerant("sum"))
    rx.subscribe(group, port=port)
    want = (net.ip("rx"), 17, port)
    senders = Senders(net, ["s1"], group, dport=port)
    try:
        wait_for(lambda: want in net["r2"].selectors() and want in net["r1"].selectors(), 10,
                 "routerd did not install its selectors")
        assert want not in net["r3"].selectors(), "r3 has no child in this flow"
        senders.send({"s1": "1=5"})
        senders.finish()
    finally:
        senders.kill()
    rule = next(f for f in net["r2"].flows() if (f["dst"], f["proto"], f["dport"]) == want)
    assert rule["n_packets"] >= 1 and rule["to"] == net["r2"].cpu_switch_iface
    wait_for(lambda: router_flow(net, "r2", group) is None, 15, "the flow did not time out")
    assert want not in net["r2"].selectors(), "the rule went with the flow"
