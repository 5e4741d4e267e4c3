"""ClusterDaemons' bookkeeping on the "localhost" server (no ssh): the PID comes from the
server-side PID file, stop() ends the daemon's whole process group by that PID, the output
lands in the driver's log."""
import os
import time
from pathlib import Path

from concast.topologies.cluster.daemons import ClusterDaemons, SocketForwards
from concast.topologies.cluster.serverset import ServerSet, parse

import pytest


def test_start_records_the_server_pid_and_stop_ends_its_group(tmp_path):
    servers = ServerSet(["localhost"], {"localhost": "127.0.0.1"}, None)
    seen = []
    ds = ClusterDaemons(tmp_path / "logs", servers, {"r1": "localhost"}, tmp_path / "pids",
                        on_start=lambda d, s: seen.append((d.name, s)))
    d = ds.start("r1", ["sh", "-c", "echo hello; sleep 30 & sleep 30"], name="toy",
                 env={"CCS_X": "1"})
    assert d.pid == int((tmp_path / "pids" / "r1-toy.pid").read_text())
    assert seen == [("toy", "localhost")] and ds.of("r1") == [d]
    child = None
    for _ in range(100):                       # the backgrounded sleep, same group
        kids = Path(f"/proc/{d.pid}/task/{d.pid}/children").read_text().split()
        if len(kids) >= 2:
            child = int(kids[0])
            break
        time.sleep(0.02)
    assert child is not None
    ds.stop(d)
    assert d.popen.poll() is not None and ds.running == []
    time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or \
        Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert "hello" in (tmp_path / "logs" / "r1-toy.log").read_text()


def test_localhost_sockets_are_not_forwarded(tmp_path):
    servers = ServerSet(["localhost"], {"localhost": "127.0.0.1"}, None)
    f = SocketForwards(servers, tmp_path)
    assert f.add("localhost", "hostd-h1", tmp_path / "h1.sock") == tmp_path / "h1.sock"


def test_server_lists_are_checked():
    assert parse("a, b,c") == ["a", "b", "c"]
    for bad in ("", "a,a", "a;rm"):
        with pytest.raises(ValueError):
            parse(bad)
