"""routerd's management socket: write one command line, read one JSON document back
(controller/routerd/src/mgmt.rs). The one Python client of it: the CLI, the tests, the
benchmarks and the experiments all ask through `query`."""
from __future__ import annotations

import json
import socket
from pathlib import Path

COMMANDS = ("status", "flows", "stats", "egress ports", "egress cpu", "read-delay", "wait sleep", "wait adaptive")
BUSY_POLL_MAX_US = 10_000  # controller/routerd/src/busypoll.rs MAX_WINDOW_US


def busy_poll_in_range(us: int) -> bool:
    return 0 <= us <= BUSY_POLL_MAX_US


def busy_poll_command(us: int) -> str:
    """`busy-poll US`: routerd's busy-poll window from now on (0 = off; docs/routerd.md)."""
    if not busy_poll_in_range(us):
        raise ValueError(f"busy-poll window must be 0..{BUSY_POLL_MAX_US} us, not {us}")
    return f"busy-poll {us}"


def query(path: str | Path, command: str = "stats", timeout: float = 3.0) -> dict:
    """The answer to `command` (one of COMMANDS, or busy_poll_command(us)); `egress
    ports|cpu`, `busy-poll US` and `wait sleep|adaptive` switch where routerd sends what it
    writes, its busy-poll window and how it waits for frames (benchmarks compare both ways);
    `read-delay` gives the CPU port's read-delay bins."""
    word, _, us = command.partition(" ")
    busy = word == "busy-poll" and us.isdigit() and busy_poll_in_range(int(us))
    if command not in COMMANDS and not busy:
        raise ValueError(f"unknown routerd command {command!r}: {', '.join(COMMANDS)}, "
                         f"busy-poll 0..{BUSY_POLL_MAX_US}")
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
