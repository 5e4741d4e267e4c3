"""MTP over real UDP between two network namespaces (mtping): objects through nftables random
loss hash-checked against the file served, a server restarted mid-transfer (the client
repeats; nothing is lost), and mtping's ping. Needs root, ip and nft, and the mtping binary.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time

import pytest

from concast import perf, tools
from concast.hosts import mtp
from concast.perfpath import B_ADDR, Path


def _why_not() -> str | None:
    return perf.missing(("ip", "nft"), ("mtping",))


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")

PORT = 17710


def _serve(path: Path, d) -> subprocess.Popen:
    p = path.popen("b", [str(tools.rust_binary("mtping")), "serve", "--listen", f"0.0.0.0:{PORT}", "--dir", str(d)])
    time.sleep(0.3)
    return p


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()   # by its PID: this test started it
    p.communicate()


def _get(path: Path, *args: str, timeout: float = 120) -> dict:
    p = path.popen("a", [str(tools.rust_binary("mtping")), "get", f"{B_ADDR}:{PORT}", *args])
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err
    return json.loads(out)


def test_objects_through_ten_percent_loss_both_ways_arrive_hash_identical(tmp_path):
    blob = os.urandom(3_000_000)
    (tmp_path / "blob").write_bytes(blob)
    with Path(loss=0.10, tag=f"m{os.getpid()}") as path:
        srv = _serve(path, tmp_path)
        try:
            r = _get(path, "--name", "blob", "--count", "3", "--parallel", "3")
        finally:
            _stop(srv)
        assert r["complete"] and r["objects"] == 3 and r["all_same"], r
        assert r["sha256"] == hashlib.sha256(blob).hexdigest()
        assert r["bytes"] == 3 * len(blob)
        # the loss was real and MTP repaired it
        assert path.dropped("a") > 100 and path.dropped("b") > 10
        assert r["stats"]["repeats"] > 100, r["stats"]


def test_a_server_restarted_mid_transfer_loses_nothing(tmp_path):
    blob = os.urandom(20_000_000)
    (tmp_path / "big").write_bytes(blob)
    with Path(tag=f"s{os.getpid()}", rate_mbit=50) as path:
        srv = _serve(path, tmp_path)
        cli = path.popen("a", [str(tools.rust_binary("mtping")), "get", f"{B_ADDR}:{PORT}", "--name", "big"])
        try:
            time.sleep(1.0)            # 20 MB at 50 Mbit/s takes over 3 s: still running
            _stop(srv)
            time.sleep(1.5)            # the client repeats into silence
            srv = _serve(path, tmp_path)
            out, err = cli.communicate(timeout=120)
        finally:
            _stop(srv)
            if cli.poll() is None:
                _stop(cli)
        assert cli.returncode == 0, err
        r = json.loads(out)
        assert r["complete"] and r["sha256"] == hashlib.sha256(blob).hexdigest(), r
        # the dissertation's window (the default) has no silence rule: the outage shows as
        # repeats and window cuts; the comparison window (mtp-cubic) would count silent periods
        assert r["stats"]["window_cuts"] >= 1 and r["stats"]["repeats"] > 0, r["stats"]


def test_mtping_ping_times_size_only_transactions(tmp_path):
    with Path(tag=f"p{os.getpid()}") as path:
        srv = _serve(path, tmp_path)
        try:
            p = path.popen("a", [str(tools.rust_binary("mtping")), "ping", f"{B_ADDR}:{PORT}", "-c", "5", "--interval-ms", "20"])
            out, err = p.communicate(timeout=60)
        finally:
            _stop(srv)
        assert p.returncode == 0, err
        r = json.loads(out)
        assert (r["sent"], r["answered"], r["lost"]) == (5, 5, 0), r
        assert 0 < r["min_us"] <= r["median_us"] <= r["max_us"]
        assert r["stats"]["replies"] == 5


def test_concast_perf_mode_mtp_from_python_through_loss():
    from concast import perf
    r = perf.measure(mode="mtp", proto="ctp", size=200_000, secs=2.0, loss=0.05)
    assert not r["errors"], r["errors"]
    (c,) = r["client"]
    assert c["role"] == "get" and c["objects"] >= 1 and c["all_same"], c
    assert c["sha256"] == hashlib.sha256(mtp.generated(200_000)).hexdigest()
    assert c["stats"]["repeats"] > 0 and c["bytes"] == 200_000 * c["objects"]
