"""p4src/concast.p4 on the real BMv2 (simple_switch_grpc), one test per behaviour.

The router (conftest.py): port 1 -> h1 (10.1.0.0/16), port 2 -> h2 (10.2.0.0/16, with
10.2.5.0/24 on port 3), port 3 -> h3 (10.3.0.0/16, 10.0.9.0/24 = the vectors' R), CPU port
255 -> rd. Own addresses 10.0.0.1 (router ID) and 10.{1,2,3}.0.1 are diverted; CSP is
diverted; concast flows only with a concast_flows entry. docs/dataplane-bmv2.md.
"""
from __future__ import annotations

import struct

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.utils import checksum

import concast.vectors as V
from concast.controller.p4 import pipeline as P
from concast.scapy import CSP, CSP_Join, IPOption_Concast, classify, concast_option, csp_datagram

from .conftest import HOST_MAC, ROUTER_MAC

pytestmark = pytest.mark.p4

SRC = "10.1.0.2"
DST = "10.2.0.2"
GROUP = 7
CONCAST = bytes([0x9E, 6]) + struct.pack("!I", GROUP)
RA = bytes([0x94, 4, 0, 0])
NOP = b"\x01"


def ipv4(options: bytes = b"", *, src=SRC, dst=DST, ttl=64, proto=17,
         payload: bytes | None = None) -> bytes:
    """An IPv4 datagram with exactly these option bytes and a correct header checksum."""
    assert len(options) % 4 == 0 and len(options) <= 40
    if payload is None:
        payload = bytes(UDP(sport=4000, dport=5000) / b"concast p4 test")
    ip = IP(src=src, dst=dst, ttl=ttl, proto=proto, ihl=5 + len(options) // 4,
            len=20 + len(options) + len(payload), chksum=0)
    raw = bytearray(bytes(ip)[:20] + options + payload)
    raw[10:12] = struct.pack("!H", checksum(bytes(raw[:20 + len(options)])))
    return bytes(raw)


def frame(datagram: bytes, src_mac: str = HOST_MAC["h1"]) -> bytes:
    return bytes(Ether(dst=ROUTER_MAC, src=src_mac, type=0x0800)) + datagram


def header_ok(datagram: bytes) -> bool:
    ihl = (datagram[0] & 0x0F) * 4
    return checksum(datagram[:ihl]) == 0


def only(got: dict, name: str) -> bytes:
    """The one frame that came out, which must be on `name`."""
    out = {k: v for k, v in got.items() if v}
    assert list(out) == [name] and len(out[name]) == 1, f"expected one frame on {name}, got {out}"
    return out[name][0]


def delta(before: dict, after: dict) -> dict:
    """after - before, nested, dropping zeros."""
    out = {}
    for k, v in after.items():
        if isinstance(v, dict):
            d = delta(before[k], v)
            if d:
                out[k] = d
        elif v != before[k]:
            out[k] = v - before[k]
    return out


def assert_forwarded(sent: bytes, out_frame: bytes, dst_mac: str):
    """Forwarded: MACs rewritten, TTL - 1, checksum right, everything else unchanged."""
    eth = Ether(out_frame)
    assert eth.src == ROUTER_MAC and eth.dst == dst_mac
    got = out_frame[14:14 + len(sent)]
    assert got[8] == sent[8] - 1, "TTL decremented once"
    assert header_ok(got), "header checksum correct"
    assert got[:8] == sent[:8] and got[9:10] == sent[9:10] and got[12:] == sent[12:], \
        "nothing but TTL and checksum changed (options included)"


# -- forwarding --------------------------------------------------------------------------

OPTION_AREAS = {
    "none": b"",
    "8_bytes": RA + NOP * 3 + b"\x00",
    "40_bytes": RA + bytes([0x44, 8, 5, 0]) + bytes(4) + NOP * 4 + bytes([0x88, 4, 0, 1])
                + bytes([0x07, 19, 4]) + bytes(16) + b"\x00",
}


@pytest.mark.parametrize("area", list(OPTION_AREAS), ids=list(OPTION_AREAS))
def test_lpm_forwarding_ttl_and_checksum(bmv2, area):
    opts = OPTION_AREAS[area]
    assert len(opts) in (0, 8, 40)
    for ttl in (64, 2, 255):
        sent = ipv4(opts, ttl=ttl)
        before = bmv2.counters()
        got = bmv2.exchange("h1", frame(sent))
        assert_forwarded(sent, only(got, "h2"), HOST_MAC["h2"])
        assert delta(before, bmv2.counters()) == {"forwarded": 1}


def spoiled(datagram: bytes, byte: int) -> bytes:
    """`datagram` with one byte of its header (options area included) changed and the
    checksum left as it was: a header checksum that no longer verifies."""
    raw = bytearray(datagram)
    raw[byte] ^= 0x01
    assert not header_ok(bytes(raw))
    return bytes(raw)


