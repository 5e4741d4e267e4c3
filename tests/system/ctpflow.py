"""One flow of the host transport through the Python binding (concast.hosts.ctp), run inside
a host's namespace by the system tests: `recv PORT COMPOSITE CC BYTES IDLE` prints what arrived
({"bytes", "sha256"}) once BYTES came or nothing came for IDLE seconds; `send ADDR COMPOSITE
CC BYTES MBIT` sends BYTES seeded pseudo-random bytes as 1400-byte messages paced at MBIT
Mbit/s at most (an unreliable composite has no congestion control to pace it), closes, and prints
the same for what it sent."""
from __future__ import annotations

import hashlib
import json
import random
import sys
import time

from concast.hosts import ctp

MSG = 1400


def recv(port: int, composite: str, cc: str, want: int, idle: float) -> dict:
    h, got = hashlib.sha256(), 0
    with ctp.Server(f"0.0.0.0:{port}", composite=composite, cc=cc) as srv:
        print("ready", flush=True)
        last = time.monotonic()
        while got < want and time.monotonic() - last < idle:
            r = srv.recv(timeout=0.2)
            if r is not None:
                h.update(r[1])
                got += len(r[1])
                last = time.monotonic()
        stats = srv.stats()
        srv.free()  # not close(): the client ends its session
    return {"bytes": got, "sha256": h.hexdigest(), "stats": stats}


def send(addr: str, composite: str, cc: str, total: int, mbit: float) -> dict:
    data = random.Random(total).randbytes(total)
    gap = MSG * 8 / (mbit * 1e6)
    with ctp.Client(addr, composite=composite, cc=cc) as cli:
        due = time.monotonic()
        for i in range(0, total, MSG):
            while time.monotonic() < due:
                cli.recv(timeout=0)  # keeps the session working while it waits
            cli.send(data[i:i + MSG])
            # from the last send, not from the start: a stall is not made up with a burst
            due = max(due, time.monotonic()) + gap
        cli.flush(timeout=20)
        stats = cli.stats()
    return {"bytes": total, "sha256": hashlib.sha256(data).hexdigest(), "stats": stats}


if __name__ == "__main__":
    verb, where, composite, cc, n, x = sys.argv[1:7]
    out = (recv(int(where), composite, cc, int(n), float(x)) if verb == "recv"
           else send(where, composite, cc, int(n), float(x)))
    print(json.dumps(out), flush=True)
