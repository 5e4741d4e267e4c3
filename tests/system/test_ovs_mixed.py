"""mixed(): capable leaves and root, oblivious middle level. Everything is delivered."""
from __future__ import annotations

import pytest
from systools import concast_option, options_of, send_raw, tcp_transfer, udp_datagrams

from concast.controller.ovs import selectors as sel
from concast.controller.routes import router_hops
from concast.topologies import mixed

pytestmark = pytest.mark.mininet
SENDERS = [f"s{i}" for i in range(1, 9)]


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    n = mixed(levels=3, fanout=2, senders=8).start(run_dir=tmp_path_factory.mktemp("mixed"))
    try:
        yield n
    finally:
        n.stop()


def test_oblivious_routers_have_no_cpu_port_and_no_diversion(net):
    oblivious = [r for r, h in net.routers.items() if not h.capable]
    assert oblivious == ["r2", "r3"]
    for name in oblivious:
        r = net[name]
        assert r.cpu_iface is None
        assert str(r.cpu_ofport) not in r.ports()
        assert not [f for f in r.flows() if f["cookie"] & sel.CLASS_MASK != sel.BASE_COOKIE]
        with pytest.raises(ValueError):
            r.add_selector(net.ip("rx"), 17, 5000)
    for name in ("r1", "r4"):
        assert str(net[name].cpu_ofport) in net[name].ports()


def test_every_sender_and_the_receiver_reach_each_other(net):
    hops = router_hops(net.plan, "s1", "rx")
    assert hops == 3
    for s in SENDERS:
        there, back = net.ping(s, "rx"), net.ping("rx", s)
        assert there.ok and back.ok, f"{s} <-> rx"
        assert there.ttl == back.ttl == 64 - hops


def test_concast_datagrams_from_every_sender_are_delivered(net):
    with net.capture("rx", "udp port 6000", name="mixed") as cap:
        for i, s in enumerate(SENDERS, start=1):
            send_raw(net[s], net.ip("rx"), options=concast_option(i), dport=6000)
        net.ping("s8", "rx")
    got = udp_datagrams(cap.packets(), 6000)
    assert sorted(options_of(ip) for ip in got) == sorted(
        bytes.fromhex(concast_option(i)) for i in range(1, 9))
    assert {ip[8] for ip in got} == {61}


def test_tcp_across_capable_and_oblivious_routers(net):
    assert tcp_transfer(net, "s5", "rx", 1_000_000)
