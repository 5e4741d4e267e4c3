"""Datagrams the suite crafts beyond what the Scapy layers build: any options area, spliced
into a datagram with its IHL, total length and header checksum made right again."""
from __future__ import annotations

from concast.inet import checksum


def with_options(datagram, area: bytes) -> bytes:
    """`datagram` (Scapy IP or bytes) with its options area replaced by `area` (a multiple
    of 4 bytes, up to 40): IHL, total length and checksum follow."""
    raw = bytes(datagram)
    if len(area) % 4 or len(area) > 40:
        raise ValueError("an options area is a multiple of 4 bytes, at most 40")
    ihl = (raw[0] & 0xF) * 4
    body = raw[ihl:int.from_bytes(raw[2:4], "big")]
    head = bytearray(raw[:20])
    head[0] = 0x40 | (5 + len(area) // 4)
    head[2:4] = (20 + len(area) + len(body)).to_bytes(2, "big")
    head[10:12] = b"\0\0"
    header = bytes(head) + area
    header = header[:10] + checksum(header).to_bytes(2, "big") + header[12:]
    return header + body


def patched(datagram, offset: int, value: bytes, fix_checksum: bool = True) -> bytes:
    """`datagram` with `value` written at byte `offset` (header fields included)."""
    raw = bytearray(bytes(datagram))
    raw[offset:offset + len(value)] = value
    if fix_checksum:
        ihl = (raw[0] & 0xF) * 4
        raw[10:12] = b"\0\0"
        raw[10:12] = checksum(bytes(raw[:ihl])).to_bytes(2, "big")
    return bytes(raw)
