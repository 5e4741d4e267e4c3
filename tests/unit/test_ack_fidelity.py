"""The ACK study's fidelity check (ackstudy/fidelity.py) and how Table 1 treats the runs that
break it (report.summarise)."""
from __future__ import annotations

import pytest

from concast.topologies.experiments.ackstudy import fidelity, report

STAT = """cpu  100 5 50 800 10 1 2 7 0 0
cpu0 50 2 25 400 5 0 1 3 0 0
"""


def test_cpu_shares_count_iowait_as_idle_and_report_steal():
    before = fidelity.cpu_times(STAT)
    after = dict(before, user=before["user"] + 60, idle=before["idle"] + 30,
                 iowait=before["iowait"] + 5, steal=before["steal"] + 5)
    shares = fidelity.cpu_shares(before, after)
    assert shares == pytest.approx({"cpu_idle_pct": 35.0, "cpu_steal_pct": 5.0})


def test_cpu_times_refuses_text_without_the_cpu_line():
    with pytest.raises(ValueError):
        fidelity.cpu_times("intr 1 2 3\n")


def link(a: str, b: str, frames: int, over: int) -> dict:
    return {"a": {"name": a}, "b": {"name": b},
            "ab": {"late_frames": frames, "late_over_bound": over}, "ba": {}}


def test_lateness_is_split_into_access_and_core_links():
    links = [link("c1-eth0", "r1-eth1", 100, 3), link("r1-eth2", "r2-eth1", 50, 1)]
    by = fidelity.lateness_by_class(links, hosts={"c1", "sv"})
    assert by == {"access": {"frames": 100, "over": 3}, "core": {"frames": 50, "over": 1}}


def test_a_run_over_the_late_share_bound_is_unfaithful_and_says_why():
    zero = {"access": {"frames": 0, "over": 0}, "core": {"frames": 0, "over": 0}}
    after = {"access": {"frames": 900, "over": 20}, "core": {"frames": 100, "over": 0}}
    row = fidelity.measure({"late_bound_us": 500, "late_p99_us": 900}, zero, after,
                           {"cpu_idle_pct": 1.0, "cpu_steal_pct": 0.0})
    assert row["emu_late_share_pct"] == pytest.approx(2.0)
    assert row["emu_late_share_core_pct"] == 0.0
    v = fidelity.verdict(row)
    assert v["faithful"] is False and "500 us" in v["unfaithful_why"]
    row["emu_late_share_pct"] = 0.5
    assert fidelity.verdict(row) == {"faithful": True, "unfaithful_why": ""}
    row["late_records"] = 2
    assert "MaxTotalDelay" in fidelity.verdict(row)["unfaithful_why"]


def run(mode: str, seed: int, pct: float, ok: bool) -> dict:
    return {"env": "low-loss", "delay_ms": 10, "mode": mode, "seed": seed, "failed": 0,
            "combined_pct": pct if mode == "on" else None, "mean_bundle": 2.0,
            "session_tput_mbps": 1.0, "agg_tput_mbps": 1.0, "faithful": ok}


def test_table1_leaves_unfaithful_runs_out_unless_kept():
    rows = [run("on", 1, 90.0, True), run("off", 1, 0, True),
            run("on", 2, 10.0, False), run("off", 2, 0, True)]
    cell = report.summarise(rows)["low-loss"][10]
    assert cell["combined_pct"]["mean"] == 90.0 and cell["combined_pct"]["n"] == 1
    assert (cell["runs"], cell["unfaithful"]) == (4, 1)
    assert sorted(cell["points"]) == [(10.0, False), (90.0, True)]
    kept = report.summarise(rows, keep_unfaithful=True)["low-loss"][10]
    assert kept["combined_pct"]["mean"] == 50.0
    assert "| 3/4 |" in report.table1_markdown(report.summarise(rows))


def test_plots_draw_a_cell_whose_runs_were_all_left_out(tmp_path):
    rows = [run("on", 1, 90.0, False), run("off", 1, 0, False)]
    summary = report.summarise(rows)
    assert summary["low-loss"][10]["tput_norm"]["mean"] is None
    written = report.plot(summary, tmp_path)
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)
