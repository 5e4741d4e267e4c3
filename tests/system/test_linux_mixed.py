"""Incremental deployment on the Linux data plane: mixed(levels=3, fanout=2, senders=8),
whose middle level (r2, r3) are plain kernel routers with no CPU port, no tc rules and no
routerd. test_concast_mixed.py's body: merging only at the capable routers, nothing lost."""
from __future__ import annotations

import importlib

import pytest
from hostdtools import concast_network

from concast.topologies import mixed

pytestmark = pytest.mark.mininet


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    yield from concast_network(mixed(levels=3, fanout=2, senders=8, dataplane="linux"),
                               tmp_path_factory.mktemp("linux-mixed"))


def test_linux_oblivious_routers_have_no_cpu_port_and_no_rules(net):
    for name in ("r2", "r3"):
        r = net[name]
        assert not r.capable and r.flows() == []
        assert str(r.cpu_ofport) not in r.ports()
        assert r.cpu_iface is None
    assert str(net["r1"].cpu_ofport) in net["r1"].ports()


def test_linux_merging_happens_only_at_capable_routers_and_nothing_is_lost(net):
    body = importlib.import_module("test_concast_mixed")
    body.test_merging_happens_only_at_capable_routers_and_nothing_is_lost(net)
