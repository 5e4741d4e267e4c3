"""What a receiver does with an MplexPkt (docs/protocol.md section 3.3), on Scapy packets."""
import random
from typing import NamedTuple

from scapy.layers.inet import IP
from scapy.packet import Packet, Raw

from .mplex import EncapsulatedPkt, MplexHdr, mplex_records
from .validate import classify


class Unbundled(NamedTuple):
    """unbundle()'s answer: what the receiver injects, and what the TTL rule dropped."""
    datagrams: list[IP]               # rebuilt originals, in record order
    expired: list[EncapsulatedPkt]    # records dropped by the TTL rule


def unbundle(pkt: Packet | bytes, *, first_id: int | None = None) -> Unbundled:
    """What a receiver does with an MplexPkt (section 3.3).

    Each record's TTL is lowered by the hops the MplexPkt travelled (initialTTL - outer TTL);
    a record left with TTL <= 0 would have expired on a plain path, so it is not rebuilt but
    returned in `expired`. The others become plain IPv4 datagrams (IHL 5, the record's TOS,
    DF, fresh ID, checksum computed) with the payload copied unchanged, so transport checksums still hold.
    IDs are `first_id`, `first_id + 1`, ... or random. Raises ValueError on a malformed or
    non-multiplex datagram, naming the spec's error.
    """
    raw = bytes(pkt)
    kind, _, error = classify(raw)
    if kind != "mplex":
        raise ValueError(f"not an MplexPkt: {error or kind}")
    ip = IP(raw)
    hops = ip[MplexHdr].initial_ttl - ip.ttl
    if first_id is None:
        first_id = random.randrange(1 << 16)
    out, expired = [], []
    for rec in mplex_records(ip):
        ttl = rec.ttl - hops
        if ttl <= 0:
            expired.append(rec)
            continue
        orig = IP(ihl=5, tos=rec.tos, id=(first_id + len(out)) & 0xFFFF, flags="DF", frag=0,
                  ttl=min(ttl, 255), proto=rec.proto, src=rec.src, dst=ip.dst) / Raw(rec.data)
        out.append(IP(bytes(orig)))
    return Unbundled(out, expired)
