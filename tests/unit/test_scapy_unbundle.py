"""unbundle() and mplex_datagram(): docs/protocol.md sections 3.1 and 3.3."""
import pytest
from scapy.layers.inet import IP, TCP
from scapy.utils import checksum

import concast.vectors as V
from concast.scapy import (EncapsulatedPkt, MplexHdr, mplex_datagram, mplex_records,
                           unbundle, validate)

MPLEX = V.load(kind="mplex")
BAD_MPLEX = [v for v in V.load(valid=False) if v["name"].startswith("mplex_")]


@pytest.mark.parametrize("v", MPLEX, ids=V.ids(MPLEX))
def test_unbundle_vector(v):
    f = v["fields"]
    hops = f["initial_ttl"] - f["ttl"]
    out, expired = unbundle(v["raw"], first_id=0xFFFE)
    assert expired == [] and len(out) == len(f["records"])
    for i, (d, rec) in enumerate(zip(out, f["records"])):
        raw = bytes(d)
        assert checksum(raw[:20]) == 0                          # valid IPv4 header checksum
        assert (d.version, d.ihl, d.tos, d.len) == (4, 5, rec["tos"], 20 + rec["payload_len"])
        assert (d.flags, d.frag, d.id) == ("DF", 0, (0xFFFE + i) & 0xFFFF)
        assert (d.src, d.dst, d.proto, d.ttl) == (rec["src"], f["dst"], rec["proto"],
                                                  rec["ttl"] - hops)
        assert raw[20:].hex() == rec["payload_hex"]
        assert validate(raw) is None


def _bundle(ttls, outer_ttl, initial_ttl):
    recs = [EncapsulatedPkt(src=f"10.0.1.{i + 1}", ttl=t, proto=17, data=bytes([i]))
            for i, t in enumerate(ttls)]
    given = {k: v for k, v in (("ttl", outer_ttl), ("initial_ttl", initial_ttl)) if v}
    return mplex_datagram(recs, src="10.0.5.1", dst="10.0.9.9", **given)


def test_ttl_rule_drops_records_that_would_have_expired():
    """10 - 6 hops: TTL 6 -> 0 and TTL 2 -> -4 are dropped; 7 -> 1 and 255 -> 249 kept."""
    out, expired = unbundle(_bundle([6, 7, 2, 255], outer_ttl=4, initial_ttl=10))
    assert [r.ttl for r in expired] == [6, 2]
    assert [(d.src, d.ttl) for d in out] == [("10.0.1.2", 1), ("10.0.1.4", 249)]


def test_ttl_rule_no_hops_keeps_everything():
    out, expired = unbundle(_bundle([1, 64], outer_ttl=64, initial_ttl=64))
    assert [d.ttl for d in out] == [1, 64] and expired == []


def test_transport_checksum_survives():
    """The payload is copied unchanged, so a TCP checksum over the pseudo-header verifies."""
    seg = IP(bytes(IP(src="10.0.1.1", dst="10.0.9.9") / TCP(sport=40001, dport=80, flags="A",
                                                          seq=1, ack=2)))[TCP]
    rec = EncapsulatedPkt(src="10.0.1.1", ttl=64, proto=6, data=bytes(seg))
    (orig,), _ = unbundle(mplex_datagram([rec], src="10.0.5.1", dst="10.0.9.9"))
    fresh = IP(bytes(orig))
    del fresh[TCP].chksum
    assert IP(bytes(fresh))[TCP].chksum == orig[TCP].chksum == seg.chksum


def test_mplex_datagram_follows_section_3_1():
    p = IP(bytes(_bundle([60, 64, 5], outer_ttl=None, initial_ttl=None)))
    assert validate(bytes(p)) is None
    assert p[MplexHdr].initial_ttl == p.ttl == 64                # max record TTL
    assert p.flags == "DF" and bytes(p)[20:28].hex() == "9e06000000010000"   # G = 1
    assert [r.ttl for r in mplex_records(p)] == [60, 64, 5]


def test_mplex_header_fills_initial_ttl():
    hdr = MplexHdr(bytes(MplexHdr(records=[EncapsulatedPkt(ttl=9), EncapsulatedPkt(ttl=33)])))
    assert hdr.initial_ttl == 33 and len(hdr.records) == 2


@pytest.mark.parametrize("v", BAD_MPLEX, ids=V.ids(BAD_MPLEX))
def test_unbundle_refuses_malformed(v):
    with pytest.raises(ValueError, match=v["error"]):
        unbundle(v["raw"])


def test_unbundle_refuses_non_mplex():
    with pytest.raises(ValueError, match="concast"):
        unbundle(V.load(kind="concast")[0]["raw"])
    assert mplex_records(V.load(kind="csp")[0]["raw"]) == []
