"""`concast net up --p4 FILE --bmv2-log` and `concast router stats|table` on BMv2 routers
(issue #27): the user's program compiled by the one compile step and put on every switch, each
switch's log in the run folder, the P4 counters in `router stats`, the tables read by `router
table` beside the control plane's primary connection. Skips without p4c-bm2-ss and
simple_switch_grpc (they are in no registry; docs/dataplane-bmv2.md)."""
from __future__ import annotations

import json
import subprocess

import pytest

from bmv2tools import MARKS                 # tests/system is on sys.path (its conftest)
from hostdtools import missing_builds

from concast import ROOT

pytestmark = MARKS
CONCAST = [str(ROOT / ".venv" / "bin" / "python"), "-m", "concast.cli"]

CHECK = """
import json, subprocess, sys
concast = {concast!r}
tag = net.tag
stats = subprocess.run([*concast, "router", "stats", "r1", "--run", tag], capture_output=True,
                       text=True, timeout=60)
table = subprocess.run([*concast, "router", "table", "r1", "--run", tag, "--json"],
                       capture_output=True, text=True, timeout=60)
print("STATS " + json.dumps({{"rc": stats.returncode, "out": stats.stdout, "err": stats.stderr}}))
print("TABLE " + json.dumps({{"rc": table.returncode, "out": table.stdout, "err": table.stderr}}))
print("RUNDIR " + str(net.run_dir))
"""


@pytest.fixture(autouse=True)
def built():
    why = missing_builds()
    if why:
        pytest.skip(why)


def line_of(out: str, key: str) -> str:
    return next(x[len(key) + 1:] for x in out.splitlines() if x.startswith(key + " "))


def test_own_program_with_logs_counters_and_tables(tmp_path):
    script = tmp_path / "check.py"
    script.write_text(CHECK.format(concast=CONCAST))
    p = subprocess.run([*CONCAST, "net", "up", "line", "--routers", "1", "--senders", "1",
                        "--dataplane", "bmv2", "--p4", str(ROOT / "p4src" / "concast.p4"),
                        "--bmv2-log", "--script", str(script)],
                       capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "compiling" in p.stdout and "BMv2 log of r1:" in p.stdout
    stats = json.loads(line_of(p.stdout, "STATS"))
    assert stats["rc"] == 0, stats
    dp = json.loads(stats["out"])["dataplane"]
    assert "error" not in dp, dp
    assert {"malformed", "diverted", "forwarded", "dropped"} <= set(dp["p4_counters"])
    assert "net-p4" in dp["p4info"]             # the user's program's P4Info, not build/p4's
    table = json.loads(line_of(p.stdout, "TABLE"))
    assert table["rc"] == 0, table
    rows = json.loads(table["out"])
    assert any(r["table"].endswith("ipv4_lpm") for r in rows)
    assert any(r["table"].endswith("divert_static") for r in rows)
    from pathlib import Path
    logs = [f.name for f in (Path(line_of(p.stdout, "RUNDIR")) / "bmv2").iterdir()]
    assert any(n.startswith("r1") for n in logs), logs
