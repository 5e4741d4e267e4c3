"""Reader of concast-linkemu's state file (layout: docs/linkemu.md, "State file").

Each link direction has a 64-byte slot under a seqlock; a read retries while the emulator
is writing it, so the fields it returns belong together.
"""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"CCLQ0001"
HEADER = struct.Struct("<8sII48x")
SLOT = struct.Struct("<QQQIIQQ16x")


@dataclass(frozen=True)
class SlotState:
    tx_free_at_ns: int      # CLOCK_MONOTONIC; <= now means the transmitter is idle
    backlog_bytes: int
    backlog_pkts: int
    queue_limit_pkts: int
    rate_bps: int           # 0: unlimited
    updated_ns: int
    seq: int


class StateReader:
    def __init__(self, path: str | Path) -> None:
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        magic, version, self.slot_count = HEADER.unpack_from(self._map, 0)
        if magic != MAGIC or version != 1:
            raise ValueError(f"{path}: not a linkemu state file (magic {magic!r}, version {version})")
        if len(self._map) < HEADER.size + SLOT.size * self.slot_count:
            raise ValueError(f"{path}: shorter than its {self.slot_count} slots")

    def read(self, slot: int, tries: int = 1000) -> SlotState:
        if not 0 <= slot < self.slot_count:
            raise IndexError(f"slot {slot} outside 0..{self.slot_count - 1}")
        off = HEADER.size + SLOT.size * slot
        for _ in range(tries):
            seq1 = struct.unpack_from("<Q", self._map, off)[0]
            if seq1 & 1:
                continue
            fields = SLOT.unpack_from(self._map, off)
            if fields[0] == seq1:
                return SlotState(*fields[1:], seq=seq1)
        raise TimeoutError(f"slot {slot}: the writer never left it stable")

    def close(self) -> None:
        self._map.close()

    def __enter__(self) -> "StateReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
