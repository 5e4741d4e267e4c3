"""`concast exp mtp --scenario sim --quick`: the dissertation's simulator (section 7.4) in virtual
time, end to end in seconds: CSV, PNG, metadata in a new timestamped folder, and the two runs the
paper's claims rest on (a loss-free LAN both fill; the two-router path, MTP far above TCP)."""
import csv
import json
import os

import pytest

from concast.perf import binary
from concast.topologies.experiments.mtp import PRINTED, sim


def _mtping() -> bool:
    try:
        return os.path.isfile(binary("mtping"))
    except (OSError, SystemExit, RuntimeError):
        return False


pytestmark = pytest.mark.skipif(not _mtping(), reason="mtping not built (cargo build --release -p concast-transport)")


def test_quick_sim_writes_csv_png_meta_and_reproduces_the_lan_and_two_router_runs(tmp_path, capsys):
    assert sim.main(["--quick", "--out", str(tmp_path)]) == 0
    [out] = list(tmp_path.iterdir())
    assert out.name.startswith("sim-")
    for name in ("sim-printed.csv", "sim-sweep.csv", "sim.png", "sim-meta.json", "sim-table.md"):
        assert (out / name).stat().st_size > 0, name
    meta = json.loads((out / "sim-meta.json").read_text())
    assert meta["git"]["rev"] and meta["params"]["seeds"] == [1, 2, 3]
    rows = list(csv.DictReader((out / "sim-printed.csv").open()))
    assert {r["proto"] for r in rows} == {"mtp", "mtp-1k", "mtp-listing", "tcp"}
    s = sim.summary(rows)
    for label in ("tcp", "mtp@50ms", "mtp@500ms"):
        assert s[("lan", 0.0, label)][0] == pytest.approx(PRINTED["lan"]["mtp"]["throughput"], rel=0.02)
    # the paper: MTP 243.0 against TCP 27.5 (8.8x)
    mtp, tcp = s[("two-routers", 0.03, "mtp@50ms")][0], s[("two-routers", 0.03, "tcp")][0]
    assert mtp == pytest.approx(243.0, rel=0.1) and tcp == pytest.approx(27.5, rel=0.25)
    sweep = sim.summary(list(csv.DictReader((out / "sim-sweep.csv").open())))
    losses = sorted({k[1] for k in sweep})
    assert losses[0] == 0.0 and losses[-1] == pytest.approx(0.6)
    assert "| two-routers |" in capsys.readouterr().out


def test_bad_arguments_exit_with_a_message_not_a_traceback(tmp_path):
    with pytest.raises(SystemExit) as e:
        sim.main(["--step", "2", "--out", str(tmp_path)])
    assert e.value.code == 2
