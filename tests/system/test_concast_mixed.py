"""concast across capable and oblivious routers: mixed(levels=3, fanout=2, senders=8) has a
capable root r1, an oblivious middle level (r2, r3) and capable leaves r4..r7 with two
senders each. Joins skip the oblivious routers, merging happens only where routerd runs,
and nothing is lost."""
from __future__ import annotations

import pytest
from hostdtools import (Senders, collect, concast_network, round_lines, router_counters,
                        router_flow, tolerant)

from concast.hosts import Client
from concast.topologies import mixed

pytestmark = pytest.mark.mininet
SENDERS = [f"s{i}" for i in range(1, 9)]
CAPABLE = ["r1", "r4", "r5", "r6", "r7"]
OBLIVIOUS = ["r2", "r3"]


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    yield from concast_network(mixed(levels=3, fanout=2, senders=8),
                               tmp_path_factory.mktemp("mixed"))


def test_merging_happens_only_at_capable_routers_and_nothing_is_lost(net):
    assert sorted(net.routerd_daemons) == CAPABLE
    group, keys = 7, list(range(1, 9))
    with Client(net.hostd_socket("rx")) as rx:
        rx.install_spec(group, tolerant("sum"))
        rx.subscribe(group)
        arrived_before = rx.stats()["counters"]["concast_in"]
        before = router_counters(net, CAPABLE)
        senders = Senders(net, SENDERS, group)
        try:
            r1 = router_flow(net, "r1", group)
            leaves = [router_flow(net, r, group) for r in ("r4", "r5", "r6", "r7")]
            senders.send(round_lines(SENDERS, keys, lambda i, k: k * 1000 + i))
            sums, counts, _ = collect(rx, group, {k: 8 for k in keys})
            arrived = rx.stats()["counters"]["concast_in"] - arrived_before
            senders.finish()
        finally:
            senders.kill()
    assert counts == {k: 8 for k in keys}, "every contribution accounted for once"
    assert sums == {k: sum(k * 1000 + i for i in range(8)) for k in keys}
    assert arrived < len(SENDERS) * len(keys), f"{arrived} datagrams reached rx: no merging"
    # The root's children are the capable leaves: the joins crossed r2 and r3 untouched.
    assert sorted(r1["children"]) == sorted(net.ip(r) for r in ("r4", "r5", "r6", "r7"))
    for leaf in leaves:
        assert leaf["upstream"] == net.ip("r1") and len(leaf["children"]) == 2, leaf
    after = router_counters(net, CAPABLE)
    for r in CAPABLE:
        merged_in = after[r]["merged_in"] - before[r]["merged_in"]
        merged_out = after[r]["merged_out"] - before[r]["merged_out"]
        assert merged_in > merged_out > 0, f"{r} did not merge: in {merged_in}, out {merged_out}"
    for r in OBLIVIOUS:
        assert not net.daemons.of(r) and net[r].cpu_iface is None
