"""CSP at the router under test (protocol.md section 2), one message at a time, with s1 as
the joining child and rx as the receiver R."""
import hashlib
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, IPOption_Router_Alert

from concast.scapy import (CSP, CSP_Error, CSP_Join, CSP_JoinAck, CSP_Leave, CSP_Refresh,
                           CSP_SpecChunk, CSP_SpecRequest, CSP_SpecUpdate, IPOption_Concast,
                           classify, csp_datagram)
from conform_target import decode, fresh_group, is_csp
from crafting import patched

pytestmark = pytest.mark.mininet
QUIET = 1.5     # how long "nothing happens" is watched for
SYSTEM_SPECS = Path(__file__).parent.parent / "system" / "specs"


def upstream_join(t, group):
    """The router's own JOIN toward R; a JOIN that reaches R from anyone else (the child's,
    forwarded as by an oblivious router) fails the test's precondition, 2.8-1."""
    got = t.upstream_csp(group, 1)
    if got is not None and decode(got).src not in t.router_addresses:
        pytest.fail(f"the child's JOIN reached R from {decode(got).src}: the router did not "
                    "take it (2.8-1)")
    return got


@pytest.mark.spec("2.8-1", "4-2")
def test_a_join_for_an_unknown_flow_makes_the_router_join_r_itself(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g))
    got = upstream_join(wire, g)
    assert got is not None, "no JOIN for (rx, g) reached rx"
    ip = decode(got)
    assert ip.src in wire.router_addresses, f"the JOIN came from {ip.src}, not the router"
    assert ip[CSP].receiver == wire.RX


@pytest.mark.spec("2.8-1", "2.1-2", "2.9-8")
def test_the_child_gets_a_join_ack_naming_the_spec_r_put_in_force(wire):
    g = fresh_group()
    ack = decode(wire.activate(g))
    assert ack[CSP_JoinAck].spec_hash == wire.spec_hash
    assert ack[CSP_JoinAck].spec_size == len(wire.spec)
    assert ack.dst == wire.S1 and ack.src in wire.router_addresses
    assert ack[CSP].receiver == wire.RX, "a reply names R even though it travels away from R"
    r = wire.signed(g, len(wire.spec), wire.spec_hash)
    assert (ack[CSP_JoinAck].spec_key, ack[CSP_JoinAck].signature) == \
        (r["spec_key"], r["signature"]), "R's key and signature not passed on unchanged (2.9-8)"


@pytest.mark.spec("2.1-3")
def test_a_join_ack_copies_the_sequence_number_of_the_join(wire):
    g = fresh_group()
    wire.activate(g)
    wire.s1.send(wire.join_msg(g, seq=0xC0FFEE))
    ack = wire.child_csp(g, 2)
    assert ack is not None, "a JOIN to an active flow was not answered"
    assert decode(ack)[CSP].seq == 0xC0FFEE


@pytest.mark.spec("2.8-1")
def test_a_join_to_an_active_flow_is_answered_at_once_without_asking_r(wire):
    g = fresh_group()
    wire.activate(g)
    wire.rx.drain()
    wire.s1.send(wire.join_msg(g))
    assert wire.child_csp(g, 2) is not None
    assert wire.rx.first(lambda d: is_csp(d, g, 1), QUIET) is None


@pytest.mark.spec("2.8-2", "2.7-12")
def test_a_refresh_for_an_unknown_flow_is_taken_as_a_join(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g, body=CSP_Refresh(hold_time=300, selector_proto=254)))
    got = upstream_join(wire, g)
    assert got is not None, "a REFRESH for an unknown flow did not make the router join R"
    assert decode(got).src in wire.router_addresses
    for d in wire.s1.datagrams(0.3):
        assert not (is_csp(d, g, 8) and decode(d)[CSP_Error].error_code == 3), \
            "a REFRESH got UNKNOWN_FLOW"


