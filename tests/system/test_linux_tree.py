"""tree(levels=2, senders=8) on the Linux data plane: kernel forwarding (TTL, IPv4 options,
TCP, ARP), and tc diversion to the CPU port (selectors, CSP, own addresses), re-injection
without a second diversion, and what happens to a header with a wrong checksum."""
from __future__ import annotations

import socket
import struct
import sys
from pathlib import Path

import pytest
from systools import (concast_option, datagram_whose_ttl_runs_out_is_dropped, ip_checksum_ok,
                      ip_datagram, options_of, routers_answer_arp_for_their_port_addresses,
                      send_raw, tcp_transfer, udp_datagrams)

from concast.controller.linux import tc
from concast.controller.linux.router import GONE, run_tc_batch
from concast.controller.routes import router_hops
from concast.inet import checksum
from concast.topologies import tree
from concast.topologies.capture import Capture

pytestmark = pytest.mark.mininet
SENDERS = [f"s{i}" for i in range(1, 9)]
FRAMESEND = Path(__file__).parent / "framesend.py"
RA = "94040000"                     # Router Alert, as CSP carries it


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    n = tree(levels=2, fanout=2, senders=8, dataplane="linux").start(
        run_dir=tmp_path_factory.mktemp("linux-tree"))
    try:
        yield n
    finally:
        n.stop()


def node(net, router: str):
    """The Mininet node (shell) of a router's namespace."""
    return net.mn[net[router].node]


def cpu_capture(net, router: str, name: str, bpf: str = "") -> Capture:
    """tcpdump on the CPU port's routerd end, inside the router's namespace."""
    path = net.run_dir / "pcap" / f"{name}.pcap"
    return Capture(node(net, router), net[router].cpu_iface, path, bpf)


def frame(net, src: str, dst: str, proto: int, payload: bytes, options: str = "",
          ttl: int = 64, bad_checksum: bool = False) -> bytes:
    """An Ethernet frame from host `src` to its gateway carrying an IPv4 datagram."""
    h = net.plan.hosts[src]
    opts = bytes.fromhex(options)
    ihl = 5 + len(opts) // 4
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, ihl * 4 + len(payload), 7, 0, ttl,
                      proto, 0, socket.inet_aton(str(h.ip)), socket.inet_aton(net.ip(dst)))
    hdr += opts
    csum = checksum(hdr) ^ (0x5555 if bad_checksum else 0)
    hdr = hdr[:10] + struct.pack("!H", csum) + hdr[12:]
    mac = lambda m: bytes.fromhex(m.replace(":", ""))  # noqa: E731
    return mac(h.gateway_mac) + mac(h.mac) + b"\x08\x00" + hdr + payload


def udp(dport: int, data: bytes = b"linux") -> bytes:
    return struct.pack("!HHHH", 4000, dport, 8 + len(data), 0) + data


def send_frame(shell, iface: str, f: bytes) -> None:
    out = shell.cmd(f"{sys.executable} {FRAMESEND} --iface {iface} --frame {f.hex()}")
    assert "sent" in out, out


def test_every_sender_reaches_the_receiver_ttl_drops_once_per_router(net):
    hops = router_hops(net.plan, "s1", "rx")
    for s in SENDERS:
        r = net.ping(s, "rx")
        assert r.ok and r.ttl == 64 - hops, f"{s}: {r}"


def test_ipv4_options_cross_the_kernel_routers_intact(net):
    variants = {
        5001: concast_option(7),
        5002: "01" + RA + concast_option(0xDEADBEEF) + "000000",   # NOP, Router Alert, option
        5003: "9e06" + "00000001" + "01" + "00" * 33,                # 40 bytes of options
    }
    payload = b"concast options".hex()
    with net.capture("rx", "udp", name="options") as cap:
        for port, opts in variants.items():
            send_raw(net["s3"], net.ip("rx"), options=opts, dport=port, payload=payload)
        net.ping("s3", "rx")
    pkts = cap.packets()
    for port, opts in variants.items():
        got = udp_datagrams(pkts, port)
        assert len(got) == 1, f"datagram to port {port} not delivered"
        ip = got[0]
        assert options_of(ip) == bytes.fromhex(opts)
        assert ip[8] == 62
        assert ip_checksum_ok(ip[:(ip[0] & 0xF) * 4])


def test_tcp_through_two_kernel_routers(net):
    assert tcp_transfer(net, "s8", "rx", 2_000_000)


def test_a_datagram_whose_ttl_runs_out_is_dropped(net):
    datagram_whose_ttl_runs_out_is_dropped(net)


def test_routers_answer_arp_for_their_port_addresses(net):
    routers_answer_arp_for_their_port_addresses(net)


def test_counters_and_static_rules(net):
    assert net.ping("rx", "s1").ok
    r1 = net.counters()["r1"]
    assert r1["ports"][str(net["r1"].port_to("rx"))]["tx_pkts"] >= 1
    rules = {(f["pref"], f["dst"], f["proto"]) for f in r1["flows"]}
    own = {(10, str(a), 0) for a in net["r1"].plan.own_addresses()}
    assert rules == own | {(20, None, 253)}, rules


