"""Generator processes (page server, cross-traffic sender/receiver): started in the
root namespace in their own session, tracked by PID and start time, stopped by PID
with SIGTERM, after which each writes its JSON summary to the file it was given.

Protocol with the child: it prints one JSON line with "ready": true on stdout once its
sockets exist (or "error": ... and exits), and on SIGTERM writes --out and exits 0.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from concast import procs


class ChildFailed(RuntimeError):
    pass


def read_first_line(popen: subprocess.Popen, timeout: float) -> bytes:
    """What `popen` printed on stdout up to and including its first newline, or all it
    printed before EOF, its exit or `timeout` seconds (then without a newline)."""
    deadline = time.monotonic() + timeout
    buf = b""
    fd = popen.stdout.fileno()
    while time.monotonic() < deadline and b"\n" not in buf:
        if select.select([fd], [], [], 0.2)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            buf += chunk
        elif popen.poll() is not None:
            break
    return buf


class Child:
    def __init__(self, module: str, args: list[str], out: Path, log: Path | None = None,
                 ready_timeout: float = 60.0) -> None:
        self.out = Path(out)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.unlink(missing_ok=True)
        self.argv = [sys.executable, "-m", module, *args, "--out", str(self.out)]
        self.log_path = log or self.out.with_suffix(".log")
        self._log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=self._log,
                                      start_new_session=True)
        self.pid = self.popen.pid
        self.started = procs.start_time(self.pid)
        self.ready = self._wait_ready(ready_timeout)

    def _wait_ready(self, timeout: float) -> dict:
        buf = read_first_line(self.popen, timeout)
        if b"\n" in buf:
            msg = json.loads(buf.split(b"\n", 1)[0])
            if msg.get("ready"):
                return msg
            self.stop()
            raise ChildFailed(f"{self.argv[2]}: {msg.get('error', msg)}")
        self.stop()
        raise ChildFailed(f"{' '.join(self.argv[:4])} ... did not get ready "
                          f"(exit {self.popen.poll()}); see {self.log_path}")

    def alive(self) -> bool:
        return procs.alive(self.pid, self.started)

    def stop(self, timeout: float = 10.0) -> dict | None:
        """SIGTERM by PID (SIGKILL after `timeout`); the child's summary, if it wrote one."""
        procs.terminate(self.pid, self.started, group=True, timeout=timeout)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self.popen.stdout.close()
        self._log.close()
        try:
            return json.loads(self.out.read_text())
        except (OSError, ValueError):
            return None


def announce(**fields) -> None:
    """The child's side: the ready (or error) line."""
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def write_summary(path: str | None, summary: dict) -> None:
    text = json.dumps(summary, indent=1) + "\n"
    if path:
        tmp = Path(path).with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    else:
        sys.stdout.write(text)
