"""What the router under test does with a spec it cannot use, the answers it owes its
children, the JOIN's S flag, and fragments of CSP (protocol.md 1.2-11, 2.6-4, 2.7-4,
2.7-14 to 2.7-16, 2.8-14 to 2.8-15, 2.9-16, 3.4-2). s1 is the joining child, rx plays R and
signs what it offers (signing.py)."""
import hashlib
import time

import pytest
from scapy.layers.inet import IP

from concast.scapy import (CSP, CSP_Error, CSP_Join, CSP_JoinAck, CSP_Refresh,
                           CSP_SpecRequest, CSP_SpecUpdate, csp_datagram)
from conform_target import HOLD_S, decode, fresh_group, is_csp
from crafting import with_options

pytestmark = pytest.mark.mininet
QUIET = 1.5
UNSIGNED_ACK_BODY, SIGNED_ACK_BODY = 40, 136


def junk(tag: bytes) -> bytes:
    """Bytes R signs that are no WebAssembly module (no magic), two chunks long."""
    return (b"not a merge spec " + tag) * 80


def serve_until(t, group: int, spec: bytes, done, wait: float = 10.0) -> list[int]:
    """Serve `spec`'s chunks as R until `done()` is true; returns the sequence numbers of the
    SPEC_CHUNKs served, in order."""
    served = []
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        for d in t.rx.datagrams(0.2):
            if is_csp(d, group, 5):
                req = decode(d)
                t.serve_chunk(req, spec)
                served.append(req[CSP].seq)
        if done():
            break
    return served


def errors_to_r(t, group: int, code: int) -> list:
    """ERRORs of `code` about (rx, group) addressed to rx so far in this test (read from the
    test's frame log, so a helper that consumed them does not hide them)."""
    from scapy.layers.l2 import Ether
    out = []
    for _, frame in t.rx.log.frames:
        ip = bytes(Ether(frame).payload)
        if is_csp(ip, group, 8) and IP(ip).dst == t.RX \
                and decode(ip)[CSP_Error].error_code == code:
            out.append(decode(ip))
    return out


@pytest.mark.spec("2.7-4", "2.6-4", "2.6-5", "2.6-6", "2.6-7", "2.7-15")
def test_an_update_to_bytes_that_are_no_module_is_rejected_and_not_passed_on(wire):
    g = fresh_group()
    wire.activate(g)
    bad = junk(b"u")
    h = hashlib.sha256(bad).digest()
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=91)
                              / CSP_SpecUpdate(spec_size=len(bad), spec_hash=h,
                                               **wire.signed(g, len(bad), h)),
                              src=wire.RX, dst=wire.router_id, ttl=64))
    got = []

    def answered():
        got.extend(d for d in wire.rx.datagrams(0.05) if is_csp(d, g, 8))
        return bool(got)
    served = serve_until(wire, g, bad, answered)
    assert served, "the router did not fetch the updated spec"
    assert got, "no ERROR to R for a signed spec whose bytes are no module"
    e = decode(got[0])
    assert e[CSP_Error].error_code == 2, \
        f"answered with code {e[CSP_Error].error_code}, not SPEC_REJECTED (2.7-4)"
    assert e[CSP_Error].offending_type == 6 and e[CSP].seq == served[-1], \
        "SPEC_REJECTED does not answer the SPEC_CHUNK that completed the transfer (2.7-15)"
    for d in wire.s1.datagrams(QUIET):
        assert not is_csp(d, g, 7), "the router passed on an update it could not use (2.6-4)"
        assert not (is_csp(d, g, 8) and decode(d)[CSP_Error].error_code == 6), \
            "the child was sent FLOW_QUARANTINED for a spec the router refused"
    # The flow keeps the spec it had: a new JOIN is answered with it.
    wire.s1.send(wire.join_msg(g))
    ack = wire.child_csp(g, 2)
    assert ack is not None and decode(ack)[CSP_JoinAck].spec_hash == wire.spec_hash, \
        "the flow lost the spec it had (2.6-6)"
    # Offered again: refused at once, answering the offer, and not fetched again (2.6-7).
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=92)
                              / CSP_SpecUpdate(spec_size=len(bad), spec_hash=h,
                                               **wire.signed(g, len(bad), h)),
                              src=wire.RX, dst=wire.router_id, ttl=64))
    again = None
    for d in wire.rx.datagrams(QUIET):
        assert not (is_csp(d, g, 5) and decode(d)[CSP_SpecRequest].spec_hash == h), \
            "the router fetched again bytes it had refused (2.6-7)"
        if is_csp(d, g, 8) and again is None:
            again = decode(d)
    assert again is not None and again[CSP_Error].error_code == 2 \
        and (again[CSP].seq, again[CSP_Error].offending_type) == (92, 7), \
        "the second offer of refused bytes was not answered with SPEC_REJECTED (2.6-7)"


