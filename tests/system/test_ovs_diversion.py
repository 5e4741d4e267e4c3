"""docs/protocol.md section 4 on OVS: selectors divert to the CPU port, re-injected
frames are forwarded (never diverted again), CSP and own addresses go to routerd.

    s1 - r1 - r2 - rx        both routers capable
"""
from __future__ import annotations

import subprocess

import pytest
from systools import concast_option, ip_datagram, options_of, send_raw, udp_datagrams

from concast.controller.ovs import selectors as sel
from concast.topologies import line

pytestmark = pytest.mark.mininet
RA = "94040000"


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    n = line(2, senders=1).start(run_dir=tmp_path_factory.mktemp("diversion"))
    try:
        yield n
    finally:
        n.stop()


def selector_flow(router, s: sel.Selector) -> dict:
    flows = [f for f in router.flows() if f["cookie"] == s.cookie]
    assert len(flows) == 1
    return flows[0]


def test_selector_diverts_and_reinjected_frame_is_forwarded(net, cpu_port):
    r1, rx = net["r1"], net.ip("rx")
    port = cpu_port(r1.cpu_iface)
    s = sel.Selector(rx, 17, 5000)
    # exactly the command line routerd runs
    subprocess.run(s.install_argv(r1.bridge), check=True)
    with net.capture("rx", "udp", name="divert") as cap:
        send_raw(net["s1"], rx, options=concast_option(42), dport=5000, payload="aa" * 8)
        send_raw(net["s1"], rx, options=concast_option(42), dport=5001)   # not selected
        frame = port.recv()
        assert frame is not None, "selected datagram did not reach the CPU port"
        assert port.recv_all(0.3) == []                                    # only that one
        # diverted as it arrived: router MAC in, sender MAC out, TTL untouched
        assert frame[0:6] == mac_bytes(r1.mac)
        assert frame[6:12] == mac_bytes(net.plan.hosts["s1"].mac)
        ip = ip_datagram(frame)
        assert ip[8] == 64 and options_of(ip) == bytes.fromhex(concast_option(42))
        assert selector_flow(r1, s)["n_packets"] == 1

        # re-inject as routerd does: to the router's MAC, from the CPU port's MAC
        port.send(mac_bytes(r1.mac) + mac_bytes(r1.plan.cpu_routerd_mac) + frame[12:])
        net.ping("s1", "rx")                                             # a barrier
    got5000 = udp_datagrams(cap.packets(), 5000)
    got5001 = udp_datagrams(cap.packets(), 5001)
    assert len(got5001) == 1 and got5001[0][8] == 62
    assert len(got5000) == 1, "re-injected datagram was not forwarded"
    assert got5000[0][8] == 62                          # one decrement per router, no more
    assert options_of(got5000[0]) == bytes.fromhex(concast_option(42))
    assert selector_flow(r1, s)["n_packets"] == 1      # not diverted a second time
    assert r1.ports()[str(r1.cpu_ofport)]["rx_pkts"] >= 1

    subprocess.run(s.remove_argv(r1.bridge), check=True)
    assert s not in r1.selectors()
    with net.capture("rx", "udp port 5000", name="undivert") as cap:
        send_raw(net["s1"], rx, dport=5000)
        assert port.recv(0.3) is None
        net.ping("s1", "rx")
    assert len(udp_datagrams(cap.packets(), 5000)) == 1


def test_csp_goes_to_the_first_capable_router_and_past_it_without_diversion(net, cpu_port):
    r1, r2 = net["r1"], net["r2"]
    p1, p2 = cpu_port(r1.cpu_iface), cpu_port(r2.cpu_iface)
    csp = dict(proto=253, options=RA, payload="01" + "00" * 15)
    send_raw(net["s1"], net.ip("rx"), **csp)
    frame = p1.recv()
    assert frame is not None and ip_datagram(frame)[9] == 253
    assert p2.recv(0.3) is None

    r1.disable_diversion()            # routerd gone at r1: r1 forwards CSP like any datagram
    try:
        send_raw(net["s1"], net.ip("rx"), **csp)
        frame = p2.recv()
        assert frame is not None and ip_datagram(frame)[8] == 63
        assert p1.recv(0.3) is None
    finally:
        r1.enable_diversion()
    send_raw(net["s1"], net.ip("rx"), **csp)
    assert p1.recv() is not None


def test_datagrams_to_a_router_address_go_to_its_cpu_port(net, cpu_port):
    r1, r2 = net["r1"], net["r2"]
    p1, p2 = cpu_port(r1.cpu_iface), cpu_port(r2.cpu_iface)
    for router, port, ttl in ((r1, p1, 64), (r2, p2, 63)):
        for addr in (router.router_id, router.plan.ports[0].address):
            send_raw(net["s1"], str(addr), dport=7)
            frame = port.recv()
            assert frame is not None, f"{addr} not diverted at {router.name}"
            ip = ip_datagram(frame)
            assert ip[16:20] == addr.packed and ip[8] == ttl


def test_selector_api_and_cookies(net):
    r1, rx = net["r1"], net.ip("rx")
    a = r1.add_selector(rx)                     # any protocol
    b = r1.add_selector(rx, 6, 80)
    c = r1.add_selector(rx, 6, 80)              # idempotent: same rule
    assert b == c and sorted(map(str, r1.selectors())) == sorted(map(str, [a, b]))
    assert sel.Selector.from_cookie(b.cookie) == b
    r1.remove_selector(rx)
    assert r1.selectors() == [b]
    subprocess.run(sel.remove_all_argv(r1.bridge), check=True)
    assert r1.selectors() == []
