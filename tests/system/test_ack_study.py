"""`concast exp ack-study --quick` (what `make run` runs): a small transit-stub network with
emulated 10 ms links, 24 web clients fetching a 4 KB page at once, multiplexing on and off
at MaxLocalDelay 0 and 10 ms, in both environments. Checks what a user reads: every page
intact, every ACK the clients' hostd took accounted for at R, ACKs combined at 10 ms, and the
CSV, table, plots and metadata written."""
from __future__ import annotations

import csv
import json

import pytest

from hostdtools import quick_ack_study

pytestmark = pytest.mark.mininet


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("ack-study")
    return quick_ack_study(out), out


def rows(out):
    return list(csv.DictReader((out / "runs.csv").open()))


def test_the_quick_study_finishes_with_every_page_intact(study):
    r, out = study
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    runs = rows(out)
    assert len(runs) == 8                     # 2 environments x 2 delays x on/off
    for row in runs:
        assert int(row["completed"]) == int(row["clients"]) == 24, row
        assert int(row["intact"]) == 24, row


def test_every_captured_ack_reaches_r_or_is_accounted_for(study):
    _, out = study
    for row in rows(out):
        if row["mode"] != "on":
            continue
        captured, at_r = int(row["acks_captured"]), int(row["records_at_r"])
        assert captured > 24, row             # at least the handshake's ACK per client
        assert at_r <= captured, row          # nothing invented on the way
        if row["env"] == "low-loss":          # queues far from full: nothing lost
            assert at_r == captured, row
        assert int(row["late_records"] or 0) == 0, row
        # The books balance: every captured ACK reached R or was lost on a link, by cause.
        lost = sum(int(row[f"acks_lost_link_{c}"]) for c in ("queue", "loss", "down"))
        assert captured == at_r + lost, row
        assert int(row["acks_unaccounted"]) == 0, row


def test_acks_are_combined_when_routers_may_wait(study):
    _, out = study
    on = {(r["env"], float(r["delay_ms"])): r for r in rows(out) if r["mode"] == "on"}
    for env in ("low-loss", "high-loss"):
        waited = on[(env, 10.0)]
        assert float(waited["combined_pct"]) > 50, waited
        assert float(waited["mean_bundle"]) > 1.5, waited
        assert float(waited["combined_pct"]) > float(on[(env, 0.0)]["combined_pct"]), (env, on)


def test_each_run_records_what_the_routers_and_links_did(study):
    _, out = study
    for row in rows(out):
        assert int(row["links_frames_in"]) > 0, row          # the emulator carried the run
        assert int(row["links_tap_dropped"]) >= 0, row       # its TAPs' own drops were read
        merging = [int(row[f"engine_{k}"]) for k in ("received", "out", "taken", "gate_held")]
        if row["mode"] == "off":
            assert merging == [0, 0, 0, 0], row               # no multiplex flow at any router
            continue
        received, out_, taken, _ = merging
        assert received >= int(row["mplex_pkts_at_r"]) > 0, row
        assert out_ <= received, row                          # bundling never adds datagrams
        assert taken <= received - out_, row                  # taken datagrams are merges


def test_results_stand_beside_the_paper(study):
    r, out = study
    table = (out / "table1.md").read_text()
    assert "| low-loss | 10 |" in table and "| 98 |" in table     # the paper's value beside ours
    for png in ("table1.png", "figures5-6.png"):
        data = (out / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000
    meta = json.loads((out / "meta.json").read_text())
    assert len(meta["git"]["rev"]) == 40
    assert meta["settings"]["clients"] == 24 and meta["scale"]["routers"] == 14
    assert meta["memory"]["peak_mib"] >= meta["memory"]["baseline_mib"]
    topo = json.loads((out / "topology.json").read_text())
    assert len(topo["routers"]) == 14
    assert "ACKs combined" in r.stdout or "combined" in table
