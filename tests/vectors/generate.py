#!/usr/bin/env python3
"""Generate tests/vectors/vectors.json from docs/protocol.md, by hand.

Every vector is packed with `struct` straight from the spec's diagrams, on purpose
without Scapy or any project code: the Rust wire crate, the Scapy layers and the
Wireshark dissector are all checked against these bytes, so they must not share
an implementation with any of them.

Signatures (docs/protocol.md 2.9) come from the `cryptography` package's Ed25519, an
implementation independent of the Rust side's ed25519-dalek; Ed25519 is deterministic, so
the bytes are stable.

Run: python3 tests/vectors/generate.py   (rewrites vectors.json; --check compares)
"""
from __future__ import annotations

import hashlib
import json
import socket
import struct
import sys
from pathlib import Path

from concast.inet import checksum

OUT = Path(__file__).with_name("vectors.json")

SENDER, RECEIVER, ROUTER = "10.0.1.1", "10.0.9.9", "10.0.5.1"
CONCAST_OPT, RA_OPT = 0x9E, 0x94
PROTO_UDP, PROTO_TCP, PROTO_CSP, PROTO_MPLEX = 17, 6, 253, 254
CSP_TYPES = {1: "JOIN", 2: "JOIN_ACK", 3: "REFRESH", 4: "LEAVE", 5: "SPEC_REQUEST",
             6: "SPEC_CHUNK", 7: "SPEC_UPDATE", 8: "ERROR"}
CHUNK = 1024

# The receiver's signing key in the vectors: a fixed, published secret (test use only).
SIGNER_SECRET = bytes(range(0x40, 0x60))
SIG_CONTEXT = b"concast-spec-v1\0"


def signed_message(receiver: str, group: int, size: int, h: bytes) -> bytes:
    """What R signs (2.9): context, R, G, spec size, spec hash."""
    return SIG_CONTEXT + ip_bytes(receiver) + struct.pack("!II", group, size) + h


