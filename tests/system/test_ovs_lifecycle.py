"""Daemon hooks, and nothing of ours left behind: after stop(), and after a crash."""
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
    bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
    found = [b for b in bridges.split() if b.startswith(prefix)]
    found += [i for i in os.listdir("/sys/class/net") if i.startswith(prefix)]
    if os.path.isdir("/run/netns"):
        found += [n for n in os.listdir("/run/netns") if n.startswith(prefix)]
    if (registry.STATE_DIR / f"{tag}.json").exists():
        found.append("run record")
    return found


def test_daemons_run_per_router_and_stop_leaves_nothing_behind(tmp_path):
    n = line(2, senders=1).start(run_dir=tmp_path)
    try:
        tag = n.tag
        daemons = n.start_routerd(["sh", "-c", "echo {router} {bridge} {cpu_iface} "
                                   "{cpu_ofport} {addr}; exec sleep 60"])
        assert sorted(daemons) == ["r1", "r2"]
        background = int(n["rx"].cmd("sleep 60 & echo $!").split()[-1])
        shells = [h.pid for h in n.hosts.values()]
        time.sleep(0.3)
        for d in daemons.values():
            assert d.alive()
        log = daemons["r1"].log.read_text()
        assert log.split() == ["r1", f"cc{tag}r1", f"cc{tag}r1-rd", "1000", "10.0.0.1"]
        assert leftovers(tag)
        starts = {pid: procs.start_time(pid) for pid in [*shells, background]}
    finally:
        n.stop()
    assert leftovers(tag) == []
    for d in daemons.values():
        assert not d.alive()
    for pid, started in starts.items():
        assert not procs.alive(pid, started), f"process {pid} survived stop()"


CRASHER = """
import sys, time
from concast.topologies import line
n = line(2).start(run_dir=sys.argv[1])
n.start_routerd(["sleep", "60"])
n["rx"].cmd("sleep 60 &")
print(n.tag, flush=True)
time.sleep(60)
"""


def test_cleanup_removes_what_a_crashed_run_left_and_nothing_else(tmp_path):
    bystander = line(1).start(run_dir=tmp_path)    # a live network: must survive the sweep
    try:
        proc = subprocess.Popen([sys.executable, "-c", CRASHER, str(tmp_path / "crashed")],
                                stdout=subprocess.PIPE, text=True)
        tag = proc.stdout.readline().strip()
        assert tag and leftovers(tag)
        rec = next(r for r in registry.load_all() if r.tag == tag)
        daemon_pids = [(d["pid"], d["start"]) for d in rec.data["daemons"]]
        proc.send_signal(signal.SIGKILL)   # no finally, no atexit: a crash
        proc.wait()
        assert leftovers(tag), "a crashed run leaves its network behind"
        removed = cleanup()
        assert any(tag in item for item in removed)
        assert leftovers(tag) == []
        for pid, started in daemon_pids:
            assert not procs.alive(pid, started)
        assert bystander.ping("s1", "rx").ok, "cleanup touched a live network"
        assert len(leftovers(bystander.tag)) > 0
    finally:
        bystander.stop()
