"""Linux routers' lifecycle: routerd (any per-router daemon) runs inside the router's
namespace, and nothing is left behind after stop() or after a crash and cleanup()."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from concast import procs, registry

from concast.netmodel import naming

from concast.topologies import cleanup, line

pytestmark = pytest.mark.mininet


def leftovers(tag: str) -> list[str]:
    prefix = naming.run_prefix(tag)
    found = [i for i in os.listdir("/sys/class/net") if i.startswith(prefix)]
    if os.path.isdir("/run/netns"):
        found += [n for n in os.listdir("/run/netns") if n.startswith(prefix)]
    if (registry.STATE_DIR / f"{tag}.json").exists():
        found.append("run record")
    return found


def netns_of(pid: int) -> str:
    return subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True,
                          text=True).stdout.strip()


def test_daemons_run_in_their_router_namespace_and_stop_leaves_nothing(tmp_path):
    n = line(2, senders=1, dataplane="linux").start(run_dir=tmp_path)
    try:
        tag = n.tag
        daemons = n.start_routerd(["sh", "-c", "ip -o link show {cpu_iface} >/dev/null"
                                   " && echo {router} {cpu_iface} ok; exec sleep 60"])
        time.sleep(0.5)
        for r, d in daemons.items():
            assert d.alive()
            assert netns_of(d.pid) == n[r].netns
            assert d.log.read_text().split() == [r, f"cc{tag}{r}-rd", "ok"], "sees its CPU port"
        assert sorted(leftovers(tag)) == sorted([*(n[r].netns for r in ("r1", "r2")),
                                                 n.netns("s1"), n.netns("rx"), "run record"])
        starts = {d.pid: d.start for d in daemons.values()}
    finally:
        n.stop()
    assert leftovers(tag) == []
    for pid, started in starts.items():
        assert not procs.alive(pid, started)


CRASHER = """
import sys, time
from concast.topologies import line
n = line(2, dataplane="linux").start(run_dir=sys.argv[1])
n.start_routerd(["sleep", "60"])
print(n.tag, flush=True)
time.sleep(60)
"""


def test_cleanup_removes_a_crashed_linux_run_and_nothing_else(tmp_path):
    bystander = line(1, dataplane="linux").start(run_dir=tmp_path)
    try:
        proc = subprocess.Popen([sys.executable, "-c", CRASHER, str(tmp_path / "crashed")],
                                stdout=subprocess.PIPE, text=True)
        tag = proc.stdout.readline().strip()
        assert tag and leftovers(tag)
        rec = next(r for r in registry.load_all() if r.tag == tag)
        daemon_pids = [(d["pid"], d["start"]) for d in rec.data["daemons"]]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert f"cc{tag}-r1" in leftovers(tag), "a crashed run leaves its routers behind"
        removed = cleanup()
        assert any(tag in item for item in removed)
        assert leftovers(tag) == []
        for pid, started in daemon_pids:
            assert not procs.alive(pid, started)
        assert bystander.ping("s1", "rx").ok, "cleanup touched a live network"
    finally:
        bystander.stop()
