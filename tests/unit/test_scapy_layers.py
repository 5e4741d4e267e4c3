"""concast.scapy against the shared vectors (tests/vectors/vectors.json, docs/protocol.md).

Decoding: `IP(raw)` must give every field the vector lists (an unknown field name fails).
Building: the layers must produce the vector's bytes exactly from its fields.
Validity: `validate`/`classify` must name the vector's error and kind.
Robustness: nothing here may raise on malformed or mutated input.
"""
import hashlib
import random

import pytest
from scapy.layers.inet import IP, IPOption_EOL, IPOption_NOP, IPOption_Router_Alert, IPOption_RR
from scapy.packet import Raw

import concast.scapy as S
import concast.vectors as V
from concast.scapy import (CSP, CSP_BODIES, EncapsulatedPkt, IPOption_Concast, MplexHdr,
                           classify, concast_option, csp_datagram, mplex_datagram,
                           mplex_records, validate)
from concast.vectors.generate import SPEC   # the made-up spec whose chunks the vectors carry

ALL = V.load()
VALID = V.load(valid=True)
MALFORMED = V.load(valid=False)

def params(vectors):
    return [pytest.param(v, id=v["name"]) for v in vectors]


# ---------------------------------------------------------------- decoding

def _body(p):
    body = p[CSP].payload
    assert isinstance(body, CSP_BODIES[p[CSP].type]), body.summary()
    return body


def _group(p):
    return p[CSP].group if CSP in p else concast_option(p).group


def _records(p):
    return [{"src": r.src, "ttl": r.ttl, "proto": r.proto, "tos": r.tos,
             "payload_len": r.payload_len, "payload_hex": r.data.hex()} for r in mplex_records(p)]


# Every field name a vector may carry, and where the decoded packet keeps it.
DECODED = {
    "src": lambda p: p[IP].src,
    "dst": lambda p: p[IP].dst,
    "ttl": lambda p: p[IP].ttl,
    "proto": lambda p: p[IP].proto,
    "ihl": lambda p: p[IP].ihl,
    "total_length": lambda p: p[IP].len,
    "group": _group,
    "csp_type": lambda p: p[CSP].type,
    "csp_type_name": lambda p: CSP.type.i2s[p[CSP].type],
    "receiver": lambda p: p[CSP].receiver,
    "seq": lambda p: p[CSP].seq,
    "hold_time": lambda p: _body(p).hold_time,
    "path_mtu": lambda p: _body(p).path_mtu,
    "selector_proto": lambda p: _body(p).selector_proto,
    "selector_dport": lambda p: _body(p).selector_dport,
    "S": lambda p: _body(p).S,
    "spec_hash": lambda p: _body(p).spec_hash.hex(),
    "spec_key": lambda p: _body(p).spec_key.hex(),
    "signature": lambda p: _body(p).signature.hex(),
    "spec_size": lambda p: _body(p).spec_size,
    "chunk_index": lambda p: _body(p).chunk_index,
    "chunk_count": lambda p: _body(p).chunk_count,
    "data_len": lambda p: len(_body(p).data),
    "error_code": lambda p: _body(p).error_code,
    "offending_type": lambda p: _body(p).offending_type,
    "reason": lambda p: _body(p).reason.decode(),
    "initial_ttl": lambda p: p[MplexHdr].initial_ttl,
    "version": lambda p: p[MplexHdr].version,
    "max_total_delay": lambda p: p[MplexHdr].max_total_delay,
    "delayed_so_far": lambda p: p[MplexHdr].delayed_so_far,
    "max_local_delay": lambda p: p[MplexHdr].max_local_delay,
    "records": _records,
}


@pytest.mark.parametrize("v", VALID, ids=V.ids(VALID))
def test_decode_fields(v):
    p = IP(v["raw"])
    unknown = set(v["fields"]) - set(DECODED)
    assert not unknown, f"vector field(s) this test does not know how to check: {unknown}"
    got = {name: DECODED[name](p) for name in v["fields"]}
    assert got == v["fields"]


@pytest.mark.parametrize("v", VALID, ids=V.ids(VALID))
def test_decode_layers_match_kind(v):
    """The layers Scapy picks agree with the kind, and re-serialising gives the input back."""
    p = IP(v["raw"])
    kind = v["kind"]
    assert (concast_option(p) is not None) == (kind in ("concast", "mplex")
                                               or v["name"] == "csp_with_concast_option")
    assert (CSP in p) == (kind == "csp")
    assert (MplexHdr in p) == (kind == "mplex")
    if kind == "mplex":
        assert all(isinstance(r, EncapsulatedPkt) for r in p[MplexHdr].records)
    assert Raw not in p or kind in ("ipv4", "concast")        # only application payload
    assert bytes(p) == v["raw"]


