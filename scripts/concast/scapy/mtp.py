"""The MTP header (docs/transport.md, "MTP"), bound to UDP port 7710, and its validity check.

Import it as `concast.scapy.mtp` (importing registers the UDP binding). `decode_mtp(raw)`
decodes any bytes without raising (Raw when shorter than the header); `mtp_error(raw)` gives the spec's verdict: None, or the name of the first rule
broken, in the order the spec lists them (the Rust decoder uses the same names).
"""
import struct

from scapy.fields import (BitEnumField, BitField, ByteField, FlagsField, IntField,
                          ShortField, StrLenField, XByteField, XIntField)
from scapy.layers.inet import UDP
from scapy.packet import Packet, Raw, bind_layers

MTP_PORT = 7710
MAGIC, VERSION = 0xC9, 1
REQUEST, REPLY = 1, 2
HEADER_LEN = 24
MAX_NAME = 1024
NOPAYLOAD, END, STREAM, ERROR, CHANNEL = 0x01, 0x02, 0x04, 0x08, 0x10
FLAG_NAMES = ["NOPAYLOAD", "END", "STREAM", "ERROR", "CHANNEL"]
ERRORS = ("short", "magic", "version", "type", "flags", "field", "length")


def _body_len(p: "MTP") -> int:
    if p.type == REQUEST:
        return p.namelen or 0
    if int(p.flags) & NOPAYLOAD:
        return 0
    return p.length or 0


class MTP(Packet):
    """One MTP datagram: the 24-byte header and its body (a request's object name, a reply's
    payload or refusal reason). Left None, `namelen` (request) and `length` (reply) are the
    body's length."""
    name = "MTP"
    fields_desc = [XByteField("magic", MAGIC),
                   BitField("version", VERSION, 4),
                   BitEnumField("type", REQUEST, 4, {REQUEST: "request", REPLY: "reply"}),
                   FlagsField("flags", 0, 8, FLAG_NAMES),
                   ByteField("channel", 0),
                   XIntField("txid", 0),
                   IntField("offset", 0),
                   ShortField("length", None),
                   ShortField("namelen", None),
                   IntField("total", 0),
                   IntField("stamp", 0),
                   StrLenField("body", b"", length_from=_body_len)]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        body = len(self.body)
        if self.namelen is None:
            p = p[:14] + struct.pack("!H", body if self.type == REQUEST else 0) + p[16:]
        if self.length is None:
            p = p[:12] + struct.pack("!H", 0 if self.type == REQUEST else body) + p[14:]
        return p + pay


bind_layers(UDP, MTP, dport=MTP_PORT)
bind_layers(UDP, MTP, sport=MTP_PORT)


def decode_mtp(raw: bytes) -> Packet:
    """MTP(raw), or Raw(raw) when the bytes are too short for Scapy to dissect the header."""
    try:
        return MTP(raw)
    except Exception:   # Scapy raises struct.error on a short fixed field
        return Raw(raw)


def mtp_error(raw: bytes) -> str | None:
    """The first rule of the spec that `raw` breaks, or None when it is a valid datagram."""
    if len(raw) < HEADER_LEN:
        return "short"
    magic, vt, flags, _ch, _tx, _off, length, namelen, total, _st = struct.unpack(
        "!BBBBIIHHII", raw[:HEADER_LEN])
    if magic != MAGIC:
        return "magic"
    if vt >> 4 != VERSION:
        return "version"
    kind = vt & 0x0F
    if kind not in (REQUEST, REPLY):
        return "type"
    allowed = NOPAYLOAD if kind == REQUEST else NOPAYLOAD | END | STREAM | ERROR | CHANNEL
    if flags & ~allowed:
        return "flags"
    # a request's total is its response limit (needs a datagram size); a reply's namelen is
    # the server's response limit (docs/transport.md, "The exchange")
    if kind == REQUEST and ((total != 0 and length == 0) or namelen > MAX_NAME):
        return "field"
    if kind == REPLY and flags & STREAM and total != 0:
        return "field"
    if kind == REQUEST:
        want = namelen
    else:
        want = 0 if flags & NOPAYLOAD else length
    if len(raw) - HEADER_LEN != want:
        return "length"
    return None