@pytest.mark.spec("2.8-4", "2.7-3", "2.7-14")
def test_no_spec_from_r_is_passed_to_the_pending_child(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g, seq=0x5EC0))
    up = decode(upstream_join(wire, g))
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=up[CSP].seq)
                              / CSP_Error(error_code=1, offending_type=1, reason=b"no spec"),
                              src=wire.RX, dst=up.src, ttl=64))
    err = wire.child_csp(g, 8)
    assert err is not None, "the child was not told NO_SPEC"
    assert decode(err)[CSP_Error].error_code == 1
    assert decode(err)[CSP].seq == 0x5EC0, "NO_SPEC did not copy the seq of the child's JOIN"


@pytest.mark.spec("2.7-3")
def test_after_no_spec_the_router_forgets_the_pending_flow(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g))
    up = decode(upstream_join(wire, g))
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=up[CSP].seq)
                              / CSP_Error(error_code=1, offending_type=1),
                              src=wire.RX, dst=up.src, ttl=64))
    assert wire.child_csp(g, 8) is not None
    wire.s1.send(wire.join_msg(g))          # forgotten: a new JOIN starts over upstream
    assert upstream_join(wire, g) is not None


@pytest.mark.spec("2.5-4", "2.7-6")
def test_a_spec_request_for_an_unknown_hash_gets_spec_not_found_with_its_seq(wire):
    g = fresh_group()
    wire.activate(g)
    req = csp_datagram(CSP(group=g, receiver=wire.RX, seq=4711)
                       / CSP_SpecRequest(spec_hash=bytes(range(32)), chunk_index=0),
                       src=wire.S1, dst=wire.router_id, ttl=64)
    wire.s1.send(req)
    err = wire.child_csp(g, 8)
    assert err is not None, "no ERROR for a request of a hash the router does not hold"
    e = decode(err)
    assert e[CSP_Error].error_code == 4 and e[CSP].seq == 4711


@pytest.mark.spec("2.5-4")
def test_a_router_serves_chunks_of_a_spec_it_holds(wire):
    g = fresh_group()
    wire.activate(g)
    wire.s1.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=99)
                              / CSP_SpecRequest(spec_hash=wire.spec_hash, chunk_index=1),
                              src=wire.S1, dst=wire.router_id, ttl=64))
    got = wire.child_csp(g, 6)
    assert got is not None, "the router did not serve a chunk of the spec it runs"
    c = decode(got)[CSP_SpecChunk]
    assert c.chunk_index == 1 and c.spec_size == len(wire.spec)
    assert bytes(c.data) == wire.spec[1024:2048]


@pytest.mark.spec("2-1")
def test_a_concast_option_on_a_csp_datagram_is_ignored(wire):
    g = fresh_group()
    msg = wire.join_msg(g, options=[IPOption_Router_Alert(), IPOption_Concast(group=g + 1)])
    wire.s1.send(msg)
    assert upstream_join(wire, g) is not None, "a JOIN carrying a Concast ID was not taken"


@pytest.mark.spec("2.4-2", "2.8-3")
def test_when_the_last_child_leaves_the_router_leaves_upstream(wire):
    g = fresh_group()
    wire.activate(g)
    wire.s1.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=5) / CSP_Leave(),
                              src=wire.S1, dst=wire.RX, ttl=64))
    got = wire.upstream_csp(g, 4, timeout=5)
    assert got is not None, "no LEAVE toward R after the only child left"
    assert decode(got).src in wire.router_addresses


@pytest.mark.spec("2.6-1", "2.9-8")
def test_a_spec_update_from_upstream_is_fetched_from_it_and_passed_to_children(wire):
    g = fresh_group()
    wire.activate(g)
    new = wire.spec + bytes([0, 6, 4]) + b"conf" + b"x"   # the same code, one custom section more
    h = hashlib.sha256(new).digest()
    trailer = wire.signed(g, len(new), h)
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=77)
                              / CSP_SpecUpdate(spec_size=len(new), spec_hash=h, **trailer),
                              src=wire.RX, dst=wire.router_id, ttl=64))
    req = wire.rx.first(lambda d: is_csp(d, g, 5), 5)
    assert req is not None, "the router did not request the new spec from R"
    assert decode(req)[CSP_SpecRequest].spec_hash == h
    wire.serve_chunk(decode(req), new)
    deadline = time.monotonic() + 10
    upd = None
    while upd is None and time.monotonic() < deadline:
        for d in wire.rx.datagrams(0.2):
            if is_csp(d, g, 5):
                wire.serve_chunk(decode(d), new)
        upd = wire.s1.first(lambda d: is_csp(d, g, 7), 0.05)
    assert upd is not None, "the child was not sent the SPEC_UPDATE"
    u = decode(upd)[CSP_SpecUpdate]
    assert u.spec_hash == h
    assert (u.spec_key, u.signature) == (trailer["spec_key"], trailer["signature"]), \
        "the router did not pass R's key and signature on unchanged (2.9-8)"


