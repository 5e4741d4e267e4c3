"""The forwarding system tests again on the BMv2 data plane (ConcastNet(dataplane="bmv2")):
tree(levels=2, fanout=2, senders=8) with simple_switch_grpc routers and no routerd, running
test_ovs_tree.py's bodies; counters; the network's lifecycle. test_bmv2_concast.py has the
concast tests (routerd and hostd on the same tree).

Skips, with the reason, unless p4c-bm2-ss and simple_switch_grpc are on PATH (and the
usual system-test needs: root, Mininet). The OVS modules are untouched by this one.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from bmv2tools import MARKS, bmv2_tree, bodies

from concast.controller.p4.switch import tools_missing

pytestmark = MARKS


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    n = bmv2_tree(tmp_path_factory, "bmv2-tree")
    try:
        yield n
    finally:
        n.stop()


def test_bmv2_every_sender_reaches_the_receiver_ttl_drops_once_per_router(net):
    bodies("test_ovs_tree").test_every_sender_reaches_the_receiver_ttl_drops_once_per_router(net)


def test_bmv2_ipv4_options_cross_the_routers_intact_with_a_correct_checksum(net):
    bodies("test_ovs_tree").test_ipv4_options_cross_the_routers_intact_with_a_correct_checksum(net)


def test_bmv2_a_datagram_whose_ttl_runs_out_is_dropped(net):
    bodies("test_ovs_tree").test_a_datagram_whose_ttl_runs_out_is_dropped(net)


def test_bmv2_routers_answer_arp_for_their_port_addresses(net):
    bodies("test_ovs_tree").test_routers_answer_arp_for_their_port_addresses(net)


def test_bmv2_counters_see_the_traffic(net):
    before = net["r1"].counters()["forwarded"]
    assert net.ping("rx", "s1").ok
    assert net["r1"].counters()["forwarded"] >= before + 2       # request and reply
    assert net["r1"].flows() == []                                 # no routerd, no flows


def test_bmv2_stop_leaves_no_switch_interface_or_record(tmp_path_factory):
    from concast import procs
    from concast.topologies import line
    n = line(n_routers=2, senders=1)
    n.dataplane = "bmv2"
    why = tools_missing()
    if why:
        pytest.skip(why)
    n = n.start(run_dir=tmp_path_factory.mktemp("bmv2-line"))
    try:
        switches = [d for d in n.record.data["daemons"] if d["name"] == "simple_switch_grpc"]
        assert len(switches) == 2 and all(procs.alive(d["pid"], d["start"]) for d in switches)
        assert n.ping("s1", "rx").ttl == 62
        ifaces, record = n.record.data["ifaces"], n.record.path
    finally:
        n.stop()
    assert not any(procs.alive(d["pid"], d["start"]) for d in switches)
    assert not [i for i in ifaces if (Path("/sys/class/net") / i).exists()]
    assert not record.exists()
