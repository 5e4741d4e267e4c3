"""The multiplex packet (docs/protocol.md section 3): MplexHdr and its EncapsulatedPkt records."""
import random
from typing import NamedTuple

from scapy.fields import (ByteEnumField, ByteField, FieldLenField, IntField, IPField,
                          PacketListField, StrLenField, XByteField, XShortField)
from scapy.layers.inet import IP, IP_PROTOS
from scapy.packet import Packet, Raw, bind_layers

from .option import IPOption_Concast

PROTO_MPLEX = 254
MPLEX_GROUP = 1
MPLEX_HEADER_LEN = 16
MPLEX_VERSION = 1          # the MplexHdr Version with a TOS byte in each record header
RECORD_HEADER_LEN = 9


class EncapsulatedPkt(Packet):
    """One carried datagram: its source, TTL, protocol, TOS byte and IPv4 payload (`data`).

    The destination is not carried: it is the MplexPkt's. `payload_len` is filled in when
    left None. Records follow each other with no padding, so everything after this record's
    data is handed back to the list as the next record.
    """
    name = "EncapsulatedPkt"
    fields_desc = [IPField("src", "0.0.0.0"),
                   ByteField("ttl", 64),
                   ByteEnumField("proto", 6, IP_PROTOS),
                   FieldLenField("payload_len", None, length_of="data", fmt="H"),
                   XByteField("tos", 0),
                   StrLenField("data", b"", length_from=lambda p: p.payload_len)]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


class MplexHdr(Packet):
    """MplexHdr and the records after it, bound to IPv4 protocol 254.

    `initial_ttl` left None becomes the largest record TTL, the rule of section 3.1.
    The records are a list field (they run to the IPv4 total length, not to a count),
    so `IP(raw)[MplexHdr].records` is every record.
    """
    name = "MplexHdr"
    fields_desc = [ByteField("initial_ttl", None),
                   ByteField("version", MPLEX_VERSION),
                   XShortField("reserved", 0),
                   IntField("max_total_delay", 0),
                   IntField("delayed_so_far", 0),
                   IntField("max_local_delay", 0),
                   # A 64 KiB bundle holds up to 7281 records; Scapy stops at 100 unless told.
                   PacketListField("records", [], EncapsulatedPkt, max_count=65535)]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        if self.initial_ttl is None:
            ttls = [r.ttl for r in self.records if isinstance(r, EncapsulatedPkt)]
            p = bytes([max(ttls, default=0)]) + p[1:]
        return p + pay


bind_layers(IP, MplexHdr, proto=PROTO_MPLEX)


def mplex_datagram(records: list[EncapsulatedPkt], *, group: int = MPLEX_GROUP,
                   options: list | None = None, **fields) -> IP:
    """An MplexPkt as a bundling node builds it (section 3.1).

    initialTTL and the outer TTL are both the largest record TTL and DF is set, unless
    given; `fields` go to IP (src, dst, ttl, id, ...) or MplexHdr (the delay fields).
    """
    hdr_names = {f.name for f in MplexHdr.fields_desc}
    hdr = {k: fields.pop(k) for k in list(fields) if k in hdr_names}
    initial = hdr.setdefault("initial_ttl", max((r.ttl for r in records), default=0))
    fields.setdefault("ttl", initial)
    fields.setdefault("flags", "DF")
    if options is None:
        options = [IPOption_Concast(group=group)]
    return IP(options=options, **fields) / MplexHdr(records=records, **hdr)


def mplex_records(pkt: Packet | bytes) -> list[EncapsulatedPkt]:
    """The records of an MplexPkt (a decoded packet or raw IPv4 bytes); [] if it is not one."""
    if isinstance(pkt, (bytes, bytearray)):
        pkt = IP(bytes(pkt))
    if MplexHdr not in pkt:
        return []
    return [r for r in pkt[MplexHdr].records if isinstance(r, EncapsulatedPkt)]


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
    from .validate import classify     # here, not at the top: validate imports this module
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
