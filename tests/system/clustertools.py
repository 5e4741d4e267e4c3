"""Emulated servers for the cluster system tests (topologies/cluster/servers.py,
docs/cluster.md): made for a test, removed after it pass or fail, and checked to leave
nothing behind."""
from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from pathlib import Path

import pytest

TESTS_CHECKOUT = Path(__file__).resolve().parents[2]    # what the tests' helpers are read from


@contextlib.contextmanager
def emulated(names: list[str]):
    """Servers `names` (skips with the reason where they cannot be made); on the way out
    they are removed and whatever of them is left fails the test."""
    from concast.topologies.cluster.servers import EmulatedServers, default_share, why_not
    reason = why_not()
    if reason:
        pytest.skip(f"cannot emulate servers here: {reason}")
    state = Path(f"/var/tmp/ccs-test-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    # The daemons' binaries and the tests' helper scripts are read on the servers at the
    # driver's paths: a clone under /tmp (as CI makes) is shared into their private /tmp.
    servers = EmulatedServers.up(names, state, share=[*default_share(), TESTS_CHECKOUT])
    try:
        yield servers
    finally:
        servers.down()
    left = leftovers(servers)
    assert not left, f"left behind by the emulated servers: {left}"


def _cmdlines() -> dict[int, str]:
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                out[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
            except OSError:
                pass
    return out


def leftovers(servers) -> list[str]:
    """Anything of this set of servers still on the driver: namespaces, interfaces,
    processes that name its state directory, the state directory."""
    st = servers.state
    left = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    names = {ln.split(":")[1].strip().split("@")[0] for ln in links.splitlines()}
    for s in st.servers:
        if s.netns in netns.split():
            left.append(f"netns {s.netns}")
        if s.veth in names:
            left.append(f"veth {s.veth}")
    if st.bridge and st.bridge in names:
        left.append(f"bridge {st.bridge}")
    pids = [s.init_pid for s in st.servers] + [s.pid for s in st.servers]
    for pid, cmd in _cmdlines().items():
        if st.state_dir in cmd or (pid in pids and cmd):
            left.append(f"process {pid}: {cmd[:80]}")
    if Path(st.state_dir).exists():
        left.append(f"dir {st.state_dir}")
    return left


def net_leftovers(tag: str) -> list[str]:
    """Anything named after a network's tag on the driver: namespaces, interfaces, its run
    record, files in /tmp and /dev/shm, processes (daemons, socket forwards)."""
    prefix = f"cc{tag}"
    left = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left += [f"netns {n}" for n in netns.split() if n.startswith(prefix)]
    left += [f"iface {n}" for n in os.listdir("/sys/class/net") if n.startswith(prefix)]
    if Path(f"/run/concast/nets/{tag}.json").exists():
        left.append(f"run record {tag}")
    for d in ("/tmp", "/dev/shm"):
        left += [f"file {d}/{f}" for f in os.listdir(d)
                 if f.startswith(prefix) or f.endswith(f"-{tag}") or f"-{tag}." in f]
    me = os.getpid()
    for pid, cmd in _cmdlines().items():
        if pid != me and (f"-{tag}/" in cmd or f"{prefix}-" in cmd):
            left.append(f"process {pid}: {cmd[:80]}")
    return left
