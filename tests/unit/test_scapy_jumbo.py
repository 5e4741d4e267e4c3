"""The Scapy MplexPkt layer reads bundles as large as a jumbo path lets routers build
(docs/multiplex.md "Bundle size"), past Scapy's default limit of 100 list items."""
from concast.scapy import EncapsulatedPkt, mplex_datagram, mplex_records


def test_a_9000_byte_bundle_of_300_records_decodes_whole():
    recs = [EncapsulatedPkt(src="10.0.1.1", ttl=64, proto=6, data=bytes([i % 256]) * 20)
            for i in range(300)]
    raw = bytes(mplex_datagram(recs, src="10.0.5.1", dst="10.0.9.9"))
    assert 4096 < len(raw) <= 9000
    got = mplex_records(raw)
    assert len(got) == 300
    assert got[-1].data == bytes([299 % 256]) * 20
