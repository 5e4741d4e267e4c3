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
                "python", "scapy", "kernel", "p4c", "bmv2"}
MACHINE_KEYS = {"host", "kernel", "cpus", "cpu_model", "mem_total_mib", "loadavg_at_start",
                "python", "netem"}


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


def test_exp_transport_writes_a_new_folder_per_run_with_meta(tmp_path, monkeypatch):
    from concast.topologies.experiments.transport import runner
    monkeypatch.setattr(runner, "missing_prerequisites", lambda: None)
    monkeypatch.setattr(runner, "unavailable_ccs", lambda protos, cc: [])
    monkeypatch.setattr(runner, "run", lambda s, work: {"rows": [], "third_party": None})
    monkeypatch.setattr(runner, "table", lambda rows: "")

    def save(res, out):
        (out / "transport.json").write_text(json.dumps(res, default=str))
        return [out / "transport.json"]
    monkeypatch.setattr(runner, "save", save)
    monkeypatch.setattr(tools, "RESULTS", tmp_path / "results")
    try:
        assert runner.main(["--count", "1"]) == 0
        assert runner.main(["--count", "2"]) == 0
    finally:        # main() routes SIGINT and SIGTERM into KeyboardInterrupt for its run
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    runs = sorted((tmp_path / "results" / "transport").iterdir())
    assert len(runs) == 2
    for run in runs:
        check_record(json.loads((run / "meta.json").read_text()))
        check_record(json.loads((run / "transport.json").read_text())["meta"])


def test_demo_writes_a_new_folder_per_run_with_meta(tmp_path, monkeypatch, capsys):
    from concast import demo
    monkeypatch.setattr(tools, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(demo, "merge_stream", lambda out: None)     # the offline runner
    assert demo.main(None) == 0 and demo.main(None) == 0
    runs = sorted((tmp_path / "results" / "demo").iterdir())
    assert len(runs) == 2
    for run in runs:
        check_record(json.loads((run / "meta.json").read_text()))
        assert (run / "concast-vectors.pcap").stat().st_size > 0
    assert demo.main(str(tmp_path / "given")) == 0
    check_record(json.loads((tmp_path / "given" / "meta.json").read_text()))


def test_conform_writes_meta_into_a_new_folder(tmp_path, monkeypatch):
    import pytest as real_pytest
    from concast.conform import run as conform
    monkeypatch.setattr(tools, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(conform.prereq, "first", lambda *why: None)
    monkeypatch.setattr(real_pytest, "main", lambda args, plugins: 5)   # nothing collected
    conform.main(["--section", "2"])
    (run,) = (tmp_path / "results" / "conform").iterdir()
    m = json.loads((run / "meta.json").read_text())
    check_record(m)
    assert m["params"]["section"] == "2" and m["outcome"]["ok"] is False


def test_a_bench_script_runs_in_a_folder_of_its_own(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tools, "RESULTS", tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    seen = {}

    def main():
        import sys
        seen["argv"] = sys.argv[1:]
        (tmp_path / "figs.json").write_text("{}")
        print("a figure: 42")
        return 0
    monkeypatch.setattr("sys.argv", ["bench_x.py", "--seconds", "1", "--json", "figs.json"])
    assert provenance.main_in_run("bench-x", main) == 0
    assert provenance.main_in_run("bench-x", main, ["--out", str(tmp_path / "o")]) == 0
    assert seen["argv"] == []                           # --out is not the script's option
    (run,) = (tmp_path / "results" / "bench-x").iterdir()
    m = json.loads((run / "meta.json").read_text())
    check_record(m)
    assert m["params"]["argv"] == ["--seconds", "1", "--json", "figs.json"] and m["exit"] == 0
    assert (run / "figs.json").is_file() and "a figure: 42" in (run / "output.txt").read_text()
    check_record(json.loads((tmp_path / "o" / "meta.json").read_text()))


def test_the_record_says_whether_the_kernel_has_netem():
    import os
    from concast.topologies import links
    got = provenance.machine()["netem"]
    assert got == (links.netem_available() if os.geteuid() == 0 else None)


@pytest.mark.parametrize("status", [2, 3])
def test_a_refused_bench_run_leaves_no_folder_it_made(tmp_path, monkeypatch, capsys, status):
    monkeypatch.setattr(tools, "RESULTS", tmp_path / "results")
    monkeypatch.setattr("sys.argv", ["bench_x.py", "--bad"])
    assert provenance.main_in_run("bench-x", lambda: status) == status
    assert not any((tmp_path / "results" / "bench-x").iterdir())
    given = tmp_path / "given"
    given.mkdir()                                       # the user's own folder stays, with its record
    assert provenance.main_in_run("bench-x", lambda: status, ["--out", str(given)]) == status
    assert json.loads((given / "meta.json").read_text())["exit"] == status
    assert provenance.main_in_run("bench-x", lambda: 1) == 1   # a run that failed keeps its record
    (run,) = (tmp_path / "results" / "bench-x").iterdir()
    assert json.loads((run / "meta.json").read_text())["exit"] == 1
