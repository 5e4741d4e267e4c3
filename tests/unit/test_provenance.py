"""Provenance on every result (issue #27, item 2): the one writer (concast.provenance) and the
result writers that use it (exp mplex, perf, exp transport, exp ctp, exp ack-study), checked
without a network by replacing the measuring part of each."""
from __future__ import annotations

import argparse
import json
import subprocess

import pytest

from concast import perf, provenance, tools
from concast.topologies.experiments.ackstudy import meta as ack_meta
from concast.topologies.experiments.mplex import runner as mplex_runner
from concast.topologies.experiments.mplex.settings import Settings as MplexSettings

VERSION_KEYS = {"concast", "binaries", "specs", "rustc", "wasmtime_crate", "mininet", "ovs",
                "python", "scapy", "kernel"}
MACHINE_KEYS = {"host", "kernel", "cpus", "cpu_model", "mem_total_mib", "loadavg_at_start",
                "python"}


def check_record(m: dict, ended: bool = True) -> None:
    assert set(provenance.KEYS) <= set(m), set(provenance.KEYS) - set(m)
    assert VERSION_KEYS <= set(m["versions"]), VERSION_KEYS - set(m["versions"])
    assert MACHINE_KEYS <= set(m["machine"])
    assert set(m["git"]) == {"rev", "dirty"}
    if ended:
        assert m["ended"] and m["secs"] is not None and "loadavg_at_end" in m["machine"]
    assert not any(k.startswith("_") for k in m)


def test_the_record_has_every_key_and_the_checkouts_revision(tmp_path):
    m = provenance.start({"a": 1}, seed=7, command=["concast", "x"])
    path = provenance.write(tmp_path, provenance.finish(m))
    got = json.loads(path.read_text())
    check_record(got)
    assert got["params"] == {"a": 1} and got["seed"] == 7 and got["command"] == ["concast", "x"]
    head = subprocess.run(["git", "-C", str(tools.CHECKOUT), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    assert got["git"]["rev"] == head
    # the versions come from the tools here, not from a table
    assert got["versions"]["wasmtime_crate"] and got["versions"]["wasmtime_crate"][0].isdigit()
    for name, b in got["versions"]["binaries"].items():
        if b is not None:
            assert len(b["sha256"]) == 64 and b["path"].endswith(name)


def test_a_new_folder_per_run_never_an_old_one(tmp_path):
    a, b = provenance.run_folder(tmp_path), provenance.run_folder(tmp_path)
    assert a != b and a.is_dir() and b.is_dir()
    assert a.name.endswith(provenance.short_rev()) or provenance.short_rev() in a.name


def test_ack_study_keeps_its_keys():
    assert set(ack_meta.git()) == {"rev", "dirty"}
    assert MACHINE_KEYS <= set(ack_meta.machine())


def test_exp_mplex_writes_provenance_to_a_new_folder_each_run(tmp_path, monkeypatch):
    monkeypatch.setattr(mplex_runner, "missing_prerequisites", lambda: None)
    monkeypatch.setattr(mplex_runner, "run", lambda s, modes, repeat: {})
    monkeypatch.setattr(mplex_runner, "table", lambda rows: "")
    monkeypatch.setattr(mplex_runner, "rows", lambda on, off: [])

    def save(out, s, phases):
        out.mkdir(parents=True, exist_ok=True)
        (out / "mplex.json").write_text("{}")
        return [out / "mplex.json"]
    monkeypatch.setattr(mplex_runner, "save", save)
    monkeypatch.setattr(tools, "RESULTS", tmp_path / "results")
    assert mplex_runner.main(["--repeat", "1"]) == 0
    assert mplex_runner.main(["--repeat", "2"]) == 0
    runs = sorted((tmp_path / "results" / "mplex").iterdir())
    assert len(runs) == 2                      # the second run did not overwrite the first
    for run in runs:
        m = json.loads((run / "meta.json").read_text())
        check_record(m)
        assert m["params"]["clients"] == MplexSettings().clients
        assert "multiplex" in m["versions"]["specs"]
    assert mplex_runner.main(["--repeat", "1", "--out", str(tmp_path / "given")]) == 0
    check_record(json.loads((tmp_path / "given" / "meta.json").read_text()))


def test_perf_writes_provenance_beside_its_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(perf, "missing", lambda needs: None)
    monkeypatch.setattr(perf, "collect", lambda ns: ([], []))
    monkeypatch.setattr(perf, "RESULTS", tmp_path / "results")
    p = argparse.ArgumentParser()
    perf.add_arguments(p)
    assert perf.run(p.parse_args(["--json"])) == 0
    (run,) = (tmp_path / "results" / "perf").iterdir()
    got = json.loads((run / "perf.json").read_text())
    check_record(got["meta"])
    assert got["meta"]["params"]["duration"] == 5.0
    check_record(json.loads((run / "meta.json").read_text()))
    assert perf.run(p.parse_args(["--out", str(tmp_path / "o")])) == 0
    check_record(json.loads((tmp_path / "o" / "perf.json").read_text())["meta"])


def test_transport_and_ctp_records_have_the_keys():
    from concast.topologies.experiments import ctp
    from concast.topologies.experiments.transport import runner, settings
    m = runner.metadata(dict(settings.Settings().__dict__), ["concast", "exp", "transport"])
    check_record(provenance.finish(m))
    assert "default_tcp_cc" in m
    c = ctp.metadata(ctp.Settings(), "I", ["concast", "exp", "ctp"])
    check_record(provenance.finish(c))
    assert c["tables"] == "I"