@pytest.mark.spec("2.3-3")
def test_the_router_passes_on_the_smaller_of_rs_path_mtu_and_its_own_links(wire):
    ack = decode(wire.activate(fresh_group(), path_mtu=1000))
    assert ack[CSP_JoinAck].path_mtu == 1000, "min(1000 from R, 1500 links) not advertised"


@pytest.mark.spec("2.3-6", "2.3-2")
def test_a_path_mtu_of_0_from_r_leaves_the_routers_own_links(wire):
    ack = decode(wire.activate(fresh_group(), path_mtu=0))
    assert ack[CSP_JoinAck].path_mtu == 1500, "0 (unknown) from R must drop out of the minimum"


@pytest.mark.spec("2.5-5")
def test_a_spec_whose_chunks_do_not_hash_to_its_name_is_not_used(wire):
    g = fresh_group()
    spec = wire.spec + bytes([0, 6, 4]) + b"conf" + b"y"       # not cached at the router yet
    ack = wire.activate(g, spec=spec, corrupt=True, wait=4)
    if ack is not None:
        assert decode(ack)[CSP_JoinAck].spec_hash != hashlib.sha256(spec).digest(), \
            "the router put a spec in force whose bytes do not match its hash"


def _wrong_count(c):
    c.chunk_count += 1
    return c


def _short_data(c):
    if c.chunk_index + 1 < c.chunk_count:     # a chunk but the last one short of 1024
        c.data = bytes(c.data)[:-1]
    return c


@pytest.mark.spec("2.5-3")
@pytest.mark.parametrize("mangle", [_wrong_count, _short_data], ids=["wrong_count", "short_data"])
def test_spec_chunks_breaking_the_range_or_length_rules_are_not_used(wire, mangle):
    spec = wire.spec + bytes([0, 6, 4]) + b"conf" + mangle.__name__[-1].encode()
    digest = hashlib.sha256(spec).digest()
    ack = wire.activate(fresh_group(), spec=spec, mangle=mangle, wait=4)
    assert ack is None or decode(ack)[CSP_JoinAck].spec_hash != digest, \
        "the router put a spec in force from malformed SPEC_CHUNKs"


@pytest.mark.spec("2.8-5", "2.7-8", "2.8-13")
def test_a_flow_whose_spec_traps_is_quarantined_and_forwarded_unmerged(wire, tmp_path):
    from hostdtools import wasm_from_wat
    from scapy.layers.inet import UDP
    from scapy.packet import Raw
    loop = wasm_from_wat(SYSTEM_SPECS / "loop.wat", tmp_path).read_bytes()
    g = fresh_group()
    wire.activate(g, proto=17, dport=7100, spec=loop)
    dgram = IP(src=wire.S1, dst=wire.RX, ttl=64, options=[IPOption_Concast(group=g)]) \
        / UDP(sport=7100, dport=7100) / Raw(b"quarantine-me")
    wire.s1.send(dgram)
    err = wire.child_csp(g, 8, timeout=10)
    assert err is not None, "the child was not sent FLOW_QUARANTINED"
    assert decode(err)[CSP_Error].error_code == 6
    told = wire.rx.first(lambda d: is_csp(d, g, 8) and decode(d)[CSP_Error].error_code == 6
                         and decode(d).dst == wire.RX, 5)
    assert told is not None, "R was not sent FLOW_QUARANTINED too (2.8-13)"
    wire.s1.send(dgram)
    got = wire.rx.first(lambda d: b"quarantine-me" in d, 5)
    assert got is not None, "a quarantined flow's datagram was not forwarded"
    assert IP(got).src == wire.S1, "a quarantined flow's datagram was not forwarded unmerged"