@pytest.mark.spec("2.8-15", "2.7-16", "2.7-4")
def test_a_first_spec_that_is_no_module_answers_the_pending_child_with_flow_quarantined(wire):
    g = fresh_group()
    bad = junk(b"f")
    h = hashlib.sha256(bad).digest()
    wire.s1.send(wire.join_msg(g, seq=0xF1A5))
    up = wire.upstream_csp(g, 1)
    assert up is not None, "the router sent no JOIN toward R (2.8-1)"
    join = decode(up)
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=join[CSP].seq)
                              / CSP_JoinAck(hold_time=HOLD_S, spec_size=len(bad), spec_hash=h,
                                            **wire.signed(g, len(bad), h)),
                              src=wire.RX, dst=join.src, ttl=64))
    child = []

    def told():
        child.extend(d for d in wire.s1.datagrams(0.05) if is_csp(d, g, 2) or is_csp(d, g, 8))
        return bool(child)
    serve_until(wire, g, bad, told)
    assert child, "the pending child got no answer when the first spec could not be used"
    first = decode(child[0])
    assert first[CSP].type == 8 and first[CSP_Error].error_code == 6, \
        "the pending child was not answered with FLOW_QUARANTINED (2.8-15)"
    assert first[CSP].seq == 0xF1A5 and first[CSP_Error].offending_type == 1, \
        "FLOW_QUARANTINED does not answer the child's JOIN (2.7-16)"
    assert wire.s1.first(lambda d: is_csp(d, g, 2), QUIET) is None, \
        "a JOIN_ACK followed FLOW_QUARANTINED"
    late = wire.rx.first(lambda d: is_csp(d, g, 8) and decode(d)[CSP_Error].error_code == 2, 3)
    assert errors_to_r(wire, g, 2) or late, "R was not sent SPEC_REJECTED for the bytes (2.7-4)"


@pytest.mark.spec("2.3-1", "2.8-15", "2.7-16")
def test_a_first_spec_of_size_0_answers_the_pending_child_with_flow_quarantined(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g, seq=0x5120))
    join = decode(wire.upstream_csp(g, 1))
    bogus = bytes([7]) * 32
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=join[CSP].seq)
                              / CSP_JoinAck(hold_time=HOLD_S, spec_size=0, spec_hash=bogus,
                                            **wire.signed(g, 0, bogus)),
                              src=wire.RX, dst=join.src, ttl=64))
    err = wire.child_csp(g, 8)
    assert err is not None, "the pending child was not answered"
    e = decode(err)
    assert (e[CSP_Error].error_code, e[CSP].seq, e[CSP_Error].offending_type) == (6, 0x5120, 1)
    assert wire.s1.first(lambda d: is_csp(d, g, 2), QUIET) is None


