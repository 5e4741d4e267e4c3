#!/usr/bin/env python3
"""Generate tests/vectors/mtp.json from docs/transport.md ("MTP"), by hand.

Packed with `struct` straight from the header diagram, without Scapy or any project code:
the Rust decoder (hosts/transport/tests/mtp_vectors.rs) and the Scapy layer
(scripts/concast/scapy/mtp.py, tests/unit/test_mtp_scapy.py) are both checked against these bytes.

Run: python3 tests/vectors/mtp_generate.py   (rewrites mtp.json; --check compares)
"""
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

OUT = Path(__file__).with_name("mtp.json")

MAGIC, VERSION = 0xC9, 1
REQUEST, REPLY = 1, 2
NOPAYLOAD, END, STREAM, ERROR, CHANNEL = 0x01, 0x02, 0x04, 0x08, 0x10
TXID = 0x1A2B3C4D


def header(kind: int, *, flags: int = 0, channel: int = 0, txid: int = TXID, offset: int = 0,
           length: int = 0, namelen: int = 0, total: int = 0, stamp: int = 0,
           magic: int = MAGIC, version: int = VERSION) -> bytes:
    return struct.pack("!BBBBIIHHII", magic, (version << 4) | kind, flags, channel, txid,
                       offset, length, namelen, total, stamp)


def vector(name: str, raw: bytes, note: str, *, error: str | None = None, **fields) -> dict:
    return {"name": name, "kind": "mtp", "valid": error is None, "error": error, "note": note,
            "hex": raw.hex(), "fields": fields}


def valid(name: str, note: str, kind: int, body: bytes = b"", **f) -> dict:
    raw = header(kind, **f) + body
    full = {"type": kind, "flags": 0, "channel": 0, "txid": TXID, "offset": 0, "length": 0,
            "namelen": 0, "total": 0, "stamp": 0, **f, "body_hex": body.hex()}
    return vector(name, raw, note, **full)


PAYLOAD = bytes(range(0x40, 0x50))
NAME = b"size:1000000"


def vectors() -> list[dict]:
    v = [
        valid("request_first", "first request of a transaction: 1400 bytes from offset 0",
              REQUEST, NAME, offset=0, length=1400, namelen=len(NAME), stamp=0x00000001),
        valid("request_size_only", "payload suppressed (size-only, or its channel suppressed)",
              REQUEST, b"video/clip7", flags=NOPAYLOAD, channel=2, offset=0, length=1400,
              namelen=11, stamp=0xFFFFFFFF),
        valid("request_repeat_high_offset", "a repeat deep into an object, new stamp",
              REQUEST, NAME, channel=1, offset=0xFFFFF000, length=256, namelen=len(NAME),
              stamp=0x80000000),
        valid("reply_middle", "16 payload bytes in the middle of a 100000-byte object",
              REPLY, PAYLOAD, offset=1400, length=16, total=100000, stamp=0x00000002),
        valid("reply_end", "the last 16 bytes: END set, offset + length = total",
              REPLY, PAYLOAD, flags=END, offset=99984, length=16, total=100000, stamp=7),
        valid("reply_suppressed", "payload suppressed: length says what would have come, no body",
              REPLY, flags=NOPAYLOAD | END, channel=2, offset=4200, length=800, total=5000,
              stamp=9),
        valid("reply_stream", "a streamed object still growing: STREAM, total 0",
              REPLY, PAYLOAD[:8], flags=STREAM, offset=65536, length=8, stamp=3),
        valid("reply_stream_not_yet", "streamed bytes not there yet: empty STREAM reply",
              REPLY, flags=STREAM, offset=131072, length=0, stamp=4),
        valid("reply_error", "the server refuses; the body is the reason",
              REPLY, b'no object named "x"', flags=ERROR, length=19, stamp=1),
        valid("reply_empty_object", "an object of 0 bytes: END at offset 0",
              REPLY, flags=END, offset=0, length=0, total=0, stamp=5),
        valid("request_response_limit",
              "a subrequest with a response limit (ch. V Mechanisms): up to 8192 bytes from 4096, "
              "in datagrams of at most 1024 (the Total field of a request)",
              REQUEST, NAME, offset=4096, length=1024, namelen=len(NAME), total=8192, stamp=11),
        valid("reply_server_limit",
              "one datagram of a limited request's response, announcing the server's response "
              "limit of 2500 bytes per request (the Name length field of a reply)",
              REPLY, PAYLOAD, offset=5120, length=16, namelen=2500, total=100000, stamp=11),
        valid("request_nameless", "a subrequest without its name: its channel names the object "
              "(ch. V Payload Suppression)", REQUEST, channel=9, offset=8192, length=1024, total=4096,
              stamp=12),
        valid("reply_channel", "the channel names the object: later subrequests may leave the name out",
              REPLY, PAYLOAD, flags=CHANNEL, channel=9, offset=1024, length=16, total=100000, stamp=12),
        valid("reply_channel_error", "a name-less request whose channel names nothing (ERR_APP_CHANNEL): "
              "ERROR and CHANNEL", REPLY, b"channel 4 names no object", flags=ERROR | CHANNEL, channel=4,
              length=25, stamp=13),
    ]
    good_req = header(REQUEST, length=1400, namelen=len(NAME), stamp=1) + NAME
    bad = [
        ("short", good_req[:23], "short", "23 bytes: shorter than the header"),
        ("empty", b"", "short", "nothing at all"),
        ("bad_magic", b"\xc7" + good_req[1:], "magic", "CTP's magic, not MTP's"),
        ("bad_version", header(REQUEST, version=2, length=1, namelen=0), "version", "version 2"),
        ("bad_type", header(3, length=0), "type", "type 3 is not defined"),
        ("request_with_end", header(REQUEST, flags=END, length=10), "flags", "END only in replies"),
        ("reply_reserved_flag", header(REPLY, flags=0x20, length=0), "flags", "flag 0x20 is reserved"),
        ("request_limit_without_size", header(REQUEST, length=0, total=5), "field",
         "a response limit needs a datagram size (Length) above 0"),
        ("request_name_too_long", header(REQUEST, length=10, namelen=1025) + b"n" * 1025, "field",
         "names are at most 1024 bytes"),
        ("reply_server_limit_no_body", header(REPLY, namelen=1, length=0) + b"x", "length",
         "a reply's Name length is the server's limit, not a name: the byte after is extra"),
        ("stream_with_total", header(REPLY, flags=STREAM, length=0, total=9), "field",
         "a streamed reply has total 0"),
        ("reply_truncated", header(REPLY, length=16, total=100000, offset=1400) + PAYLOAD[:15], "length",
         "header says 16 payload bytes, 15 follow"),
        ("reply_trailing", header(REPLY, length=16, total=100000, offset=1400) + PAYLOAD + b"\0", "length",
         "one byte past the payload"),
        ("suppressed_with_body", header(REPLY, flags=NOPAYLOAD, length=4, total=10) + b"abcd", "length",
         "a suppressed reply has no body"),
        ("request_name_truncated", header(REQUEST, length=10, namelen=5) + b"abcd", "length",
         "name length 5, 4 bytes follow"),
    ]
    v += [vector(n, raw, note, error=err) for n, raw, err, note in bad]
    return v


def main() -> int:
    doc = {"spec": "docs/transport.md#mtp", "count": 0, "vectors": vectors()}
    doc["count"] = len(doc["vectors"])
    text = json.dumps(doc, indent=1) + "\n"
    if "--check" in sys.argv:
        if OUT.read_text() != text:
            print(f"{OUT} is stale: run {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {doc['count']} vectors to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