# --- malformed CSP: not acted on (no JOIN toward R), answered with MALFORMED at most ---------
def _join_bytes(t, g, **kw):
    return bytes(t.join_msg(g, **kw))


MALFORMED_JOINS = {
    # id: (spec id, how the JOIN is spoiled)
    "csp_missing_router_alert": (("2-2", "2.1-4"), lambda t, g: _join_bytes(t, g, options=[])),
    "csp_truncated": ("2.1-5", lambda t, g: patched(_join_bytes(t, g)[:24 + 12], 2,
                                                   (36).to_bytes(2, "big"))),
    "csp_length_past_payload": ("2.1-5", lambda t, g: patched(_join_bytes(t, g), 26,
                                                             (57).to_bytes(2, "big"), False)),
    "csp_bad_version": ("2.1-6", lambda t, g: patched(_join_bytes(t, g), 24, b"\x02", False)),
    "csp_type_0": ("2.1-7", lambda t, g: patched(_join_bytes(t, g), 25, b"\x00", False)),
    "csp_type_9": ("2.1-7", lambda t, g: patched(_join_bytes(t, g), 25, b"\x09", False)),
    "csp_trailing_bytes": ("2.1-1", lambda t, g: _trailing(t, g)),
    "csp_body_too_short": ("2.1-8", lambda t, g: _short_body(t, g)),
}


def _ids(spec) -> tuple:
    return spec if isinstance(spec, tuple) else (spec,)


def _trailing(t, g):
    raw = _join_bytes(t, g) + b"\0\0\0\0"
    return patched(raw, 2, len(raw).to_bytes(2, "big"))


def _short_body(t, g):
    raw = _join_bytes(t, g)[:-4]
    raw = patched(raw, 2, len(raw).to_bytes(2, "big"))
    return patched(raw, 26, (len(raw) - 24).to_bytes(2, "big"), False)


def _check_not_acted_on(t, g, raw):
    assert classify(raw).kind == "malformed", classify(raw)
    t.s1.send(raw)
    leaked = t.rx.first(lambda d: d[9] == 253 and (is_csp(d, g, 1) or d[12:16] == raw[12:16]),
                        QUIET)
    assert leaked is None, "a malformed JOIN was acted on or forwarded toward R"
    for d in t.s1.datagrams(0.2):
        if is_csp(d, g, 8):
            assert decode(d)[CSP_Error].error_code == 5, "a malformed JOIN answered, not MALFORMED"


@pytest.mark.parametrize("case", [pytest.param(k, marks=pytest.mark.spec(*_ids(v[0])))
                                  for k, v in sorted(MALFORMED_JOINS.items())])
def test_a_malformed_join_is_not_acted_on(wire, case):
    g = fresh_group()
    make = MALFORMED_JOINS[case][1]
    _check_not_acted_on(wire, g, make(wire, g))


@pytest.mark.spec("2.2-1")
def test_reserved_fields_of_a_join_are_ignored(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g, body=CSP_Join(hold_time=300, selector_proto=254,
                                                S=1, reserved1=0x2B, reserved2=0xCDEF)))
    assert upstream_join(wire, g) is not None, "a JOIN with reserved bits set was not taken"


@pytest.mark.spec("2.5-2", "2.1-9")
def test_a_spec_request_for_chunk_1024_is_out_of_range_and_not_served(wire):
    g = fresh_group()
    wire.activate(g)
    req = csp_datagram(CSP(group=g, receiver=wire.RX, seq=31)
                       / CSP_SpecRequest(spec_hash=wire.spec_hash, chunk_index=1024),
                       src=wire.S1, dst=wire.router_id, ttl=64)
    assert classify(bytes(req)).error == "csp_chunk_out_of_range"
    wire.s1.send(req)
    for d in wire.s1.datagrams(QUIET):
        assert not is_csp(d, g, 6), "a chunk was served for an out-of-range index"
        if is_csp(d, g, 8):
            assert decode(d)[CSP_Error].error_code == 5