@pytest.mark.spec("2.7-17", "2.7-14")
def test_a_child_that_joined_by_refresh_gets_the_refreshs_number_echoed(wire):
    g = fresh_group()
    wire.activate(g)                       # the router holds the spec: no fetch below
    g2 = fresh_group()
    wire.s1.send(wire.join_msg(g2, seq=0xEF0E, body=CSP_Refresh(hold_time=HOLD_S,
                                                                 selector_proto=254,
                                                                 S=1)))
    up = wire.upstream_csp(g2, 1)
    assert up is not None, "a REFRESH for an unknown flow was not taken as a JOIN (2.8-2)"
    join = decode(up)
    wire.rx.send(csp_datagram(CSP(group=g2, receiver=wire.RX, seq=join[CSP].seq)
                              / CSP_JoinAck(hold_time=HOLD_S, spec_size=len(wire.spec),
                                            spec_hash=wire.spec_hash,
                                            **wire.signed(g2, len(wire.spec), wire.spec_hash)),
                              src=wire.RX, dst=join.src, ttl=64))
    ack = wire.child_csp(g2, 2, timeout=5)
    assert ack is not None, "the child that joined by REFRESH was not answered"
    assert decode(ack)[CSP].seq == 0xEF0E, "the JOIN_ACK does not copy the REFRESH's number"


@pytest.mark.spec("2.9-16", "2.9-15")
def test_a_joiner_without_the_s_flag_gets_the_unsigned_join_ack(wire):
    g = fresh_group()
    wire.activate(g)
    for flag, body_len in ((0, UNSIGNED_ACK_BODY), (1, SIGNED_ACK_BODY)):
        wire.s1.send(wire.join_msg(g, body=CSP_Join(hold_time=HOLD_S, selector_proto=254,
                                                    S=flag)))
        ack = wire.child_csp(g, 2)
        assert ack is not None, f"a JOIN with S = {flag} was not answered"
        assert decode(ack)[CSP].length == 16 + body_len, \
            f"JOIN with S = {flag}: a {decode(ack)[CSP].length - 16}-byte JOIN_ACK body, " \
            f"not {body_len}"


@pytest.mark.spec("2.9-16")
def test_a_child_without_the_s_flag_is_sent_the_unsigned_spec_update(wire):
    g = fresh_group()
    wire.activate(g)
    wire.s1.send(wire.join_msg(g, body=CSP_Refresh(hold_time=HOLD_S, selector_proto=254,
                                                   S=0)))
    new = wire.spec + bytes([0, 6, 4]) + b"conf" + b"s"
    h = hashlib.sha256(new).digest()
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=93)
                              / CSP_SpecUpdate(spec_size=len(new), spec_hash=h,
                                               **wire.signed(g, len(new), h)),
                              src=wire.RX, dst=wire.router_id, ttl=64))
    upd = []

    def passed_on():
        upd.extend(d for d in wire.s1.datagrams(0.05) if is_csp(d, g, 7))
        return bool(upd)
    serve_until(wire, g, new, passed_on)
    assert upd, "the child was not sent the SPEC_UPDATE"
    assert decode(upd[0])[CSP].length == 16 + 36, "a signed SPEC_UPDATE to a child without S"


@pytest.mark.spec("1.2-11", "1.2-9", "1.2-8")
def test_a_fragment_of_a_csp_join_is_forwarded_unchanged_and_not_taken(wire):
    g = fresh_group()
    frag = IP(bytes(wire.join_msg(g)))
    frag.flags = "MF"
    frag.id = 0x4C4C
    del frag.chksum
    wire.s1.send(frag)
    got = wire.rx.first(lambda d: IP(d).id == 0x4C4C, 5)
    assert got is not None, "a fragment of a CSP message was not forwarded"
    ip = IP(got)
    assert ip.src == wire.S1 and ip.flags.MF and bytes(ip)[20:] == bytes(frag)[20:], \
        "the fragment was rewritten"
    for d in wire.rx.datagrams(QUIET):
        assert not (is_csp(d, g, 1) and IP(d).src in wire.router_addresses), \
            "the router took a fragment as a JOIN"


