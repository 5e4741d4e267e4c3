"""Incremental deployment on BMv2: mixed(levels=3, fanout=2, senders=8), whose middle level
(r2, r3) runs the same P4 program with no CPU port and no routerd. test_concast_mixed.py's
body: merging only at the capable routers, nothing lost.

Skips, with the reason, unless p4c-bm2-ss and simple_switch_grpc are on PATH.
"""
from __future__ import annotations

import pytest
from bmv2tools import MARKS, bodies, ensure_p4_build
from hostdtools import concast_network

from concast.topologies import mixed

pytestmark = MARKS


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    ensure_p4_build()
    yield from concast_network(mixed(levels=3, fanout=2, senders=8, dataplane="bmv2"),
                               tmp_path_factory.mktemp("bmv2-mixed"))


def test_bmv2_merging_happens_only_at_capable_routers_and_nothing_is_lost(net):
    bodies("test_concast_mixed").test_merging_happens_only_at_capable_routers_and_nothing_is_lost(net)