# (options area, byte flipped): every part of the header the checksum covers; none of
# these flips makes the options area malformed, so only the checksum can catch them.
SPOILED = {
    "checksum_field": (b"", 10),
    "fixed_header": (b"", 1),
    "router_alert_value": (RA + NOP * 3 + b"\x00", 22),
    "last_option_byte": (OPTION_AREAS["40_bytes"], 58),
    "padding_after_eol": (RA + b"\x00" + bytes(3), 26),
}


@pytest.mark.parametrize("case", list(SPOILED))
def test_bad_header_checksum_dropped_and_counted(bmv2, case):
    """RFC 1812 5.2.2, protocol.md 1.2-13: the checksum is checked over the options too,
    padding after an EOL included (the walk does not step over it)."""
    area, byte = SPOILED[case]
    sent = spoiled(ipv4(area), byte)
    assert classify(sent).kind != "malformed", classify(sent)
    before = bmv2.counters()
    got = bmv2.exchange("h1", frame(sent))
    assert not any(got.values()), "a datagram whose header checksum fails was forwarded"
    assert delta(before, bmv2.counters()) == {"dropped": {"bad_checksum": 1}}


def test_bad_checksum_on_a_concast_datagram_is_not_diverted(bmv2, flow):
    before = bmv2.counters()
    got = bmv2.exchange("h1", frame(spoiled(ipv4(CONCAST + b"\x00\x00"), 22)))
    assert not any(got.values())
    assert delta(before, bmv2.counters()) == {"dropped": {"bad_checksum": 1}}


def test_longest_prefix_wins(bmv2):
    sent = ipv4(dst="10.2.5.9")
    got = bmv2.exchange("h1", frame(sent))
    assert_forwarded(sent, only(got, "h3"), HOST_MAC["h3"])


def test_ttl_1_dropped(bmv2):
    before = bmv2.counters()
    got = bmv2.exchange("h1", frame(ipv4(ttl=1)))
    assert not any(got.values())
    assert delta(before, bmv2.counters()) == {"dropped": {"ttl": 1}}


def test_no_route_dropped(bmv2):
    before = bmv2.counters()
    got = bmv2.exchange("h1", frame(ipv4(dst="192.0.2.1")))
    assert not any(got.values())
    assert delta(before, bmv2.counters()) == {"dropped": {"no_route": 1}}


def test_arp_answered_for_port_address(bmv2):
    req = Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_MAC["h1"]) / ARP(
        op=1, hwsrc=HOST_MAC["h1"], psrc=SRC, pdst="10.1.0.1")
    reply = Ether(only(bmv2.exchange("h1", bytes(req)), "h1"))
    assert reply[ARP].op == 2 and reply[ARP].hwsrc == ROUTER_MAC and reply[ARP].psrc == "10.1.0.1"
    assert reply[ARP].pdst == SRC and reply[ARP].hwdst == HOST_MAC["h1"]
    assert reply.dst == HOST_MAC["h1"] and reply.src == ROUTER_MAC
    # an address of another port is not answered on this one
    req[ARP].pdst = "10.2.0.1"
    assert not any(bmv2.exchange("h1", bytes(req)).values())


# -- the options walk: Concast ID option anywhere -------------------------------------------

CONCAST_AREAS = {
    "first": CONCAST + b"\x00\x00",
    "after_nop": NOP + CONCAST + b"\x00",
    "after_router_alert": RA + CONCAST + NOP * 2,
    "after_other_option": bytes([0x44, 8, 5, 0]) + bytes(4) + CONCAST + NOP * 2,
    "end_of_40_bytes": RA + bytes([0x07, 27, 4]) + bytes(24) + NOP * 3 + CONCAST,
}


@pytest.fixture
def flow(bmv2):
    bmv2.router.add_flow(DST, GROUP)
    try:
        yield
    finally:
        bmv2.router.remove_flow(DST, GROUP)


@pytest.mark.parametrize("where", list(CONCAST_AREAS), ids=list(CONCAST_AREAS))
def test_concast_option_found(bmv2, flow, where):
    opts = CONCAST_AREAS[where]
    sent = ipv4(opts)
    assert classify(sent).kind == "concast" and classify(sent).group == GROUP
    before = bmv2.counters()
    out = only(bmv2.exchange("h1", frame(sent)), "rd")
    assert out == frame(sent), "diverted as it arrived: no TTL decrement, MACs unchanged"
    assert delta(before, bmv2.counters()) == {"diverted": {"concast": 1}}


def test_concast_option_after_eol_is_not_concast(bmv2, flow):
    sent = ipv4(NOP + b"\x00" + CONCAST)
    assert classify(sent).kind != "concast"
    got = bmv2.exchange("h1", frame(sent))
    assert_forwarded(sent, only(got, "h2"), HOST_MAC["h2"])


