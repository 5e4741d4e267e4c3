"""Wall time of a run's phases, each from the end of the one before (runs.csv `t_*_s`):
what a sweep's minutes are spent on."""
from __future__ import annotations

import time

NAMES = ("join", "snap_before", "fetch", "settle", "snap_after", "leave")
FIELDS = [f"t_{n}_s" for n in NAMES]


class Phases:
    def __init__(self):
        self.last = time.monotonic()
        self.secs: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        assert name in NAMES, name
        now = time.monotonic()
        self.secs[name] = now - self.last
        self.last = now

    def row(self) -> dict:
        return {f"t_{k}_s": round(v, 3) for k, v in self.secs.items()}
