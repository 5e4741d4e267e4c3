"""`concast exp ack-study --quick --servers a,b` on two emulated servers (docs/cluster.md):
the quick study's network spread over them (stub domains whole, the transit link a VXLAN
tunnel, each direction of every link emulated on its sending server), one run (low-loss,
MaxLocalDelay 10 ms, multiplexing on: the shortest run that has bundles) with the quick
study's delivery checks: every page intact, every ACK the clients took at R. Then: the
placement in topology.json and meta.json, and nothing of the study left on either server."""
from __future__ import annotations

import csv
import json
import os
import subprocess

import pytest

from hostdtools import PYTHON, missing_builds
from concast import ROOT, tools

pytestmark = pytest.mark.mininet


@pytest.fixture(scope="module")
def study(emulated_servers, tmp_path_factory):
    why = missing_builds() or (None if tools.spec_or_build_path("multiplex").exists()
                               else "the multiplex spec is not built (make specs)")
    if why:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("cluster-ack-study")
    env = {**os.environ, "CONCAST_CLUSTER_STATE": str(emulated_servers.state.state_dir)}
    r = subprocess.run([PYTHON, "-m", "concast.cli", "exp", "ack-study", "--quick",
                        "--servers", "a,b", "--envs", "low-loss", "--delays", "10",
                        "--modes", "on", "--out", str(out)], capture_output=True, text=True,
                       timeout=900, cwd=str(ROOT), env=env)
    return r, out, emulated_servers


def test_every_page_and_every_ack_arrive_across_servers(study):
    r, out, _ = study
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert len(rows) == 1
    row = rows[0]
    assert int(row["completed"]) == int(row["intact"]) == int(row["clients"]) == 24, row
    captured, at_r = int(row["acks_captured"]), int(row["records_at_r"])
    assert captured > 24, row               # at least the handshake's ACK per client
    assert at_r == captured, row            # low-loss: every ACK reached R
    assert int(row["acks_unaccounted"]) == 0 and int(row["late_records"] or 0) == 0, row
    assert float(row["mean_bundle"]) > 1.5, row     # routers bundled at 10 ms
    assert int(row["links_frames_in"]) > 0, row     # both servers' emulators reported


def test_the_placement_is_recorded_and_keeps_stub_domains_whole(study):
    r, out, _ = study
    assert r.returncode == 0, r.stderr[-2000:]
    meta = json.loads((out / "meta.json").read_text())
    cluster = meta["cluster"]
    assert cluster["servers"] == ["a", "b"] and meta["settings"]["servers"] == ["a", "b"]
    placement = cluster["placement"]
    assert set(placement.values()) == {"a", "b"}
    assert cluster["crossing_links"] >= 1            # a VXLAN link carried the study
    topo = json.loads((out / "topology.json").read_text())
    assert topo["meta"]["cluster"]["placement"] == placement
    domains = topo["meta"]["domains"]
    for d in {d for d in domains.values() if not d.startswith("T")}:
        assert len({placement[r] for r, dd in domains.items() if dd == d}) == 1, d


def test_nothing_of_the_study_is_left_on_the_servers(study):
    _, _, servers = study
    for s in ("a", "b"):
        procs = set(servers.ssh(s, "ps -e -o comm=").stdout.split())
        assert procs <= {"bash", "sshd", "ps", "sh"}, (s, procs)
        links = servers.ssh(s, "ip -o link show").stdout
        assert {ln.split(":")[1].strip().split("@")[0] for ln in links.splitlines()} \
            == {"lo", "eth0"}, (s, links)
        # link state, namespace names, emulator sockets, the actions' scratch folders
        files = servers.ssh(s, "ls -A /dev/shm; ls -A /run/netns 2>/dev/null; ls -A "
                               "/run/concast/linkemu 2>/dev/null; ls -d /tmp/concast/ha-* "
                               "2>/dev/null; true").stdout
        assert files.split() == [], (s, files)
