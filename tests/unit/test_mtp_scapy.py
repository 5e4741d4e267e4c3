"""concast.scapy.mtp against the MTP vectors (tests/vectors/mtp.json, docs/transport.md "MTP").

Decoding: `MTP(raw)` gives every field the vector lists. Building: the layer produces the
vector's bytes from its fields, and from the body alone with the lengths left to it.
Validity: `mtp_error` names the vector's error. The generator's output is current.
"""
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP

from concast.scapy.mtp import ERRORS, MTP, MTP_PORT, REPLY, REQUEST, decode_mtp, mtp_error

ROOT = Path(__file__).resolve().parents[2]
DOC = json.loads((ROOT / "tests/vectors/mtp.json").read_text())
VALID = [v for v in DOC["vectors"] if v["valid"]]
INVALID = [v for v in DOC["vectors"] if not v["valid"]]


def params(vs):
    return [pytest.param(v, id=v["name"]) for v in vs]


def test_generator_output_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "tests/vectors/mtp_generate.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert DOC["count"] == len(DOC["vectors"]) >= 20


@pytest.mark.parametrize("v", params(VALID))
def test_valid_vector_decodes_to_its_fields_and_rebuilds_exactly(v):
    raw = bytes.fromhex(v["hex"])
    p = MTP(raw)
    f = dict(v["fields"])
    body = bytes.fromhex(f.pop("body_hex"))
    for name, want in f.items():
        assert int(p.getfieldval(name)) == want, name
    assert p.body == body
    assert mtp_error(raw) is None
    assert bytes(MTP(**f, body=body)) == raw
    # lengths left to the layer come out as the vector's (not a suppressed reply's length:
    # it says what would have come, not what did)
    # (a reply's namelen is the server's response limit, not a length: kept as given)
    auto = dict(f) if f["type"] == REPLY and f["namelen"] else dict(f, namelen=None)
    if f["type"] == REPLY and not f["flags"] & 0x01:
        auto["length"] = None
    assert bytes(MTP(**auto, body=body)) == raw


@pytest.mark.parametrize("v", params(INVALID))
def test_invalid_vector_is_refused_with_its_error(v):
    assert v["error"] in ERRORS
    assert mtp_error(bytes.fromhex(v["hex"])) == v["error"]


def test_udp_port_binding_dissects_both_ways():
    req = bytes.fromhex(VALID[0]["hex"])
    p = IP(bytes(IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=40000, dport=MTP_PORT) / MTP(req)))
    assert MTP in p and p[MTP].txid == VALID[0]["fields"]["txid"]
    rep = bytes.fromhex(next(v for v in VALID if v["name"] == "reply_middle")["hex"])
    p = IP(bytes(IP() / UDP(sport=MTP_PORT, dport=40000) / MTP(rep)))
    assert p[MTP].type == REPLY and p[MTP].body == bytes(range(0x40, 0x50))


def test_random_and_mutated_bytes_never_raise():
    rng = random.Random(11)
    seeds = [bytes.fromhex(v["hex"]) for v in DOC["vectors"]]
    for _ in range(2000):
        b = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            if b and rng.random() < 0.7:
                b[rng.randrange(len(b))] = rng.randrange(256)
            else:
                b = b[:rng.randrange(len(b) + 1)]
        err = mtp_error(bytes(b))
        assert err is None or err in ERRORS
        p = decode_mtp(bytes(b))
        assert isinstance(p, MTP) or len(b) < 24
