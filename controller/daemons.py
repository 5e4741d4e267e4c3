"""Per-router daemons (routerd, or anything else): started as subprocesses, tracked by
PID and start time, logged to the run directory, stopped by PID.

Each daemon gets its own session (process group), so stopping it also stops anything
it forked, and nothing outside that group.
"""
from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from concast import procs


@dataclass
class Daemon:
    router: str
    name: str
    argv: list[str]
    pid: int
    start: int | None
    log: Path
    popen: subprocess.Popen = field(repr=False)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def record(self) -> dict:
        return {"router": self.router, "name": self.name, "pid": self.pid, "start": self.start}


class Daemons:
    def __init__(self, log_dir: Path, on_start: Callable[[Daemon], None] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.on_start = on_start
        self.running: list[Daemon] = []

    def start(self, router: str, argv: list[str], name: str = "routerd",
              env: dict | None = None, netns: str | None = None) -> Daemon:
        """Start `argv` for `router`; stdout and stderr go to <log_dir>/<router>-<name>.log.
        `netns`: a /run/netns name to run it in (default: the root namespace, where the
        CPU ports' routerd ends are)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{router}-{name}.log"
        full = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
        with open(log, "ab") as out:
            popen = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, **(env or {})})
        d = Daemon(router, name, full, popen.pid, procs.start_time(popen.pid), log, popen)
        self.running.append(d)
        if self.on_start:
            self.on_start(d)
        return d

    def stop(self, daemon: Daemon, timeout: float = 3.0) -> int | None:
        """Stop one daemon; returns its exit status."""
        code = None
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if daemon.popen.poll() is not None:
                break
            try:
                os.killpg(daemon.pid, sig)     # the group this daemon leads, nothing else
            except ProcessLookupError:
                pass
            try:
                daemon.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                continue
        code = daemon.popen.poll()
        if daemon in self.running:
            self.running.remove(daemon)
        return code

    def stop_all(self) -> None:
        for d in list(self.running):
            self.stop(d)

    def of(self, router: str) -> list[Daemon]:
        return [d for d in self.running if d.router == router]