# ---------------------------------------------------------------- building

# The options area of each vector, as layers (the vectors' fields carry only the group).
OPTIONS = {
    "plain_udp": [],
    "plain_router_alert_only": [IPOption_Router_Alert()],
    "concast_after_nops": [IPOption_NOP(), IPOption_NOP(), IPOption_Concast(group=7)],
    "concast_after_router_alert": [IPOption_Router_Alert(), IPOption_Concast(group=8)],
    "concast_before_router_alert": [IPOption_Concast(group=9), IPOption_Router_Alert()],
    "concast_after_record_route": [IPOption_NOP(), IPOption_RR(routers=["0.0.0.0"]),
                                   IPOption_Concast(group=10)],
    "concast_at_end_of_40_bytes": [IPOption_NOP()] * 34 + [IPOption_Concast(group=11)],
    # Odd on purpose: an option after EOL (padding to a parser), which Scapy builds verbatim.
    "concast_after_eol_is_ignored": [IPOption_EOL(), IPOption_EOL(), IPOption_Concast(group=12)],
    "csp_router_alert_after_nops": [IPOption_NOP()] * 4 + [IPOption_Router_Alert()],
    "csp_with_concast_option": [IPOption_Router_Alert(), IPOption_Concast(group=7)],
    "mplex_group_42_after_nops": [IPOption_NOP(), IPOption_NOP(), IPOption_Concast(group=42)],
    "csp_later_fragment_not_checked": [IPOption_Router_Alert()],
}
# Vectors whose IPv4 flags and fragment offset are not generate.py's DF, 0.
FRAGMENTS = {
    "concast_fragment": {"flags": "MF"},
    "csp_later_fragment_not_checked": {"flags": "MF", "frag": 5},
    "mplex_later_fragment_not_checked": {"flags": 0, "frag": 2},
}
IP_CONSTANTS = {"id": 0x1234, "flags": "DF"}    # what generate.py puts in every header
IP_NAMES = ("src", "dst", "ttl", "proto", "ihl", "total_length")
CSP_HEADER = ("csp_type", "csp_type_name", "group", "receiver", "seq")


def _ip(f, name):
    return {k: f[k] for k in ("src", "dst", "ttl")} | IP_CONSTANTS | FRAGMENTS.get(name, {})


def build_plain(v):
    f, raw = v["fields"], v["raw"]
    payload = raw[f["ihl"] * 4:f["total_length"]]       # UDP/TCP: not a concast layer
    opts = OPTIONS.get(v["name"], [IPOption_Concast(group=f.get("group"))])
    p = IP(options=opts, proto=f["proto"], **_ip(f, v["name"])) / Raw(payload)
    out = bytes(p)
    if v["name"] == "concast_ethernet_padding":        # the padding is not part of IPv4
        out += bytes(len(raw) - f["total_length"])
    return out


def build_csp(v):
    f = v["fields"]
    body = {k: val for k, val in f.items() if k not in IP_NAMES + CSP_HEADER}
    for k in ("spec_hash", "spec_key", "signature"):
        if k in body:
            body[k] = bytes.fromhex(body[k])
    if "data_len" in body:
        start = body["chunk_index"] * S.CHUNK_SIZE
        body["data"] = SPEC[start:start + body.pop("data_len")]
    if "reason" in body:
        body["reason"] = body["reason"].encode()
    msg = CSP(group=f["group"], receiver=f["receiver"], seq=f["seq"]) \
        / CSP_BODIES[f["csp_type"]](**body)     # unknown field names raise in Scapy
    opts = OPTIONS.get(v["name"])
    return bytes(csp_datagram(msg, options=opts, **_ip(f, v["name"])))


def build_mplex(v):
    f = v["fields"]
    records = [EncapsulatedPkt(src=r["src"], ttl=r["ttl"], proto=r["proto"], tos=r["tos"],
                               data=bytes.fromhex(r["payload_hex"])) for r in f["records"]]
    hdr = {k: f[k] for k in ("initial_ttl", "max_total_delay", "delayed_so_far",
                             "max_local_delay")}
    p = mplex_datagram(records, group=f["group"], options=OPTIONS.get(v["name"]),
                       **_ip(f, v["name"]), **hdr)
    return bytes(p)


