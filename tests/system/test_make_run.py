"""`make run-mplex`'s experiment, small (`make run` is the ACK study: test_ack_study.py):
`concast exp mplex` completes, checks its downloads, and
writes the table, the CSV, the plot and the pcaps a user reads."""
from __future__ import annotations

import csv
import subprocess

import pytest

from concast import ROOT, tools
from hostdtools import PYTHON, missing_builds

pytestmark = pytest.mark.mininet

SKIP = missing_builds() or (
    None if tools.spec_or_build_path("multiplex").exists()
    else f"{tools.spec_or_build_path('multiplex')} is not built (make specs)")


@pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
def test_the_experiment_writes_its_table_csv_plot_and_pcaps(tmp_path):
    r = subprocess.run([PYTHON, "-m", "concast.cli", "exp", "mplex", "--clients", "2",
                        "--size", "300000", "--repeat", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "multiplexing on" in r.stdout and "multiplexing off" in r.stdout
    rows = {row["metric"]: row for row in csv.DictReader((tmp_path / "mplex.csv").open())}
    assert rows["downloads intact (sha256)"]["multiplexing_on"] == "2/2"
    assert rows["downloads intact (sha256)"]["multiplexing_off"] == "2/2"
    for mode in ("multiplexing_on", "multiplexing_off"):
        sent = int(rows["ACKs sent by the clients' kernels"][mode])
        assert sent > 0
        assert int(rows["ACKs reaching sv's TCP"][mode]) == sent, f"{mode}: an ACK went missing"
    png = (tmp_path / "mplex.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert any((tmp_path / "mplex" / "on-1").glob("*.pcap"))
    assert any((tmp_path / "mplex" / "off-1").glob("*.pcap"))