def ed25519(message: bytes) -> tuple[bytes, bytes]:
    """(public key, signature) of SIGNER_SECRET over `message`."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    k = Ed25519PrivateKey.from_private_bytes(SIGNER_SECRET)
    return k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw), k.sign(message)


SIGNING: list[dict] = []


def trailer(receiver: str, group: int, size: int, h: bytes) -> tuple[bytes, dict]:
    """The 96-byte trailer R appends, and the fields a decoder must show for it."""
    m = signed_message(receiver, group, size, h)
    key, sig = ed25519(m)
    SIGNING.append({"receiver": receiver, "group": group, "spec_size": size,
                    "spec_hash": h.hex(), "message": m.hex(), "spec_key": key.hex(),
                    "signature": sig.hex()})
    return key + sig, {"spec_key": key.hex(), "signature": sig.hex()}


# A made-up "spec" so that hashes and chunks are real.
SPEC = bytes((i * 7 + 3) & 0xFF for i in range(2500))
SPEC_HASH = hashlib.sha256(SPEC).digest()


def ip_bytes(addr: str) -> bytes:
    return socket.inet_aton(addr)


def ipv4(payload: bytes, *, proto: int, options: bytes = b"", src: str = SENDER,
         dst: str = RECEIVER, ttl: int = 64, flags_frag: int = 0x4000, ident: int = 0x1234,
         ihl: int | None = None, total_length: int | None = None, version: int = 4) -> bytes:
    """An IPv4 datagram; ihl/total_length/version can be forced wrong for malformed vectors."""
    if ihl is None:
        assert len(options) % 4 == 0, "pad options to a multiple of 4"
        ihl = 5 + len(options) // 4
    if total_length is None:
        total_length = 20 + len(options) + len(payload)
    hdr = struct.pack("!BBHHHBBH4s4s", (version << 4) | ihl, 0, total_length, ident,
                      flags_frag, ttl, proto, 0, ip_bytes(src), ip_bytes(dst))
    hdr = hdr[:10] + struct.pack("!H", checksum(hdr + options)) + hdr[12:]
    return hdr + options + payload


def concast_opt(group: int, length: int = 6) -> bytes:
    return struct.pack("!BBI", CONCAST_OPT, length, group)


RA = bytes([RA_OPT, 4, 0, 0])
EOL2 = b"\0\0"


def udp(payload: bytes, sport: int = 5000, dport: int = 6000) -> bytes:
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def tcp_ack(sport: int, dport: int, seq: int, ack: int) -> bytes:
    """A 20-byte TCP header with only ACK set (checksum left 0: not checked by concast)."""
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, 0x10, 502, 0, 0)


# ---------------------------------------------------------------- CSP

def csp(msg_type: int, body: bytes, *, group: int = 7, receiver: str = RECEIVER,
        seq: int = 0x0A0B0C0D, version: int = 1, length: int | None = None) -> bytes:
    if length is None:
        length = 16 + len(body)
    return struct.pack("!BBHI4sI", version, msg_type, length, group, ip_bytes(receiver),
                       seq) + body


def join_body(hold: int = 30, sel_proto: int = PROTO_UDP, sel_dport: int = 6000,
              spec_hash: bytes = bytes(32), flags: int = 0) -> bytes:
    return struct.pack("!HBBHH", hold, sel_proto, flags, sel_dport, 0) + spec_hash


def join_ack_body(hold: int = 30, size: int = len(SPEC), h: bytes = SPEC_HASH,
                  path_mtu: int = 0) -> bytes:
    return struct.pack("!HHI", hold, path_mtu, size) + h


def spec_request_body(index: int, h: bytes = SPEC_HASH) -> bytes:
    return h + struct.pack("!HH", index, 0)


def spec_chunk_body(index: int, *, size: int = len(SPEC), count: int | None = None,
                    data: bytes | None = None, h: bytes = SPEC_HASH) -> bytes:
    if count is None:
        count = -(-size // CHUNK)
    if data is None:
        data = SPEC[index * CHUNK:(index + 1) * CHUNK]
    return h + struct.pack("!IHH", size, index, count) + data


def spec_update_body(size: int = len(SPEC), h: bytes = SPEC_HASH) -> bytes:
    return struct.pack("!I", size) + h


def error_body(code: int, offending: int, reason: bytes) -> bytes:
    return struct.pack("!HBB", code, offending, 0) + reason


def csp_dgram(message: bytes, *, options: bytes = RA, src: str = SENDER,
              dst: str = RECEIVER, **kw) -> bytes:
    return ipv4(message, proto=PROTO_CSP, options=options, src=src, dst=dst, **kw)


# ---------------------------------------------------------------- MplexPkt

MPLEX_VERSION = 1


def mplex_hdr(initial_ttl: int, max_total: int, so_far: int, max_local: int,
              version: int = MPLEX_VERSION) -> bytes:
    return struct.pack("!BB2xIII", initial_ttl, version, max_total, so_far, max_local)


def record(src: str, ttl: int, proto: int, payload: bytes, length: int | None = None,
           tos: int = 0) -> bytes:
    if length is None:
        length = len(payload)
    return struct.pack("!4sBBHB", ip_bytes(src), ttl, proto, length, tos) + payload


def mplex(body: bytes, *, group: int = 1, ttl: int = 62, options: bytes | None = None,
          **kw) -> bytes:
    if options is None:
        options = concast_opt(group) + EOL2
    return ipv4(body, proto=PROTO_MPLEX, options=options, ttl=ttl, src=ROUTER, **kw)


# ---------------------------------------------------------------- vectors

VECTORS: list[dict] = []


def ip_fields(raw: bytes) -> dict:
    ihl = raw[0] & 0x0F
    total = struct.unpack("!H", raw[2:4])[0]
    return {"src": socket.inet_ntoa(raw[12:16]), "dst": socket.inet_ntoa(raw[16:20]),
            "ttl": raw[8], "proto": raw[9], "ihl": ihl, "total_length": total}


def valid(name: str, kind: str, raw: bytes, note: str, **fields) -> None:
    VECTORS.append({"name": name, "kind": kind, "valid": True, "error": None, "note": note,
                    "hex": raw.hex(), "fields": {**ip_fields(raw), **fields}})


def bad(name: str, error: str, raw: bytes, note: str) -> None:
    VECTORS.append({"name": name, "kind": "malformed", "valid": False, "error": error,
                    "note": note, "hex": raw.hex(), "fields": {}})


def csp_fields(t: int, *, group: int = 7, receiver: str = RECEIVER, seq: int = 0x0A0B0C0D,
               **more) -> dict:
    return {"csp_type": t, "csp_type_name": CSP_TYPES[t], "group": group,
            "receiver": receiver, "seq": seq, **more}


def rec_fields(src: str, ttl: int, proto: int, payload: bytes, tos: int = 0) -> dict:
    return {"src": src, "ttl": ttl, "proto": proto, "tos": tos, "payload_len": len(payload),
            "payload_hex": payload.hex()}


def build() -> None:
    data = udp(b"hello concast")
    # --- plain and concast datagrams -------------------------------------------------
    valid("plain_udp", "ipv4", ipv4(data, proto=PROTO_UDP), "no options at all")
    valid("plain_router_alert_only", "ipv4", ipv4(data, proto=PROTO_UDP, options=RA),
          "Router Alert but no Concast ID option: not concast, not CSP")
    valid("concast_udp", "concast",
          ipv4(data, proto=PROTO_UDP, options=concast_opt(7) + EOL2),
          "option first, EOL padding (what concast senders emit)", group=7)
    valid("concast_after_nops", "concast",
          ipv4(data, proto=PROTO_UDP, options=b"\1\1" + concast_opt(7)),
          "two NOPs before the option", group=7)
    valid("concast_after_router_alert", "concast",
          ipv4(data, proto=PROTO_UDP, options=RA + concast_opt(8) + EOL2),
          "Router Alert, then the option", group=8)
    valid("concast_before_router_alert", "concast",
          ipv4(data, proto=PROTO_UDP, options=concast_opt(9) + RA + EOL2),
          "the option, then Router Alert", group=9)
    rr = bytes([0x07, 7, 4]) + bytes(4)          # record route with one empty slot
    valid("concast_after_record_route", "concast",
          ipv4(data, proto=PROTO_UDP, options=b"\1" + rr + concast_opt(10) + EOL2),
          "NOP, Record Route (unknown to concast, skipped whole), then the option", group=10)
    valid("concast_at_end_of_40_bytes", "concast",
          ipv4(data, proto=PROTO_UDP, options=b"\1" * 34 + concast_opt(11)),
          "a full 40-byte options area, the option in its last 6 bytes", group=11)
    valid("concast_after_eol_is_ignored", "ipv4",
          ipv4(data, proto=PROTO_UDP, options=b"\0\0" + concast_opt(12)),
          "an option after EOL is padding: the datagram is not concast")
    valid("concast_group_max", "concast",
          ipv4(data, proto=PROTO_UDP, options=concast_opt(0xFFFFFFFF) + EOL2),
          "largest group ID", group=0xFFFFFFFF)
    valid("concast_group_zero", "concast",
          ipv4(data, proto=PROTO_UDP, options=concast_opt(0) + EOL2), "group 0", group=0)
    valid("concast_tcp", "concast",
          ipv4(tcp_ack(80, 40000, 1, 2), proto=PROTO_TCP, options=concast_opt(7) + EOL2),
          "a TCP segment in a concast datagram", group=7)
    raw = ipv4(data, proto=PROTO_UDP, options=concast_opt(7) + EOL2)
    valid("concast_ethernet_padding", "concast", raw + bytes(6),
          "bytes after the total length (Ethernet padding) are ignored", group=7)
    valid("concast_fragment", "concast",
          ipv4(data, proto=PROTO_UDP, options=concast_opt(7) + EOL2, flags_frag=0x2000),
          "MF set: still a concast datagram (never merged by multiplex)", group=7)
    valid("concast_ttl_1", "concast",
          ipv4(data, proto=PROTO_UDP, options=concast_opt(7) + EOL2, ttl=1),
          "TTL 1", group=7)

    # --- malformed IPv4 ----------------------------------------------------------------
    good = ipv4(data, proto=PROTO_UDP, options=concast_opt(7) + EOL2)
    bad("truncated_10_bytes", "truncated", good[:10], "shorter than an IPv4 header")
    bad("empty", "truncated", b"", "no bytes at all")
    bad("bad_version_6", "bad_version", ipv4(data, proto=PROTO_UDP, version=6),
        "version field 6")
    bad("bad_ihl_4", "bad_ihl", ipv4(data, proto=PROTO_UDP, ihl=4), "IHL 4")
    bad("header_overflow", "header_overflow", good[:24],
        "IHL says 28 bytes of header, 24 present")
    bad("total_length_below_header", "bad_total_length",
        ipv4(data, proto=PROTO_UDP, options=concast_opt(7) + EOL2, total_length=24),
        "total length 24 < IHL*4 = 28")
    bad("total_length_past_end", "bad_total_length",
        ipv4(data, proto=PROTO_UDP, options=concast_opt(7) + EOL2,
             total_length=28 + len(data) + 1),
        "total length one byte more than present")
    bad("option_truncated_no_length", "option_truncated",
        ipv4(data, proto=PROTO_UDP, options=b"\1\1\1\x9e"),
        "the last byte of the area is an option type with no length byte")
    bad("option_length_1", "option_bad_length",
        ipv4(data, proto=PROTO_UDP, options=bytes([0x07, 1, 0, 0])),
        "an option whose length is 1")
    bad("option_length_0", "option_bad_length",
        ipv4(data, proto=PROTO_UDP, options=bytes([0x9E, 0, 0, 0]) + concast_opt(7) + EOL2),
        "an option whose length is 0")
    bad("concast_option_overflows_ihl", "option_overflow",
        ipv4(data, proto=PROTO_UDP, options=bytes([0x9E, 6, 0, 7])),
        "the option needs 6 bytes, the area holds 4")
    bad("other_option_overflows_ihl", "option_overflow",
        ipv4(data, proto=PROTO_UDP, options=bytes([0x44, 12, 5, 0]) + bytes(4)),
        "a Timestamp option of length 12 in an 8-byte area")
    bad("concast_option_length_8", "concast_option_bad_length",
        ipv4(data, proto=PROTO_UDP, options=concast_opt(7, length=8) + EOL2),
        "Concast ID option with length 8")
    bad("concast_option_length_4", "concast_option_bad_length",
        ipv4(data, proto=PROTO_UDP, options=bytes([0x9E, 4, 0, 7])),
        "Concast ID option with length 4")
    bad("concast_option_duplicate", "concast_option_duplicate",
        ipv4(data, proto=PROTO_UDP, options=concast_opt(7) + concast_opt(8)),
        "two Concast ID options")
    bad("router_alert_length_3", "option_bad_length",
        ipv4(data, proto=PROTO_UDP, options=bytes([0x94, 3, 0, 0])),
        "Router Alert with length 3")

    # --- CSP -----------------------------------------------------------------------------
    h = SPEC_HASH.hex()
    valid("csp_join", "csp", csp_dgram(csp(1, join_body())), "JOIN, joiner holds no spec",
          **csp_fields(1, hold_time=30, selector_proto=17, selector_dport=6000, S=0,
                       spec_hash="00" * 32))
    valid("csp_join_s_flag", "csp", csp_dgram(csp(1, join_body(flags=0x80))),
          "JOIN with the S flag (byte 3 = 0x80): the joiner reads signature trailers (2.2, 2.9)",
          **csp_fields(1, hold_time=30, selector_proto=17, selector_dport=6000, S=1,
                       spec_hash="00" * 32))
    valid("csp_join_ack", "csp",
          csp_dgram(csp(2, join_ack_body()), src=RECEIVER, dst=SENDER),
          "JOIN_ACK from a node that knows no path MTU (0, as before the field existed)",
          **csp_fields(2, hold_time=30, path_mtu=0, spec_size=len(SPEC), spec_hash=h))
    valid("csp_join_ack_path_mtu_1000", "csp",
          csp_dgram(csp(2, join_ack_body(path_mtu=1000)), src=ROUTER, dst=SENDER),
          "JOIN_ACK: the smallest MTU toward R is 1000",
          **csp_fields(2, hold_time=30, path_mtu=1000, spec_size=len(SPEC), spec_hash=h))
    valid("csp_join_ack_path_mtu_65535", "csp",
          csp_dgram(csp(2, join_ack_body(hold=90, path_mtu=65535)), src=ROUTER, dst=SENDER),
          "JOIN_ACK: the largest path MTU the field carries",
          **csp_fields(2, hold_time=90, path_mtu=65535, spec_size=len(SPEC), spec_hash=h))
    signed, sig_fields = trailer(RECEIVER, 7, len(SPEC), SPEC_HASH)
    valid("csp_join_ack_signed", "csp",
          csp_dgram(csp(2, join_ack_body() + signed), src=RECEIVER, dst=SENDER),
          "JOIN_ACK with R's signature trailer: public key, then signature over "
          "(context, R, G, size, hash)",
          **csp_fields(2, hold_time=30, path_mtu=0, spec_size=len(SPEC), spec_hash=h,
                       **sig_fields))
    valid("csp_spec_update_signed", "csp",
          csp_dgram(csp(7, spec_update_body() + signed), src=RECEIVER, dst=ROUTER),
          "SPEC_UPDATE with the same trailer (same flow and spec, so the same signature)",
          **csp_fields(7, spec_size=len(SPEC), spec_hash=h, **sig_fields))
    other, _ = trailer(RECEIVER, 8, len(SPEC), SPEC_HASH)
    valid("csp_join_ack_signed_for_group_8", "csp",
          csp_dgram(csp(2, join_ack_body() + other), src=ROUTER, dst=SENDER),
          "well-formed, but signed for group 8 while the header says 7: parsers accept it, "
          "CSP refuses it (SPEC_REJECTED)",
          **csp_fields(2, hold_time=30, path_mtu=0, spec_size=len(SPEC), spec_hash=h,
                       spec_key=other[:32].hex(), signature=other[32:].hex()))
    valid("csp_refresh", "csp",
          csp_dgram(csp(3, join_body(hold=90, sel_proto=254, sel_dport=0,
                                     spec_hash=SPEC_HASH, flags=0x80), group=1)),
          "REFRESH for the multiplex group, selector proto 254, S flag set",
          **csp_fields(3, group=1, hold_time=90, selector_proto=254, selector_dport=0,
                       S=1, spec_hash=h))
    valid("csp_leave", "csp", csp_dgram(csp(4, b"")), "LEAVE has no body", **csp_fields(4))
    valid("csp_spec_request", "csp", csp_dgram(csp(5, spec_request_body(2))),
          "SPEC_REQUEST for chunk 2", **csp_fields(5, spec_hash=h, chunk_index=2))
    valid("csp_spec_chunk_first", "csp",
          csp_dgram(csp(6, spec_chunk_body(0)), src=RECEIVER, dst=SENDER),
          "first of 3 chunks: 1024 bytes of data",
          **csp_fields(6, spec_hash=h, spec_size=len(SPEC), chunk_index=0, chunk_count=3,
                       data_len=1024))
    valid("csp_spec_chunk_last", "csp",
          csp_dgram(csp(6, spec_chunk_body(2)), src=RECEIVER, dst=SENDER),
          "last of 3 chunks: 452 bytes of data",
          **csp_fields(6, spec_hash=h, spec_size=len(SPEC), chunk_index=2, chunk_count=3,
                       data_len=452))
    valid("csp_spec_update", "csp",
          csp_dgram(csp(7, spec_update_body()), src=RECEIVER, dst=ROUTER), "SPEC_UPDATE",
          **csp_fields(7, spec_size=len(SPEC), spec_hash=h))
    reason = b"no merge spec for group 7"
    valid("csp_error_no_spec", "csp",
          csp_dgram(csp(8, error_body(1, 1, reason)), src=RECEIVER, dst=SENDER),
          "ERROR NO_SPEC answering a JOIN",
          **csp_fields(8, error_code=1, offending_type=1, reason=reason.decode()))
    valid("csp_error_empty_reason", "csp",
          csp_dgram(csp(8, error_body(6, 0, b"")), src=ROUTER, dst=SENDER),
          "ERROR FLOW_QUARANTINED with no reason text",
          **csp_fields(8, error_code=6, offending_type=0, reason=""))
    valid("csp_router_alert_after_nops", "csp",
          csp_dgram(csp(4, b""), options=b"\1\1\1\1" + RA), "Router Alert after 4 NOPs",
          **csp_fields(4))
    valid("csp_with_concast_option", "csp",
          csp_dgram(csp(4, b""), options=RA + concast_opt(7) + EOL2),
          "a Concast ID option on a CSP datagram is allowed and ignored", **csp_fields(4))

    valid("csp_later_fragment_not_checked", "ipv4",
          csp_dgram(csp(1, join_body())[:24], flags_frag=0x2000 | 5),
          "a CSP fragment (offset 40 bytes) is not checked as CSP: forwarded as it is")

    bad("csp_missing_router_alert", "csp_missing_router_alert",
        csp_dgram(csp(1, join_body()), options=b""), "protocol 253 without Router Alert")
    bad("csp_truncated_header", "csp_truncated", csp_dgram(csp(4, b"")[:10]),
        "10 bytes of CSP")
    bad("csp_length_past_payload", "csp_truncated",
        csp_dgram(csp(1, join_body(), length=60)), "Length 60, payload 56")
    bad("csp_bad_version_2", "csp_bad_version", csp_dgram(csp(1, join_body(), version=2)),
        "version 2")
    bad("csp_unknown_type_9", "csp_unknown_type", csp_dgram(csp(9, b"")), "type 9")
    bad("csp_unknown_type_0", "csp_unknown_type", csp_dgram(csp(0, b"")), "type 0")
    bad("csp_join_short_body", "csp_bad_length", csp_dgram(csp(1, join_body()[:36])),
        "JOIN with a 36-byte body")
    bad("csp_leave_with_body", "csp_bad_length", csp_dgram(csp(4, bytes(4))),
        "LEAVE with 4 bytes of body")
    bad("csp_trailing_bytes", "csp_bad_length",
        csp_dgram(csp(1, join_body(), length=56) + bytes(4)),
        "Length 56 but 60 bytes of payload")
    bad("csp_chunk_index_past_count", "csp_chunk_out_of_range",
        csp_dgram(csp(6, spec_chunk_body(3, data=b"x"))), "chunk index 3 of 3 chunks")
    bad("csp_chunk_count_mismatch", "csp_chunk_out_of_range",
        csp_dgram(csp(6, spec_chunk_body(0, count=4))), "size 2500 needs 3 chunks, says 4")
    bad("csp_chunk_size_zero", "csp_chunk_out_of_range",
        csp_dgram(csp(6, spec_chunk_body(0, size=0, count=0, data=b""))), "spec size 0")
    bad("csp_chunk_size_too_big", "csp_chunk_out_of_range",
        csp_dgram(csp(6, spec_chunk_body(0, size=(1 << 20) + 1, data=SPEC[:1024]))),
        "spec size 1 MiB + 1")
    bad("csp_chunk_short_data", "csp_bad_length",
        csp_dgram(csp(6, spec_chunk_body(0, data=SPEC[:1000]))),
        "a chunk that is not the last with 1000 bytes of data")
    bad("csp_chunk_last_long_data", "csp_bad_length",
        csp_dgram(csp(6, spec_chunk_body(2, data=SPEC[2048:] + b"!"))),
        "the last chunk one byte longer than the spec")
    bad("csp_chunk_short_body", "csp_bad_length",
        csp_dgram(csp(6, SPEC_HASH + bytes(4))), "SPEC_CHUNK body of 36 bytes")
    bad("csp_spec_request_index_1024", "csp_chunk_out_of_range",
        csp_dgram(csp(5, spec_request_body(1024))), "chunk index 1024")
    bad("csp_spec_update_size_zero", "csp_chunk_out_of_range",
        csp_dgram(csp(7, spec_update_body(size=0))), "SPEC_UPDATE with size 0")
    bad("csp_join_ack_trailer_short", "csp_bad_length",
        csp_dgram(csp(2, join_ack_body() + signed[:95])),
        "JOIN_ACK body of 135 bytes: neither unsigned (40) nor signed (136)")
    bad("csp_spec_update_trailer_long", "csp_bad_length",
        csp_dgram(csp(7, spec_update_body() + signed + b"\0")),
        "SPEC_UPDATE body of 133 bytes: neither unsigned (36) nor signed (132)")
    bad("csp_error_reason_201", "csp_bad_length",
        csp_dgram(csp(8, error_body(5, 1, b"r" * 201))), "a 201-byte reason")
    bad("csp_error_short_body", "csp_bad_length", csp_dgram(csp(8, b"\0\1")),
        "ERROR body of 2 bytes")
    bad("csp_bad_ipv4_first", "option_truncated",
        csp_dgram(csp(4, b""), options=RA + b"\1\1\1\x9e"),
        "IPv4 option errors come before CSP checks")

    # --- MplexPkt -------------------------------------------------------------------------
    a1, a2, a3 = tcp_ack(40001, 80, 1000, 5000), tcp_ack(40002, 80, 77, 91), tcp_ack(
        40003, 80, 5, 6)
    valid("mplex_one_record", "mplex",
          mplex(mplex_hdr(64, 20000, 0, 5000) + record("10.0.1.1", 64, PROTO_TCP, a1), ttl=64),
          "one TCP ACK, as a sender's multiplex module emits it",
          group=1, initial_ttl=64, version=1, max_total_delay=20000, delayed_so_far=0,
          max_local_delay=5000, records=[rec_fields("10.0.1.1", 64, PROTO_TCP, a1)])
    valid("mplex_three_records", "mplex",
          mplex(mplex_hdr(64, 20000, 1200, 2000)
                + record("10.0.1.1", 63, PROTO_TCP, a1) + record("10.0.1.2", 64, PROTO_TCP, a2)
                + record("10.0.2.7", 60, PROTO_TCP, a3), ttl=62),
          "three ACKs from three senders bundled by a router, two hops travelled",
          group=1, initial_ttl=64, version=1, max_total_delay=20000, delayed_so_far=1200,
          max_local_delay=2000,
          records=[rec_fields("10.0.1.1", 63, PROTO_TCP, a1),
                   rec_fields("10.0.1.2", 64, PROTO_TCP, a2),
                   rec_fields("10.0.2.7", 60, PROTO_TCP, a3)])
    valid("mplex_empty_payload_record", "mplex",
          mplex(mplex_hdr(32, 0, 0, 0) + record("10.0.1.3", 32, 17, b""), ttl=32),
          "a record with PayloadLength 0 is valid; zero delays (zero-delay mode)",
          group=1, initial_ttl=32, version=1, max_total_delay=0, delayed_so_far=0, max_local_delay=0,
          records=[rec_fields("10.0.1.3", 32, 17, b"")])
    valid("mplex_group_42_after_nops", "mplex",
          mplex(mplex_hdr(64, 1000, 999, 1) + record("10.0.1.1", 9, PROTO_UDP, udp(b"x")),
                options=b"\1\1" + concast_opt(42), ttl=60),
          "an MplexPkt for group 42, option after two NOPs",
          group=42, initial_ttl=64, version=1, max_total_delay=1000, delayed_so_far=999,
          max_local_delay=1, records=[rec_fields("10.0.1.1", 9, PROTO_UDP, udp(b"x"))])
    udp_ce = udp(b"media")
    valid("mplex_record_tos", "mplex",
          mplex(mplex_hdr(64, 10000, 300, 1000)
                + record("10.0.1.1", 64, PROTO_TCP, a1, tos=0xB8 | 0b11)
                + record("10.0.1.2", 63, PROTO_UDP, udp_ce, tos=0b10), ttl=63),
          "records keep their TOS byte: DSCP EF with ECN CE (0xBB), then ECT(0) (0x02)",
          group=1, initial_ttl=64, version=1, max_total_delay=10000, delayed_so_far=300,
          max_local_delay=1000,
          records=[rec_fields("10.0.1.1", 64, PROTO_TCP, a1, tos=0xBB),
                   rec_fields("10.0.1.2", 63, PROTO_UDP, udp_ce, tos=0x02)])

    valid("mplex_later_fragment_not_checked", "concast",
          mplex(bytes(12), flags_frag=2),
          "a later fragment of an MplexPkt: a concast datagram, not checked as MplexPkt",
          group=1)

    bad("mplex_missing_concast_option", "mplex_missing_concast_option",
        mplex(mplex_hdr(64, 0, 0, 0) + record("10.0.1.1", 64, 6, a1), options=b""),
        "protocol 254 without the option")
    bad("mplex_truncated_header", "mplex_truncated_header", mplex(mplex_hdr(64, 0, 0, 0)[:10]),
        "10 bytes of MplexHdr")
    bad("mplex_zero_records", "mplex_zero_records", mplex(mplex_hdr(64, 0, 0, 0)),
        "a header and no record")
    bad("mplex_version_0", "mplex_bad_version",
        mplex(mplex_hdr(64, 0, 0, 0, version=0) + struct.pack("!4sBBH", ip_bytes(SENDER), 64,
                                                              6, len(a1)) + a1),
        "the first format (Version 0, 8-byte record headers) is not read")
    bad("mplex_version_2", "mplex_bad_version",
        mplex(mplex_hdr(64, 0, 0, 0, version=2) + record("10.0.1.1", 64, 6, a1)),
        "an unknown Version")
    bad("mplex_version_before_records", "mplex_bad_version",
        mplex(mplex_hdr(64, 0, 0, 0, version=7)),
        "Version is checked before the records (none here)")
    bad("mplex_payload_length_past_end", "mplex_record_truncated",
        mplex(mplex_hdr(64, 0, 0, 0) + record("10.0.1.1", 64, 6, a1, length=21)),
        "PayloadLength 21 with 20 bytes left")
    bad("mplex_record_header_truncated", "mplex_record_truncated",
        mplex(mplex_hdr(64, 0, 0, 0) + record("10.0.1.1", 64, 6, a1) + bytes(5)),
        "5 bytes after the last record")
    bad("mplex_bad_option_first", "concast_option_bad_length",
        mplex(mplex_hdr(64, 0, 0, 0) + record("10.0.1.1", 64, 6, a1),
              options=concast_opt(1, length=8) + EOL2),
        "IPv4 option errors come before MplexPkt checks")


def main() -> int:
    build()
    names = [v["name"] for v in VECTORS]
    assert len(names) == len(set(names)), "vector names must be unique"
    text = json.dumps({"spec": "docs/protocol.md", "count": len(VECTORS), "vectors": VECTORS,
                       "signing": {"secret": SIGNER_SECRET.hex(), "cases": SIGNING}},
                      indent=1) + "\n"
    if "--check" in sys.argv:
        if OUT.read_text() != text:
            print("vectors.json is stale: run python3 tests/vectors/generate.py")
            return 1
        print(f"vectors.json up to date ({len(VECTORS)} vectors)")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(VECTORS)} vectors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
