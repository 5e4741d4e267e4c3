"""The Internet checksum (RFC 1071) for Python that builds or checks datagrams by hand.

Standard library only: hostsend.py runs it in a host's namespace and must start at once,
and the vector generator must not depend on the Scapy layers it produces vectors for.
"""
from __future__ import annotations

import struct


def ones_complement_sum(data: bytes) -> int:
    """The 16-bit one's complement sum of `data` (odd lengths padded with a zero byte)."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def checksum(data: bytes) -> int:
    """The checksum to write into a header whose checksum field is zero in `data`."""
    return ~ones_complement_sum(data) & 0xFFFF


def checksum_ok(data: bytes) -> bool:
    """`data` (checksum field included) sums to all ones: its checksum is right."""
    return ones_complement_sum(data) == 0xFFFF
