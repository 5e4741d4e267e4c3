"""`concast exp ctp`, short (root, about a minute): the CTP paper's Table I and Table II cases
between two namespaces with a 100 Mbit/s tbf, two runs each, 0 and 5 % loss. Asserts that
every case measured something, that the loss was real, that the reliable composite lost no
ping, and that the CSV, JSON and PNG were written; never a speed.
"""
from __future__ import annotations

import csv
import json

import pytest

from concast.topologies.experiments import ctp as exp

pytestmark = pytest.mark.skipif(exp.missing_prerequisites() is not None,
                                reason=exp.missing_prerequisites() or "")


def test_tables_one_and_two_short(tmp_path):
    s = exp.Settings(runs=2, count=5, secs=0.5, loss_runs=2, loss_count=20, losses=[0, 5])
    rows = exp.run(s, "I,II", say=lambda m: None)
    t1 = [r for r in rows if r["table"] == "I"]
    assert [r["protocol"] for r in t1] == list(exp.PROTOCOLS)
    for r in t1:
        assert r["latency_ms"] and r["latency_ms"] > 0, r
        assert r["bandwidth_mbps"] and r["bandwidth_mbps"] > 0, r
        assert r["paper_latency_ms"] == exp.PAPER_TABLE1[r["protocol"]][0][0]
        assert not r["errors"], r
    t2 = [r for r in rows if r["table"] == "II"]
    assert [(r["loss_pct"], r["protocol"]) for r in t2] == [
        (loss, p) for loss in (0.0, 5.0) for p in ("CTP-Bulk", "TCP")]
    assert all(r["latency_ms"] for r in t2), t2
    assert sum(r["dropped"] for r in t2 if r["loss_pct"] == 5.0) > 0, "the loss was real"
    assert all(r["dropped"] == 0 for r in t2 if r["loss_pct"] == 0.0)
    assert all(r["pings_lost"] == 0 for r in t2 if r["protocol"] == "CTP-Bulk"), t2
    meta = exp.metadata(s, "I,II") | {"loadavg_at_end": (0.0, 0.0, 0.0), "secs": 0}
    paths = exp.save(rows, meta, tmp_path)
    assert all(p.stat().st_size > 0 for p in paths)
    with open(paths[0]) as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert json.loads(paths[1].read_text())["meta"]["git"]["rev"]
    assert "| CTP-Bulk |" in exp.text(rows)


def test_bad_arguments_are_refused_without_a_traceback(capsys):
    with pytest.raises(SystemExit) as e:
        exp.main(["--losses", "120"])
    assert e.value.code == 2
    assert "losses in [0, 100)" in capsys.readouterr().err
