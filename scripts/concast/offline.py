"""Inputs for the offline merge runner (`concast spec run`): JSON lines of concast datagrams.

The payload layout is the aggregate specs' (sum, count, min, max): a UDP header, then
"CA", version 1, key, count, value (mergespecs/README.md).
"""
from __future__ import annotations

import json
import random
import struct
from pathlib import Path

RECEIVER = "10.0.0.9"


def aggregate_payload(key: int, value: int, count: int = 1, sport: int = 4000,
                      dport: int = 5000) -> bytes:
    udp = struct.pack("!HHHH", sport, dport, 32, 0)
    return udp + struct.pack("!2sBxIIxxxxq", b"CA", 1, key, count, value)


def write_sum_stream(path: Path, senders: int = 8, rounds: int = 5, group: int = 7,
                     seed: int = 1) -> int:
    """Every sender contributes one value per round (key = round); returns the expected total."""
    rng = random.Random(seed)
    lines, total = [], 0
    for r in range(rounds):
        for s in range(senders):
            value = rng.randint(-100, 100)
            total += value
            lines.append({"t_us": r * 20_000 + rng.randint(0, 2_000),
                          "src": f"10.0.1.{s + 1}", "dst": RECEIVER, "group": group,
                          "payload_hex": aggregate_payload(r + 1, value).hex()})
    lines.sort(key=lambda x: x["t_us"])
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return total
