"""routerd's management socket: write one command line, read one JSON document back
(controller/routerd/src/mgmt.rs). The one Python client of it: the CLI, the tests, the
benchmarks and the experiments all ask through `query`."""
from __future__ import annotations

import json
import socket
from pathlib import Path

COMMANDS = ("status", "flows", "stats", "egress ports", "egress cpu")


def query(path: str | Path, command: str = "stats", timeout: float = 3.0) -> dict:
    """The answer to `command` (one of COMMANDS); `egress ports|cpu` switches where routerd
    sends what it writes (benchmarks compare the two)."""
    if command not in COMMANDS:
        raise ValueError(f"unknown routerd command {command!r}: {', '.join(COMMANDS)}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        s.sendall(command.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)