def test_concast_diverted_only_with_flow_entry(bmv2):
    sent = bytes(IP(src=SRC, dst=DST, options=[IPOption_Concast(group=GROUP)])
                 / UDP(sport=4000, dport=5000) / b"merge me")
    assert concast_option(IP(sent)).group == GROUP and header_ok(sent)
    # no entry: an ordinary datagram
    assert_forwarded(sent, only(bmv2.exchange("h1", frame(sent)), "h2"), HOST_MAC["h2"])
    bmv2.router.add_flow(DST, GROUP)
    try:
        assert only(bmv2.exchange("h1", frame(sent)), "rd") == frame(sent)
        # same R, other G; and same G, other R: not this flow
        other_g = bytes(IP(src=SRC, dst=DST, options=[IPOption_Concast(group=GROUP + 1)]) / UDP() / b"x")
        only(bmv2.exchange("h1", frame(other_g)), "h2")
        other_r = bytes(IP(src=SRC, dst="10.2.0.3", options=[IPOption_Concast(group=GROUP)]) / UDP() / b"x")
        only(bmv2.exchange("h1", frame(other_r)), "h2")
        # the same R and G without the option: not concast
        only(bmv2.exchange("h1", frame(ipv4())), "h2")
    finally:
        bmv2.router.remove_flow(DST, GROUP)
    only(bmv2.exchange("h1", frame(sent)), "h2")


# -- malformed option lists --------------------------------------------------------------

DATA_PLANE_ERRORS = set(P.MALFORMED_INDEX)
MALFORMED = [v for v in V.load(valid=False) if v["error"] in DATA_PLANE_ERRORS]


def test_every_data_plane_error_has_a_vector():
    option_errors = {"option_truncated", "option_bad_length", "option_overflow",
                     "concast_option_bad_length", "concast_option_duplicate"}
    assert option_errors <= {v["error"] for v in MALFORMED}


@pytest.mark.parametrize("vec", MALFORMED, ids=V.ids(MALFORMED))
def test_malformed_vector_dropped_and_counted(bmv2, vec):
    before = bmv2.counters()
    got = bmv2.exchange("h1", frame(vec["raw"]))
    assert not any(got.values()), f"{vec['name']} came out: {got}"
    assert delta(before, bmv2.counters()) == {"malformed": {vec["error"]: 1}}


def test_valid_vectors_not_counted_as_malformed(bmv2):
    for vec in V.load(valid=True):
        before = bmv2.counters()["malformed"]
        bmv2.exchange("h1", frame(vec["raw"]), wait=0.2)
        assert bmv2.counters()["malformed"] == before, vec["name"]


# -- diversion and re-injection ------------------------------------------------------------

def test_csp_diverted(bmv2):
    join = CSP(type=1, group=GROUP, receiver=DST, seq=1) / CSP_Join(hold_time=30)
    sent = bytes(csp_datagram(join, src=SRC, dst=DST))
    assert classify(sent).kind == "csp"
    before = bmv2.counters()
    out = only(bmv2.exchange("h1", frame(sent)), "rd")
    assert out == frame(sent)
    assert delta(before, bmv2.counters()) == {"diverted": {"csp": 1}}


def test_own_address_diverted(bmv2):
    sent = ipv4(dst="10.0.0.1")
    before = bmv2.counters()
    assert only(bmv2.exchange("h1", frame(sent)), "rd") == frame(sent)
    assert delta(before, bmv2.counters()) == {"diverted": {"own_address": 1}}


def test_reinjected_forwarded_not_diverted_again(bmv2, flow):
    cpu_mac = HOST_MAC["rd"]
    csp = bytes(csp_datagram(CSP(type=4, group=GROUP, receiver=DST, seq=2) / b"",
                             src="10.0.0.1", dst=DST))
    for sent in (ipv4(CONCAST + b"\x00\x00"), csp):
        before = bmv2.counters()
        got = bmv2.exchange("rd", frame(sent, src_mac=cpu_mac))
        assert_forwarded(sent, only(got, "h2"), HOST_MAC["h2"])
        assert delta(before, bmv2.counters()) == {"reinjected": 1, "forwarded": 1}


def test_diversion_disabled_forwards_csp(bmv2):
    sent = bytes(csp_datagram(CSP(type=4, group=GROUP, receiver=DST, seq=3) / b"", src=SRC, dst=DST))
    bmv2.router.disable_diversion()
    try:
        assert_forwarded(sent, only(bmv2.exchange("h1", frame(sent)), "h2"), HOST_MAC["h2"])
    finally:
        bmv2.router.enable_diversion()
    only(bmv2.exchange("h1", frame(sent)), "rd")


