"""Processes, by PID only: a PID is trusted only together with its start time, so a
recycled PID never gets a signal meant for a process that is gone."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def oncpu_ns(task: str | Path) -> int | None:
    """Nanoseconds a process or thread (/proc/PID or /proc/PID/task/TID) has run on a CPU,
    the first field of its schedstat; None once it is gone."""
    try:
        return int(Path(task, "schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """Start time in clock ticks since boot (field 22 of /proc/PID/stat); None if the
    process is gone or a zombie (dead, only waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def alive(pid: int, started: int | None) -> bool:
    return started is not None and start_time(pid) == started


def _signal(pid: int, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def terminate(pid: int, started: int | None, group: bool = False, timeout: float = 3.0) -> None:
    """SIGTERM, then SIGKILL after `timeout`. `group`: the PID leads a process group we
    created (start_new_session), whose members are ours too."""
    if not alive(pid, started):
        return
    _signal(pid, signal.SIGTERM, group)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not alive(pid, started):
            return
        time.sleep(0.02)
    _signal(pid, signal.SIGKILL, group)
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def pids_by_netns(ns_paths: list[str | Path]) -> dict[str, list[int]]:
    """Processes in each of the network namespaces bound at `ns_paths`, from one scan of
    /proc (a scan per namespace costs minutes for 200 namespaces on a loaded machine)."""
    keys: dict[tuple[int, int], str] = {}
    for path in ns_paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        keys[(st.st_dev, st.st_ino)] = str(path)
    out: dict[str, list[int]] = {p: [] for p in keys.values()}
    if not keys:
        return out
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            s = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:
            continue
        path = keys.get((s.st_dev, s.st_ino))
        if path is not None:
            out[path].append(int(entry.name))
    return out


def kill_pids(pids: list[int], timeout: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after `timeout` to those still there (PIDs checked against
    their start times, so a recycled PID is left alone)."""
    started = {pid: start_time(pid) for pid in pids if pid != os.getpid()}
    for pid in started:
        _signal(pid, signal.SIGTERM, False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p, s) for p, s in started.items()):
        for pid in started:
            _reap(pid)
        time.sleep(0.02)
    for pid, st in started.items():
        if alive(pid, st):
            _signal(pid, signal.SIGKILL, False)
            _reap(pid)

