"""`concast conform` end to end on the Linux data plane: one small section against our
router conforms (exit 0, table, JUnit with spec ids); the same section against a router
without concast (no routerd, nothing diverted) fails, naming the sentences it breaks."""
from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import pytest
from hostdtools import PYTHON, missing_builds

from concast import ROOT

pytestmark = pytest.mark.mininet


def conform(*args: str) -> subprocess.CompletedProcess:
    why = missing_builds()
    if why:
        pytest.skip(why)
    return subprocess.run([PYTHON, "-m", "concast.cli", "conform", "--dataplane", "linux", *args],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=600)


def test_our_router_conforms_to_section_2_8_with_a_junit_report(tmp_path):
    junit = tmp_path / "conform.xml"
    r = conform("--section", "2.8", "--junit", str(junit))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "section 2.8" in r.stdout and "the target conforms" in r.stdout
    row = next(line for line in r.stdout.splitlines() if line.startswith("2.8 "))
    tests, passed, failed, skipped = map(int, row.split()[1:])
    assert tests == passed >= 4 and failed == skipped == 0
    cases = ET.parse(junit).getroot().iter("testcase")
    specs = [p.get("value") for c in cases for p in c.iter("property") if p.get("name") == "spec"]
    assert specs and all(any(i.startswith("2.8-") for i in s.split()) for s in specs), specs


def test_a_router_without_concast_fails_section_2_8_with_the_right_ids(tmp_path):
    r = conform("--section", "2.8", "--target", "plain", "--pcaps", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the target does NOT conform" in r.stdout
    for spec in ("[2.8-1]", "[2.8-2]", "[2.8-4]"):
        assert spec in r.stdout, f"{spec} not among the failures:\n{r.stdout}"
    assert "spec: JOIN from child C, flow unknown" in r.stdout
    assert list(tmp_path.glob("*.pcap")), "failed tests saved no pcap"