@pytest.mark.spec("2.6-2")
def test_a_spec_update_of_size_zero_is_not_acted_on(wire):
    g = fresh_group()
    wire.activate(g)
    upd = csp_datagram(CSP(group=g, receiver=wire.RX, seq=32)
                       / CSP_SpecUpdate(spec_size=0, spec_hash=bytes([7]) * 32),
                       src=wire.RX, dst=wire.router_id, ttl=64)
    assert classify(bytes(upd)).error == "csp_chunk_out_of_range"
    wire.rx.send(upd)
    assert wire.rx.first(lambda d: is_csp(d, g, 5), QUIET) is None, \
        "the router fetched a spec named by a malformed SPEC_UPDATE"
    assert wire.s1.first(lambda d: is_csp(d, g, 7), 0.2) is None


@pytest.mark.spec("2.7-1")
def test_an_error_with_a_reason_over_200_bytes_is_not_acted_on(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g))
    up = decode(upstream_join(wire, g))
    err = csp_datagram(CSP(group=g, receiver=wire.RX, seq=up[CSP].seq)
                       / CSP_Error(error_code=1, offending_type=1, reason=b"r" * 201),
                       src=wire.RX, dst=up.src, ttl=64)
    assert classify(bytes(err)).error == "csp_bad_length"
    wire.rx.send(err)
    assert wire.child_csp(g, 8, timeout=QUIET) is None, "a malformed NO_SPEC was passed on"


@pytest.mark.spec("2.4-1")
def test_a_join_right_after_a_leave_cancels_the_leave(wire):
    g = fresh_group()
    wire.activate(g)
    wire.s1.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=40) / CSP_Leave(),
                              src=wire.S1, dst=wire.RX, ttl=64))
    wire.s1.send(wire.join_msg(g))          # within the leave delay: the child stays
    assert wire.child_csp(g, 2) is not None, "the JOIN after the LEAVE was not answered"
    assert wire.upstream_csp(g, 4, timeout=QUIET) is None, \
        "the router left upstream although its child joined again"


@pytest.mark.spec("2.3-1")
def test_a_join_ack_naming_a_spec_of_size_0_is_not_fetched_or_passed_on(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g))
    up = decode(upstream_join(wire, g))
    bogus = bytes([9]) * 32
    wire.rx.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=up[CSP].seq)
                              / CSP_JoinAck(hold_time=300, spec_size=0, spec_hash=bogus,
                                            **wire.signed(g, 0, bogus)),
                              src=wire.RX, dst=up.src, ttl=64))
    for d in wire.rx.datagrams(QUIET):
        if is_csp(d, g, 5):
            assert decode(d)[CSP_SpecRequest].spec_hash != bogus, "a size-0 spec was fetched"
    ack = wire.child_csp(g, 2, timeout=0.5)
    assert ack is None or decode(ack)[CSP_JoinAck].spec_hash != bogus, \
        "the child was told to use a spec whose transfer cannot succeed"


@pytest.mark.spec("2.7-11", "2.8-11")
def test_a_leave_from_a_node_that_is_not_a_child_gets_unknown_flow(wire):
    g = fresh_group()
    wire.s1.send(csp_datagram(CSP(group=g, receiver=wire.RX, seq=0x1EAF) / CSP_Leave(),
                              src=wire.S1, dst=wire.RX, ttl=64))
    err = wire.child_csp(g, 8)
    assert err is not None, "a LEAVE for a flow the router does not have was not answered"
    e = decode(err)
    assert (e[CSP_Error].error_code, e[CSP_Error].offending_type, e[CSP].seq) == (3, 4, 0x1EAF)
    assert wire.upstream_csp(g, 4, timeout=0.5) is None, "the router forwarded a LEAVE (2.8-11)"


