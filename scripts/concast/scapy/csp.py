"""The Concast Signalling Protocol (docs/protocol.md section 2): one layer per header.

`CSP` is the 16-byte common header, bound to IPv4 protocol 253; the body layers are bound to
it by type, so `IP(raw)` picks the right body and `CSP()/CSP_Join()` fills `type` itself.
"""
from scapy.fields import (BitField, ByteEnumField, ByteField, ConditionalField, IntField, IPField,
                          ShortEnumField, ShortField, StrField, XStrFixedLenField)
from scapy.layers.inet import IP, IPOption_Router_Alert
from scapy.packet import Packet, bind_layers

from .ipv4 import raw_inside_fragments

PROTO_CSP = 253
CSP_HEADER_LEN = 16
CHUNK_SIZE = 1024
MAX_SPEC_SIZE = 1 << 20
MAX_REASON_LEN = 200

CSP_TYPES = {1: "JOIN", 2: "JOIN_ACK", 3: "REFRESH", 4: "LEAVE", 5: "SPEC_REQUEST",
             6: "SPEC_CHUNK", 7: "SPEC_UPDATE", 8: "ERROR"}
CSP_ERRORS = {1: "NO_SPEC", 2: "SPEC_REJECTED", 3: "UNKNOWN_FLOW", 4: "SPEC_NOT_FOUND",
              5: "MALFORMED", 6: "FLOW_QUARANTINED", 7: "RESOURCE_LIMIT"}


def _hash(name: str = "spec_hash") -> XStrFixedLenField:
    """A SHA-256 of a merge spec (all zero in a JOIN: the joiner holds none)."""
    return XStrFixedLenField(name, bytes(32), 32)


class CSP(Packet):
    """Common header. `length` (header + body) is filled in when left None.

    The default type is LEAVE, the one message with no body; with a body layer on top the
    type follows the body class. On decode the payload is cut at `length`, so trailing
    bytes show as Padding rather than being read as body; inside a fragment it is Raw.
    """
    name = "Concast Signalling Protocol"
    dispatch_hook = raw_inside_fragments
    fields_desc = [ByteField("version", 1),
                   ByteEnumField("type", 4, CSP_TYPES),
                   ShortField("length", None),
                   IntField("group", 0),
                   IPField("receiver", "0.0.0.0"),
                   IntField("seq", 0)]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        if self.length is None:
            p = p[:2] + (len(p) + len(pay)).to_bytes(2, "big") + p[4:]
        return p + pay

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        if self.length is None or self.length < CSP_HEADER_LEN:
            return s, b""
        n = self.length - CSP_HEADER_LEN
        return s[:n], s[n:]


class CSP_Join(Packet):
    """JOIN body (also REFRESH): hold time, flow selector, hash of the spec the joiner holds."""
    name = "CSP JOIN"
    fields_desc = [ShortField("hold_time", 0),
                   ByteEnumField("selector_proto", 0, {0: "any", 6: "tcp", 17: "udp"}),
                   BitField("S", 0, 1),          # reads signature trailers (2.2, 2.9)
                   BitField("reserved1", 0, 7),
                   ShortField("selector_dport", 0),
                   ShortField("reserved2", 0),
                   _hash()]


class CSP_Refresh(CSP_Join):
    """REFRESH: same body as JOIN (an unknown REFRESH is taken as a JOIN)."""
    name = "CSP REFRESH"


SIG_TRAILER_LEN = 32 + 64


class _Signable(Packet):
    """A body that may end in R's signature trailer (section 2.9): `spec_key` (32 bytes)
    then `signature` (64). Both None: unsigned. On decode the trailer is read when the body
    is exactly its fixed size plus 96."""
    FIXED = 0

    def _signed(self) -> bool:
        # Raw field values: reading self.spec_key would ask this condition again.
        return self.fields.get("spec_key") is not None or self.__dict__.get("_trailer", False)

    def pre_dissect(self, s: bytes) -> bytes:
        self._trailer = len(s) == self.FIXED + SIG_TRAILER_LEN
        return s


def _trailer() -> list:
    return [ConditionalField(XStrFixedLenField("spec_key", None, 32), _Signable._signed),
            ConditionalField(XStrFixedLenField("signature", None, 64), _Signable._signed)]


class CSP_JoinAck(_Signable):
    """JOIN_ACK body: the accepted hold time, the path MTU toward R (0 = not known) and
    the spec now in force, optionally signed by R."""
    name = "CSP JOIN_ACK"
    FIXED = 40
    fields_desc = [ShortField("hold_time", 0),
                   ShortField("path_mtu", 0),
                   IntField("spec_size", 0),
                   _hash(), *_trailer()]


class CSP_Leave(Packet):
    """LEAVE has no body; the class exists so `CSP()/CSP_Leave()` reads like the others."""
    name = "CSP LEAVE"
    fields_desc = []


class CSP_SpecRequest(Packet):
    """SPEC_REQUEST body: which spec, which 1024-byte chunk."""
    name = "CSP SPEC_REQUEST"
    fields_desc = [_hash(),
                   ShortField("chunk_index", 0),
                   ShortField("reserved", 0)]


class CSP_SpecChunk(Packet):
    """SPEC_CHUNK body: one chunk of a spec; `data` runs to the end of the message."""
    name = "CSP SPEC_CHUNK"
    fields_desc = [_hash(),
                   IntField("spec_size", 0),
                   ShortField("chunk_index", 0),
                   ShortField("chunk_count", 1),
                   StrField("data", b"")]


class CSP_SpecUpdate(_Signable):
    """SPEC_UPDATE body: the sender replaced its spec with this one, optionally signed by R."""
    name = "CSP SPEC_UPDATE"
    FIXED = 36
    fields_desc = [IntField("spec_size", 0),
                   _hash(), *_trailer()]


class CSP_Error(Packet):
    """ERROR body: code, the type of the message that caused it, a UTF-8 reason."""
    name = "CSP ERROR"
    fields_desc = [ShortEnumField("error_code", 5, CSP_ERRORS),
                   ByteEnumField("offending_type", 0, CSP_TYPES),
                   ByteField("reserved", 0),
                   StrField("reason", b"")]


CSP_BODIES = {1: CSP_Join, 2: CSP_JoinAck, 3: CSP_Refresh, 4: CSP_Leave, 5: CSP_SpecRequest,
              6: CSP_SpecChunk, 7: CSP_SpecUpdate, 8: CSP_Error}

bind_layers(IP, CSP, proto=PROTO_CSP)
for _type, _cls in CSP_BODIES.items():
    bind_layers(CSP, _cls, type=_type)


def csp_datagram(message: Packet, *, options: list | None = None, **ip_fields) -> IP:
    """`message` (a CSP layer) in an IPv4 datagram with the options senders emit, `94 04 00 00`.

    Router Alert is what makes concast-capable routers on the path look at the message.
    """
    if options is None:
        options = [IPOption_Router_Alert()]
    return IP(options=options, **ip_fields) / message