def test_every_frame_is_counted_received_once_on_its_port(bmv2, flow):
    """`received` counts each frame the parser hands to ingress, by its port, whatever the
    verdict: forwarded, malformed, diverted, re-injected from the CPU port, an ARP request."""
    bad_option = ipv4(bytes([0x9E, 4, 0, 0]))                # concast_option_bad_length
    arp = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_MAC["h1"]) /
                ARP(op=1, hwsrc=HOST_MAC["h1"], psrc=SRC, pdst="10.1.0.99"))   # no answer
    sends = [("h1", frame(ipv4())), ("h1", frame(bad_option)), ("h2", frame(ipv4(CONCAST + b"\x00\x00"),
                                                                          src_mac=HOST_MAC["h2"])),
             ("h1", arp), ("rd", frame(ipv4(), src_mac=HOST_MAC["rd"]))]
    ports = {"h1": "1", "h2": "2", "rd": str(P.CPU_PORT)}
    for name, raw in sends:
        before = bmv2.router.received()
        bmv2.exchange(name, raw)
        after = bmv2.router.received()
        grew = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
        assert grew == {ports[name]: 1}, (name, grew)


# -- the run-time command line (what routerd can call) ----------------------------------------

def test_flow_command_line_as_second_controller(bmv2, tmp_path):
    import subprocess
    import sys
    p4info = tmp_path / "p4info.txt"
    from google.protobuf import text_format
    p4info.write_text(text_format.MessageToString(bmv2.client.p4info.msg))
    base = [sys.executable, "-m", "concast.controller.p4", "--switch", bmv2.switch.address,
            "--p4info", str(p4info)]

    def cli(*args):
        r = subprocess.run([*base, *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout

    sent = ipv4(CONCAST + b"\x00\x00")
    cli("flow", "add", DST, str(GROUP))
    try:
        assert cli("flow", "list").split() == [DST, str(GROUP)]
        assert only(bmv2.exchange("h1", frame(sent)), "rd") == frame(sent)
        assert '"concast"' in cli("counters")
    finally:
        cli("flow", "del", DST, str(GROUP))
    assert cli("flow", "list").strip() == ""
    only(bmv2.exchange("h1", frame(sent)), "h2")
    # the control plane's own connection (ELECTION_CONTROL) is primary again and can write
    bmv2.router.add_flow(DST, GROUP)
    bmv2.router.remove_flow(DST, GROUP)


# -- arbitration (docs/dataplane-bmv2.md "Arbitration") ------------------------------------------

def test_a_second_client_taking_primary_mid_flow_fails_routerds_writes_until_it_leaves(
        bmv2, tmp_path):
    """A user's client at a small default election id (finsy's 10) leaves routerd's writes
    alone; one that takes primary above concast's ids makes them fail, saying so (routerd
    then shows divert_failed and retries), while a backup reader still reads; when it
    leaves, the next write goes through."""
    import subprocess
    import sys
    from google.protobuf import text_format
    from concast.controller.p4.p4rt import (ELECTION_CONCAST_BASE, NotPrimaryError,
                                            P4RuntimeClient)
    p4info = tmp_path / "p4info.txt"
    p4info.write_text(text_format.MessageToString(bmv2.client.p4info.msg))
    base = [sys.executable, "-m", "concast.controller.p4", "--switch", bmv2.switch.address,
            "--p4info", str(p4info)]

    def cli(*args):
        return subprocess.run([*base, *args], capture_output=True, text=True, timeout=30)

    sent = ipv4(CONCAST + b"\x00\x00")
    with pytest.raises(NotPrimaryError):
        P4RuntimeClient(bmv2.switch.address, election_id=10)      # concast outranks it
    user = P4RuntimeClient(bmv2.switch.address, election_id=11, backup=True)
    try:
        r = cli("divert", DST, str(GROUP))
        assert r.returncode == 0, r.stderr
        assert only(bmv2.exchange("h1", frame(sent)), "rd") == frame(sent)
    finally:
        user.close()
    boss = P4RuntimeClient(bmv2.switch.address, election_id=4 * ELECTION_CONCAST_BASE)
    try:
        assert boss.primary
        r = cli("undivert", DST, str(GROUP))
        assert r.returncode == 1 and "not primary" in r.stderr and "Traceback" not in r.stderr
        assert cli("flow", "list").stdout.split() == [DST, str(GROUP)], "a backup reads"
        assert only(bmv2.exchange("h1", frame(sent)), "rd") == frame(sent), "entry still there"
    finally:
        boss.close()
    r = cli("undivert", DST, str(GROUP))
    assert r.returncode == 0, r.stderr
    only(bmv2.exchange("h1", frame(sent)), "h2")
    bmv2.router.add_flow(DST, GROUP)          # the control plane is primary again
    bmv2.router.remove_flow(DST, GROUP)