def test_a_selector_diverts_only_its_datagrams_unchanged_and_reinjection_is_not_diverted(net):
    r2, rx = net["r2"], net.ip("rx")
    r2.add_selector(rx, 17, 6000)
    opts = concast_option(9)
    try:
        with cpu_capture(net, "r2", "sel-r2", "udp") as cpu, \
                net.capture("rx", "udp", name="sel-rx") as at_rx:
            send_raw(net["s1"], rx, options=opts, dport=6000, payload="aa")   # s1 is behind r2
            send_raw(net["s1"], rx, options=opts, dport=6001, payload="bb")
            net.ping("s1", "rx")
        diverted = udp_datagrams(cpu.packets(), 6000)
        assert len(diverted) == 1 and udp_datagrams(cpu.packets(), 6001) == []
        ip = diverted[0]
        assert ip[8] == 64 and options_of(ip) == bytes.fromhex(opts), "diverted as it arrived"
        assert udp_datagrams(at_rx.packets(), 6000) == [], "nobody wrote it back"
        assert len(udp_datagrams(at_rx.packets(), 6001)) == 1
        rule = next(f for f in r2.flows() if f["pref"] == 30)
        assert (rule["dst"], rule["proto"], rule["dport"], rule["n_packets"]) == (rx, 17, 6000, 1)

        # Written back into the CPU port as routerd does: forwarded, TTL once per router,
        # and not diverted again although it matches the selector.
        raw = bytes(cpu.packets()[0].original)
        mac = lambda m: bytes.fromhex(m.replace(":", ""))  # noqa: E731
        back = mac(r2.mac) + mac(r2.plan.cpu_routerd_mac) + raw[12:]
        with net.capture("rx", "udp port 6000", name="reinjected") as at_rx:
            send_frame(node(net, "r2"), r2.cpu_iface, back)
            net.ping("s1", "rx")
        got = udp_datagrams(at_rx.packets(), 6000)
        assert [g[8] for g in got] == [62] and options_of(got[0]) == bytes.fromhex(opts)
        assert next(f for f in r2.flows() if f["pref"] == 30)["n_packets"] == 1
    finally:
        r2.remove_selector(rx, 17, 6000)
    assert r2.selectors() == []


def test_csp_goes_to_the_first_capable_router_and_past_it_when_diversion_is_off(net):
    csp = frame(net, "s1", "rx", 253, b"\x01\x01\x00\x10" + b"\0" * 12, options=RA)
    with cpu_capture(net, "r2", "csp-r2", "ip proto 253") as c2, \
            cpu_capture(net, "r1", "csp-r1", "ip proto 253") as c1:
        send_frame(net["s1"], "s1-eth0", csp)
        net.ping("s1", "rx")
    assert (len(c2.packets()), len(c1.packets())) == (1, 0)
    net["r2"].disable_diversion()
    net["r2"].disable_diversion()        # idempotent: tc's "not found" for each rule is fine
    try:
        assert net["r2"].flows() == []
        with pytest.raises(RuntimeError, match="bogus"):    # any other tc error is not
            run_tc_batch(net["r2"].netns, [" ".join(tc.delete_argv(tc.PREF_CSP)), "filter bogus"],
                         ok_errors=GONE)
        with cpu_capture(net, "r1", "csp-r1-off", "ip proto 253") as c1:
            send_frame(net["s1"], "s1-eth0", csp)
            net.ping("s1", "rx")
        got = [ip_datagram(bytes(p.original)) for p in c1.packets()]
        assert len(got) == 1 and got[0][8] == 63, "r2 forwarded it, TTL once"
    finally:
        net["r2"].enable_diversion()


def test_datagrams_to_a_router_address_go_to_its_cpu_port(net):
    with cpu_capture(net, "r2", "own-r2", "icmp") as cpu:
        assert not net.ping("s1", "r2", timeout=1).ok, "routerd is not running: no answer"
    assert len(cpu.packets()) == 1


def ip_stat(net, router: str, name: str) -> int:
    lines = node(net, router).cmd("cat /proc/net/snmp").splitlines()
    head, values = [ln.split() for ln in lines if ln.startswith("Ip:")][:2]
    return int(values[head.index(name)])


def test_a_wrong_header_checksum_is_diverted_by_tc_but_dropped_by_the_kernel(net):
    """tc's ingress runs before Linux's IP input: a CSP datagram with a wrong checksum still
    reaches the CPU port (routerd counts and drops it: bad_header_checksum), while a
    forwarded one is dropped by the kernel (InHdrErrors)."""
    bad_csp = frame(net, "s1", "rx", 253, b"\x01\x01\x00\x10" + b"\0" * 12, options=RA,
                    bad_checksum=True)
    bad_udp = frame(net, "s1", "rx", 17, udp(6100), bad_checksum=True)
    errors = ip_stat(net, "r2", "InHdrErrors")
    with cpu_capture(net, "r2", "badsum-r2", "ip proto 253") as cpu, \
            net.capture("rx", "udp port 6100", name="badsum-rx") as at_rx:
        send_frame(net["s1"], "s1-eth0", bad_csp)
        send_frame(net["s1"], "s1-eth0", bad_udp)
        net.ping("s1", "rx")
    got = [ip_datagram(bytes(p.original)) for p in cpu.packets()]
    assert len(got) == 1 and not ip_checksum_ok(got[0][:24])
    assert at_rx.packets() == []
    assert ip_stat(net, "r2", "InHdrErrors") == errors + 1
