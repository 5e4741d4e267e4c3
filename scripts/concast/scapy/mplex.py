"""The multiplex packet (docs/protocol.md section 3): MplexHdr and its EncapsulatedPkt records."""
from scapy.fields import (ByteEnumField, ByteField, FieldLenField, IntField, IPField,
                          PacketListField, StrLenField, XByteField, XShortField)
from scapy.layers.inet import IP, IP_PROTOS
from scapy.packet import Packet, bind_layers

from .ipv4 import raw_inside_fragments
from .option import IPOption_Concast

PROTO_MPLEX = 254
MPLEX_GROUP = 1
MPLEX_VERSION = 1          # the MplexHdr Version with a TOS byte in each record header


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
    so `IP(raw)[MplexHdr].records` is every record. Inside a fragment it is Raw.
    """
    name = "MplexHdr"
    dispatch_hook = raw_inside_fragments
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
