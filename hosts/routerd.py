"""routerd's management socket: write one command line (status, flows, stats), read one
JSON document back (controller/routerd/src/mgmt.rs)."""
from __future__ import annotations

import json
import socket
from pathlib import Path

COMMANDS = ("status", "flows", "stats")


def query(path: str | Path, command: str, timeout: float = 3.0) -> dict:
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
