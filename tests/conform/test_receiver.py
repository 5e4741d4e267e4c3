"""The receiver R (protocol.md sections 2.8 and 3.3): hostd at rx, behind an oblivious
router, so only R acts; s1 is the suite, sending JOINs and MplexPkts. What R injects into its
own stack is read with a UDP socket opened inside rx's namespace (source, TTL, TOS, payload)."""
import itertools
import os
import socket
import struct

import pytest
from scapy.layers.inet import UDP

from concast.scapy import CSP_Error, EncapsulatedPkt, mplex_datagram
from conform_target import MPLEX_SPEC, decode, fresh_group, on_net
from conform_wire import socket_in

pytestmark = pytest.mark.mininet
IP_RECVTOS, IP_TOS, IP_TTL, IP_RECVTTL = 13, 1, 2, 12
_ports = itertools.count(31000)


@pytest.fixture(scope="module")
def r_net(request, tmp_path_factory):
    """s1 - r1 - rx with an oblivious r1 and hostd at rx, receiving multiplex group 1."""
    from hostdtools import HOLD, HOSTD, missing_builds
    from concast.hosts import Client
    from concast.hosts.client import wait_ready
    from concast.topologies import line
    if request.config.getoption("--conform-ports"):
        pytest.skip("checks our hostd as R on a network of its own; --ports tests a router")
    if request.config.getoption("--conform-p4"):
        pytest.skip("checks our hostd as R; --p4 tests a router's P4 program")
    why = missing_builds()
    if why:
        pytest.skip(why)
    net = line(1, senders=1, capable=False,
               dataplane=request.config.getoption("--conform-dataplane")).start(
        run_dir=tmp_path_factory.mktemp("conform-r"))
    t = None
    try:
        net.start_hostd([str(HOSTD), "--config", "{config}", "--hold", HOLD], hosts=["rx"])
        wait_ready(net.hostd_socket("rx"))
        with Client(net.hostd_socket("rx")) as c:
            c.request("mplex", action="on", role="receiver", group=1, spec_path=str(MPLEX_SPEC))
        t = on_net(net, "receiver")
        yield t
    finally:
        if t is not None:
            for p in t.ports.values():
                p.close()
        net.stop()


@pytest.fixture
def r(r_net, request):
    return r_net.for_test(request.node)


class Listener:
    """A UDP socket in rx's namespace reporting each datagram's source, TTL and TOS."""

    def __init__(self, t):
        self.port = next(_ports)
        self.sock = socket_in(t.net.netns("rx"), socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.IPPROTO_IP, IP_RECVTTL, 1)
        self.sock.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
        self.sock.bind(("0.0.0.0", self.port))
        self.sock.settimeout(3)

    def get(self, timeout=3.0):
        self.sock.settimeout(timeout)
        try:
            data, anc, _, addr = self.sock.recvmsg(65535, 256)
        except socket.timeout:
            return None
        info = {"data": data, "src": addr[0]}
        for level, kind, value in anc:
            if level == socket.IPPROTO_IP and kind == IP_TTL:
                info["ttl"] = struct.unpack("i", value[:4])[0]
            if level == socket.IPPROTO_IP and kind == IP_TOS:
                info["tos"] = value[0]
        return info

    def close(self):
        self.sock.close()


@pytest.fixture
def listener(r):
    lst = Listener(r)
    yield lst
    lst.close()


def record(t, port, ttl, tos=0):
    data = os.urandom(12)
    udp = UDP(sport=4321, dport=port) / data
    # the UDP checksum over the original pseudo-header (s1 -> rx), as the sender computed it
    from scapy.layers.inet import IP
    udp = bytes(IP(src=t.S1, dst=t.RX, proto=17) / udp)[20:]
    return EncapsulatedPkt(src=t.S1, ttl=ttl, proto=17, tos=tos, data=udp), data


def send(t, records, initial_ttl, ttl):
    t.s1.send(mplex_datagram(records, group=1, src=t.S1, dst=t.RX, initial_ttl=initial_ttl,
                             ttl=ttl, max_local_delay=1000, max_total_delay=5000))


@pytest.mark.spec("2.8-6")
def test_a_join_for_a_group_without_a_spec_gets_no_spec_from_r(r):
    g = fresh_group()
    r.s1.send(r.join_msg(g))
    err = r.child_csp(g, 8)
    assert err is not None, "R did not answer a JOIN for a group it has no spec for"
    e = decode(err)
    assert e[CSP_Error].error_code == 1 and e.src == r.RX


@pytest.mark.spec("2.9-7")
def test_r_signs_the_spec_it_offers_in_its_join_ack(r):
    import hashlib
    from concast.scapy import CSP_JoinAck
    from signing import verifies
    r.s1.send(r.join_msg(1))                       # group 1: the multiplex spec is installed
    got = r.child_csp(1, 2)
    assert got is not None, "R did not JOIN_ACK a JOIN for a group it has a spec for"
    a = decode(got)[CSP_JoinAck]
    assert a.spec_hash == hashlib.sha256(MPLEX_SPEC.read_bytes()).digest()
    assert a.spec_key is not None and a.signature is not None, "R's JOIN_ACK is not signed"
    assert verifies(a.spec_key, a.signature, r.RX, 1, a.spec_size, a.spec_hash), \
        "R's signature does not verify over (R, G, size, hash)"


@pytest.mark.spec("3.3-3")
def test_a_record_is_rebuilt_with_its_source_tos_and_payload(r, listener):
    rec, data = record(r, listener.port, ttl=30, tos=0xB8)
    send(r, [rec], initial_ttl=64, ttl=64)
    got = listener.get()
    assert got is not None, "the record was not delivered to a socket at R"
    assert got["data"] == data and got["src"] == r.S1
    assert got["tos"] == 0xB8


@pytest.mark.spec("3.3-1")
def test_a_records_ttl_is_lowered_by_the_hops_its_mplexpkt_travelled(r, listener):
    rec, data = record(r, listener.port, ttl=30)
    send(r, [rec], initial_ttl=64, ttl=64)         # r1 makes the outer TTL 63: one hop
    got = listener.get()
    assert got is not None and got["data"] == data
    assert got["ttl"] == 29


@pytest.mark.spec("3.3-1")
def test_a_record_is_not_aged_when_the_outer_ttl_is_not_below_initial_ttl(r, listener):
    rec, data = record(r, listener.port, ttl=30)
    send(r, [rec], initial_ttl=10, ttl=64)         # arrives with 63, above 10: raised
    got = listener.get()
    assert got is not None and got["data"] == data
    assert got["ttl"] == 30


@pytest.mark.spec("3.3-2")
def test_a_record_whose_ttl_runs_out_is_dropped_and_the_others_delivered(r, listener):
    dead, dead_data = record(r, listener.port, ttl=3)
    live, live_data = record(r, listener.port, ttl=30)
    send(r, [dead, live], initial_ttl=64, ttl=61)   # arrives with 60: 4 hops
    got = [listener.get(), listener.get(timeout=1.0)]
    datas = [g["data"] for g in got if g]
    assert live_data in datas, "the live record was not delivered"
    assert dead_data not in datas, "a record with TTL 3 that travelled 4 hops was delivered"
