"""The UDP payload of the bundled aggregate specs (sum, count, min, max): the 24-byte
aggregate header of mergespecs/specs/aggregate/src/payload.rs, after the UDP header that
hostd writes itself.

    offset  0    2    3    4        8         12         16
            'CA' ver  rsv  key u32  count u32 reserved   value i64     (big-endian)
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

MAGIC = b"CA"
VERSION = 1
_FORMAT = struct.Struct("!2sBBIIIq")
LEN = _FORMAT.size          # 24


@dataclass(frozen=True)
class Contribution:
    key: int
    count: int              # how many original contributions the value stands for
    value: int


def encode(key: int, value: int, count: int = 1) -> bytes:
    return _FORMAT.pack(MAGIC, VERSION, 0, key, count, 0, value)


def decode(payload: bytes) -> Contribution | None:
    """The contribution in a UDP payload, or None if it is not an aggregate payload."""
    if len(payload) < LEN:
        return None
    magic, ver, _, key, count, _, value = _FORMAT.unpack_from(payload)
    if magic != MAGIC or ver != VERSION:
        return None
    return Contribution(key, max(count, 1), value)
