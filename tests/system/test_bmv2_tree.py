"""The key system tests again on the BMv2 data plane (ConcastNet(dataplane="bmv2")):
tree(levels=2, fanout=2, senders=8) with simple_switch_grpc routers. Forwarding and TTL
(test_ovs_tree.py) without routerd; then concast with routerd on every router, which
installs concast_flows entries through `python -m concast.controller.p4 ... divert`, and
the 8-sender exact-sum test of test_concast_tree.py.

Skips, with the reason, unless p4c-bm2-ss and simple_switch_grpc are on PATH (and the
usual system-test needs: root, Mininet). The OVS modules are untouched by this one.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from concast import ROOT
from concast.controller.p4 import pipeline as P
from concast.controller.p4.switch import tools_missing
from concast.topologies import tree

WHY_NOT = tools_missing()
pytestmark = [pytest.mark.mininet, pytest.mark.p4,
              pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")]


def _bodies(name: str):
    """The OVS test modules, imported only when these tests run (pytest imports its own
    copies of them in importlib mode; without the toolchain nothing here is imported)."""
    import importlib
    return importlib.import_module(name)


def bmv2_tree(tmp_path_factory, name: str):
    why = tools_missing()
    if why:
        pytest.skip(why)
    if not (P.JSON_PATH.exists() and P.P4INFO_PATH.exists()):
        r = subprocess.run(["make", "p4"], cwd=ROOT, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            pytest.fail(f"make p4 failed: {r.stdout[-1000:]}{r.stderr[-1000:]}")
    n = tree(levels=2, fanout=2, senders=8)
    n.dataplane = "bmv2"
    return n.start(run_dir=tmp_path_factory.mktemp(name))


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    n = bmv2_tree(tmp_path_factory, "bmv2-tree")
    try:
        yield n
    finally:
        n.stop()


def test_bmv2_every_sender_reaches_the_receiver_ttl_drops_once_per_router(net):
    _bodies("test_ovs_tree").test_every_sender_reaches_the_receiver_ttl_drops_once_per_router(net)


def test_bmv2_ipv4_options_cross_the_routers_intact_with_a_correct_checksum(net):
    _bodies("test_ovs_tree").test_ipv4_options_cross_the_routers_intact_with_a_correct_checksum(net)


def test_bmv2_a_datagram_whose_ttl_runs_out_is_dropped(net):
    _bodies("test_ovs_tree").test_a_datagram_whose_ttl_runs_out_is_dropped(net)


def test_bmv2_routers_answer_arp_for_their_port_addresses(net):
    _bodies("test_ovs_tree").test_routers_answer_arp_for_their_port_addresses(net)


def test_bmv2_counters_see_the_traffic(net):
    before = net["r1"].counters()["forwarded"]
    assert net.ping("rx", "s1").ok
    assert net["r1"].counters()["forwarded"] >= before + 2       # request and reply
    assert net["r1"].flows() == []                                 # no routerd, no flows


def test_bmv2_stop_leaves_no_switch_interface_or_record(tmp_path_factory):
    from concast.topologies import line, procs
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