@pytest.mark.spec("2.7-13")
def test_a_spec_request_is_answered_by_hash_whatever_flow_it_names(wire):
    g = fresh_group()
    wire.activate(g)
    other = fresh_group()                     # a flow the router never heard of
    wire.s1.send(csp_datagram(CSP(group=other, receiver=wire.RX, seq=101)
                              / CSP_SpecRequest(spec_hash=wire.spec_hash, chunk_index=0),
                              src=wire.S1, dst=wire.router_id, ttl=64))
    got = wire.s1.first(lambda d: is_csp(d, other, 6) or is_csp(d, other, 8), 3)
    assert got is not None, "a SPEC_REQUEST naming an unknown flow was not answered"
    assert decode(got)[CSP].type == 6, "answered with an ERROR, not the chunk of the held spec"
    assert bytes(decode(got)[CSP_SpecChunk].data) == wire.spec[:1024]


@pytest.mark.spec("2.8-12")
def test_csp_addressed_past_the_router_is_forwarded_unchanged(wire):
    g = fresh_group()
    req = csp_datagram(CSP(group=g, receiver=wire.RX, seq=102)
                       / CSP_SpecRequest(spec_hash=bytes(range(32)), chunk_index=0),
                       src=wire.S1, dst=wire.RX, ttl=30)
    wire.s1.send(req)
    got = wire.rx.first(lambda d: is_csp(d, g, 5), 3)
    assert got is not None, "a SPEC_REQUEST addressed to R did not reach R"
    ip = decode(got)
    assert ip.src == wire.S1 and ip.ttl == 29 and bytes(ip[CSP]) == bytes(decode(bytes(req))[CSP])


def _with_body_tail(t, g, body, dst):
    """A CSP message whose body is 8 bytes longer than its type allows (Length agrees)."""
    from scapy.packet import Raw
    return bytes(csp_datagram(CSP(group=g, receiver=t.RX, seq=103) / body / Raw(bytes(8)),
                              src=t.RX, dst=dst, ttl=64))


@pytest.mark.spec("2.3-7")
def test_a_join_ack_of_a_length_neither_signed_nor_unsigned_is_not_used(wire):
    g = fresh_group()
    wire.s1.send(wire.join_msg(g))
    up = decode(upstream_join(wire, g))
    raw = _with_body_tail(wire, g, CSP_JoinAck(hold_time=300, spec_size=len(wire.spec),
                                               spec_hash=wire.spec_hash), up.src)
    raw = patched(raw, 28 + 12, up[CSP].seq.to_bytes(4, "big"), False)
    assert classify(raw).error == "csp_bad_length", classify(raw)
    wire.rx.send(raw)
    assert wire.child_csp(g, 2, timeout=QUIET) is None, "a malformed JOIN_ACK was used"


@pytest.mark.spec("2.6-3")
def test_a_spec_update_of_a_length_neither_signed_nor_unsigned_is_not_used(wire):
    g = fresh_group()
    wire.activate(g)
    new = wire.spec + bytes([0, 6, 4]) + b"conf" + b"L"
    raw = _with_body_tail(wire, g, CSP_SpecUpdate(spec_size=len(new),
                                                  spec_hash=hashlib.sha256(new).digest()),
                          wire.router_id)
    assert classify(raw).error == "csp_bad_length", classify(raw)
    wire.rx.send(raw)
    assert wire.rx.first(lambda d: is_csp(d, g, 5), QUIET) is None, \
        "the router fetched a spec named by a malformed SPEC_UPDATE"


@pytest.mark.spec("2.2-2")
@pytest.mark.parametrize("asked", [0, 1])
def test_the_hold_time_granted_is_the_one_asked_for_within_the_bound(wire, asked):
    """Whatever a node's bound (its own setting, at least H), a 1 s ask is within it and is
    granted exactly; 0 asks for the node's default H, which is granted as a real time."""
    g = fresh_group()
    wire.activate(g)
    wire.s1.send(wire.join_msg(g, body=CSP_Join(hold_time=asked, selector_proto=254, S=1)))
    ack = wire.child_csp(g, 2)
    assert ack is not None, "a JOIN to an active flow was not answered"
    granted = decode(ack)[CSP_JoinAck].hold_time
    if asked:
        assert granted == asked, f"asked {asked} s, within any bound, granted {granted} s"
    else:
        assert granted > 0, "a JOIN asking for the default was granted 0 s"
