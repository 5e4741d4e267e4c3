"""Receiver-signed specs at the router under test (protocol.md 2.9): the suite's R signs with
its own Ed25519 key (signing.py); these tests offer what R did not sign and expect it refused,
with ERROR SPEC_REJECTED to the offer's source, and nothing of it used."""
import hashlib

import pytest
from scapy.layers.l2 import Ether

from concast.scapy import (CSP, CSP_Error, CSP_JoinAck, CSP_SpecChunk, CSP_SpecUpdate,
                           csp_datagram)
from conform_target import HOLD_S, decode, fresh_group, is_csp
from signing import OTHER_KEY

pytestmark = pytest.mark.mininet
QUIET = 1.5


def variant(t, tag: bytes) -> tuple[bytes, bytes]:
    """The multiplex spec with one custom section more (a spec the router has not cached)."""
    spec = t.spec + bytes([0, 6, 4]) + b"conf" + tag
    return spec, hashlib.sha256(spec).digest()


def rejections(t, group: int) -> list:
    """The ERROR SPEC_REJECTED messages about (rx, group) that reached rx so far in this test
    (read from the test's frame log, so a helper that consumed them does not hide them)."""
    out = []
    for _, frame in t.rx.log.frames:
        ip = bytes(Ether(frame).payload)
        if is_csp(ip, group, 8) and ip[16:20] == bytes(map(int, t.RX.split("."))):
            e = decode(ip)
            if e[CSP_Error].error_code == 2:
                out.append(e)
    return out


def join_ack(t, join, spec: bytes, trailer: dict, path_mtu: int = 0):
    return csp_datagram(CSP(group=join[CSP].group, receiver=t.RX, seq=join[CSP].seq)
                        / CSP_JoinAck(hold_time=HOLD_S, path_mtu=path_mtu, spec_size=len(spec),
                                      spec_hash=hashlib.sha256(spec).digest(), **trailer),
                        src=t.RX, dst=join.src, ttl=64)


def refused_then_served(t, group: int, offer) -> bytes:
    """Offer `offer(join)` (a JOIN_ACK R did not sign properly) first, then R's real one;
    returns the JOIN_ACK the child finally gets, after checking the first was refused."""
    def first(join):
        t.rx.send(offer(join))
        got = t.rx.first(lambda d: is_csp(d, group, 8), 3)
        assert got is not None, "no ERROR SPEC_REJECTED to R for an offer it did not sign"
        e = decode(got)[CSP_Error]
        assert e.error_code == 2 and e.offending_type == 2, e.summary()
        assert len(bytes(e.reason)) > 0, "SPEC_REJECTED without a reason"
        assert t.s1.first(lambda d: is_csp(d, group, 2), 0.3) is None, \
            "the child was answered from a refused JOIN_ACK"
    return t.activate(group, before_ack=first)


@pytest.mark.spec("2.9-1", "2.9-4", "2.7-4")
def test_an_unsigned_join_ack_is_refused_and_changes_nothing(wire):
    g = fresh_group()
    ack = refused_then_served(wire, g, lambda join: join_ack(wire, join, wire.spec, {},
                                                            path_mtu=700))
    assert decode(ack)[CSP_JoinAck].path_mtu == 1500, \
        "the refused JOIN_ACK's path MTU (700) was used (2.9-4)"


@pytest.mark.spec("2.9-3")
def test_a_join_ack_signed_for_another_group_is_refused(wire):
    g = fresh_group()
    spec = wire.spec
    trailer = wire.signed(g + 1, len(spec), hashlib.sha256(spec).digest())
    refused_then_served(wire, g, lambda join: join_ack(wire, join, spec, trailer))


@pytest.mark.spec("2.9-3")
def test_a_join_ack_whose_size_is_not_the_signed_one_is_refused(wire):
    g = fresh_group()
    spec = wire.spec
    trailer = wire.signed(g, len(spec) + 1, hashlib.sha256(spec).digest())
    refused_then_served(wire, g, lambda join: join_ack(wire, join, spec, trailer))


@pytest.mark.spec("2.9-2", "2.9-9")
def test_once_rs_key_is_pinned_an_update_signed_by_another_key_is_refused(wire):
    g = fresh_group()
    wire.activate(g)                    # pins the suite's R key for (rx, g)
    new, h = variant(wire, b"k")
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=78)
                              / CSP_SpecUpdate(spec_size=len(new), spec_hash=h,
                                               **wire.signed(g, len(new), h, key=OTHER_KEY)),
                              src=wire.RX, dst=wire.router_id, ttl=64))
    got = wire.rx.first(lambda d: is_csp(d, g, 8) or is_csp(d, g, 5), 3)
    assert got is not None and decode(got)[CSP].type == 8, \
        "an update signed by another key than the pinned one was not refused"
    assert decode(got)[CSP_Error].error_code == 2
    assert wire.s1.first(lambda d: is_csp(d, g, 7), 0.3) is None


@pytest.mark.spec("2.9-5")
def test_chunks_that_do_not_match_the_signed_hash_are_refused_to_their_server(wire):
    g = fresh_group()
    spec, h = variant(wire, b"c")
    ack = wire.activate(g, spec=spec, corrupt=True, wait=4)
    assert ack is None or decode(ack)[CSP_JoinAck].spec_hash != h
    # it may still be on its way when the child's answer ended activate()
    late = wire.rx.first(lambda d: is_csp(d, g, 8) and decode(d)[CSP_Error].error_code == 2, 3)
    assert rejections(wire, g) or late, \
        "no SPEC_REJECTED to R, which served chunks not matching the hash"


@pytest.mark.spec("2.9-6")
def test_a_spec_chunk_for_no_transfer_is_ignored(wire):
    g = fresh_group()
    wire.activate(g)
    stray = hashlib.sha256(b"no such spec").digest()
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=79)
                              / CSP_SpecChunk(spec_hash=stray, spec_size=10, chunk_index=0,
                                              chunk_count=1, data=b"0123456789"),
                              src=wire.RX, dst=wire.router_id, ttl=64))
    for d in wire.rx.datagrams(QUIET):
        assert not (is_csp(d, g, 5) or is_csp(d, g, 8)), "the router acted on a stray chunk"
    wire.s1.send(wire.join_msg(g))
    assert wire.child_csp(g, 2) is not None, "the flow stopped working after a stray chunk"
