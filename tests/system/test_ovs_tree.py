"""tree(levels=2, senders=8) on OVS: forwarding, TTL, IPv4 options, TCP."""
from __future__ import annotations

import socket

import pytest
from systools import (concast_option, datagram_whose_ttl_runs_out_is_dropped, ip_checksum_ok,
                      options_of, routers_answer_arp_for_their_port_addresses, send_raw,
                      tcp_transfer, udp_datagrams)

from concast.controller.routes import router_hops
from concast.topologies import tree

pytestmark = pytest.mark.mininet
SENDERS = [f"s{i}" for i in range(1, 9)]


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    n = tree(levels=2, fanout=2, senders=8).start(run_dir=tmp_path_factory.mktemp("tree"))
    try:
        yield n
    finally:
        n.stop()


def test_every_sender_reaches_the_receiver_ttl_drops_once_per_router(net):
    hops = router_hops(net.plan, "s1", "rx")
    assert hops == 2
    with net.capture("rx", "icmp[icmptype] == icmp-echo", name="echo") as cap:
        for s in SENDERS:
            r = net.ping(s, "rx")
            assert r.ok, f"{s} cannot reach rx"
            assert r.ttl == 64 - hops            # the reply crossed the same routers
    seen = {}
    for p in cap.packets():
        seen[p["IP"].src] = p["IP"].ttl
    assert seen == {net.ip(s): 64 - hops for s in SENDERS}


def test_ipv4_options_cross_the_routers_intact_with_a_correct_checksum(net):
    variants = {
        5001: concast_option(7),                             # as senders emit it
        5002: "01" + "94040000" + concast_option(0xDEADBEEF) + "000000",  # NOP, RA, option
        5003: "9e06" + "00000001" + "01" + "00" * 33,          # the largest options area: 40
    }
    payload = b"concast options".hex()
    with net.capture("rx", "udp", name="options") as cap:
        for port, opts in variants.items():
            send_raw(net["s3"], net.ip("rx"), options=opts, dport=port, payload=payload)
        net.ping("s3", "rx")                                  # a barrier: in order after them
    pkts = cap.packets()
    for port, opts in variants.items():
        got = udp_datagrams(pkts, port)
        assert len(got) == 1, f"datagram to port {port} not delivered"
        ip = got[0]
        assert options_of(ip) == bytes.fromhex(opts)
        assert ip[8] == 62                                    # TTL 64 - 2 routers
        assert ip_checksum_ok(ip[:(ip[0] & 0xF) * 4]), "IPv4 header checksum is wrong"
        assert ip[12:16] == socket.inet_aton(net.ip("s3"))
        assert ip.endswith(bytes.fromhex(payload))


def test_tcp_through_two_userspace_ovs_routers(net):
    assert tcp_transfer(net, "s8", "rx", 2_000_000)


def test_counters_see_the_traffic(net):
    assert net.ping("rx", "s1").ok
    r1 = net.counters()["r1"]
    to_s1 = [f for f in r1["flows"]
             if f["table"] == 1 and f["fields"].get("nw_dst") == str(net.plan.hosts["s1"].subnet)]
    assert len(to_s1) == 1 and to_s1[0]["n_packets"] >= 1
    assert f"output:{net['r1'].port_to('r2')}" in to_s1[0]["actions"]
    assert r1["ports"][str(net["r1"].port_to("rx"))]["tx_pkts"] >= 1


def test_a_datagram_whose_ttl_runs_out_is_dropped(net):
    datagram_whose_ttl_runs_out_is_dropped(net)


def test_routers_answer_arp_for_their_port_addresses(net):
    routers_answer_arp_for_their_port_addresses(net)