@pytest.mark.spec("3.4-2")
def test_an_mplexpkt_carrying_another_option_is_forwarded_as_it_is(wire):
    import os
    from scapy.layers.inet import UDP
    from concast.scapy import EncapsulatedPkt, mplex_datagram
    g = fresh_group()
    wire.activate(g, proto=254)
    marker = os.urandom(8)
    rec = EncapsulatedPkt(src=wire.S1, ttl=40, proto=17, tos=0,
                          data=bytes(UDP(sport=23456, dport=9) / marker))
    dgram = mplex_datagram([rec], group=g, src=wire.S1, dst=wire.RX,
                           max_local_delay=300_000, max_total_delay=2_000_000)
    area = bytes([0x9E, 6]) + g.to_bytes(4, "big") + bytes([0x88, 4, 0x12, 0x34]) + bytes(2)
    wire.s1.send(with_options(dgram, area))
    got = wire.rx.first(lambda d: marker in d, 5)
    assert got is not None, "an MplexPkt with another option was not delivered"
    ip = IP(got)
    assert ip.src == wire.S1, "the router bundled an MplexPkt carrying another option"
    assert bytes(ip)[20:20 + len(area)] == area, "the options did not travel on"


@pytest.mark.spec("2.2-3")
def test_the_routers_own_join_sets_the_s_flag(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g, body=CSP_Join(hold_time=HOLD_S, selector_proto=254)))
    up = wire.upstream_csp(g, 1)
    assert up is not None, "the router sent no JOIN toward R (2.8-1)"
    assert decode(up)[CSP_Join].S, \
        "a router that passes signatures on does not say it reads them (S flag)"


@pytest.mark.spec("2.8-14", "2.7-16")
def test_flow_quarantined_answering_the_routers_join_is_passed_to_its_pending_child(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g, seq=0xC4C4))
    join = decode(wire.upstream_csp(g, 1))
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=join[CSP].seq)
                              / CSP_Error(error_code=6, offending_type=1, reason=b"upstream"),
                              src=wire.RX, dst=join.src, ttl=64))
    err = wire.child_csp(g, 8)
    assert err is not None, "the pending child was not told the flow is quarantined upstream"
    e = decode(err)
    assert (e[CSP_Error].error_code, e[CSP].seq, e[CSP_Error].offending_type) == (6, 0xC4C4, 1)
    assert wire.upstream_csp(g, 1, timeout=QUIET + 1) is None, \
        "the router went on retrying its JOIN after FLOW_QUARANTINED answered it"


@pytest.mark.spec("2.8-17")
def test_the_routers_unanswered_join_is_sent_again_with_its_number_waiting_longer(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g))
    seen = []

    def three(ds):
        if is_csp(ds[-1], g, 1):
            seen.append((time.monotonic(), decode(ds[-1])[CSP].seq))
        return len(seen) >= 3
    wire.rx.datagrams(8, until=three)
    assert len(seen) >= 3, f"{len(seen)} JOINs toward R in 8 s: the router did not retry"
    assert len({s for _, s in seen}) == 1, "a retried JOIN has a new sequence number"
    gaps = [b[0] - a[0] for a, b in zip(seen, seen[1:])]
    assert 1.3 <= gaps[1] / gaps[0] <= 3.0, f"gaps {gaps} do not double"


@pytest.mark.spec("2.9-17")
def test_a_signed_offer_from_another_node_is_taken_and_fetched_from_it(wire):
    g = fresh_group()
    wire.activate(g)
    new = wire.spec + bytes([0, 6, 4]) + b"conf" + b"o"
    h = hashlib.sha256(new).digest()
    # s1 offers an update R signed: the signature, not the source, vouches for it.
    wire.s1.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=95)
                              / CSP_SpecUpdate(spec_size=len(new), spec_hash=h,
                                               **wire.signed(g, len(new), h)),
                              src=wire.S1, dst=wire.router_id, ttl=64))
    req = wire.s1.first(lambda d: is_csp(d, g, 5), 3)
    assert req is not None, "the router did not fetch the offered spec from the node offering it"
    assert decode(req)[CSP_SpecRequest].spec_hash == h