BUILD = {"ipv4": build_plain, "concast": build_plain, "csp": build_csp, "mplex": build_mplex}


@pytest.mark.parametrize("v", VALID, ids=V.ids(VALID))
def test_build_matches_vector(v):
    assert BUILD[v["kind"]](v).hex() == v["hex"]


def test_build_option_pads_like_a_sender():
    """`9E 06 GG GG GG GG 00 00`, IHL 7: Scapy pads the options area with EOL bytes."""
    p = IP(bytes(IP(options=[IPOption_Concast(group=0x01020304)])))
    assert bytes(p)[20:28] == bytes.fromhex("9e06 01020304 0000")
    assert p.ihl == 7 and concast_option(p).group == 0x01020304


def test_build_fills_types_and_lengths():
    """A bare header is a LEAVE; a body sets `type`; lengths are computed."""
    assert bytes(CSP())[1:4] == b"\x04\x00\x10"
    for t, cls in CSP_BODIES.items():
        m = CSP(bytes(CSP() / cls()))
        assert m.type == t and m.length == len(bytes(CSP() / cls()))
    err = CSP(bytes(CSP() / S.CSP_Error(reason=b"why")))
    assert (err.length, err[S.CSP_Error].reason) == (23, b"why")
    d = IP(bytes(csp_datagram(CSP() / S.CSP_Join(), dst="10.0.9.9")))
    assert (d.proto, d.ihl, bytes(d)[20:24]) == (253, 6, b"\x94\x04\x00\x00")
    r = EncapsulatedPkt(bytes(EncapsulatedPkt(data=b"abc")))
    assert r.payload_len == 3 and r.data == b"abc"


def test_every_csp_type_is_built():
    """test_build_matches_vector covers every valid vector; make sure that means every type."""
    assert {v["fields"]["csp_type"] for v in V.load(kind="csp")} == set(CSP_BODIES)


# ---------------------------------------------------------------- validity

@pytest.mark.parametrize("v", params(ALL))
def test_validate(v):
    assert validate(v["raw"]) == v["error"]


@pytest.mark.parametrize("v", params(ALL))
def test_classify(v):
    c = classify(v["raw"])
    assert (c.kind, c.error) == (v["kind"], v["error"])
    assert c.group == v["fields"].get("group")


def test_every_spec_error_has_a_vector():
    assert {v["error"] for v in MALFORMED} == set(S.ERRORS)


def test_validate_ignores_checksum():
    raw = bytearray(V.load(kind="concast")[0]["raw"])
    raw[10] ^= 0xFF
    assert validate(bytes(raw)) is None


# ---------------------------------------------------------------- robustness

@pytest.mark.parametrize("v", ALL, ids=V.ids(ALL))
def test_decode_never_raises(v):
    bytes(S.decode_ip(v["raw"]))
    repr(S.decode_ip(v["raw"]))


def _mutations(rng, seeds, n):
    for _ in range(n):
        b = bytearray(rng.choice(seeds))
        if rng.random() < 0.3:
            del b[rng.randrange(len(b) + 1):]
        else:
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.choice((0, 1, 0x94, 0x9E, 0xFF,
                                                       rng.randrange(256)))
        yield bytes(b)


def test_fuzz_decode_and_validate_never_raise():
    """Mutated and truncated vectors: no exception, and Scapy agrees with validate()."""
    rng = random.Random(20240601)
    seeds = [v["raw"] for v in VALID]
    seen = set()
    for raw in _mutations(rng, seeds, 3000):
        p = S.decode_ip(raw)
        bytes(p)
        c = classify(raw)
        assert validate(raw) == c.error and c.error in (None, *S.ERRORS)
        seen.add(c.error or c.kind)
        if c.kind == "csp" and p.len > p.ihl * 4 + 16:        # a message with a body
            assert isinstance(p[CSP].payload, CSP_BODIES[p[CSP].type])
        if c.kind == "mplex":
            assert all(isinstance(r, EncapsulatedPkt) for r in p[MplexHdr].records)
            assert sum(9 + r.payload_len for r in mplex_records(p)) + 16 \
                == p.len - p.ihl * 4
    assert len(seen) > 15, seen                      # the mutations reach most checks


def test_spec_constant_matches_vectors():
    """SPEC (imported for chunk data) is the spec whose hash the vectors carry."""
    v = next(v for v in VALID if v["name"] == "csp_join_ack")
    assert hashlib.sha256(SPEC).hexdigest() == v["fields"]["spec_hash"]
