"""`concast conform --p4 FILE.p4`: a user's P4 program compiled and checked on BMv2.

Where p4c-bm2-ss or simple_switch_grpc is missing (as on the project's own machines), the
command must say so and exit 3 (cannot test here), and the BMv2 runs skip. Where they are
installed, our p4src/concast.p4 conforms and tests/conform/p4/skip_options_walk.p4 (no
options walk) fails under the ids of the sentences it breaks.
"""
from __future__ import annotations

import subprocess

import pytest
from hostdtools import PYTHON

from concast import ROOT
from concast.controller.p4.switch import tools_missing

WHY_NOT = tools_missing()
BROKEN = ROOT / "tests" / "conform" / "p4" / "skip_options_walk.p4"
OURS = ROOT / "p4src" / "concast.p4"


def conform(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "concast.cli", "conform", *args], capture_output=True,
                          text=True, cwd=str(ROOT), timeout=timeout)


@pytest.mark.skipif(WHY_NOT is None, reason="p4c and BMv2 are installed: the real runs test --p4")
def test_without_p4c_or_bmv2_the_p4_path_says_so_and_exits_3():
    r = conform("--p4", str(BROKEN), timeout=60)
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"cannot test {BROKEN} here" in r.stderr
    assert "is not on PATH" in r.stderr and "--p4 runs the program on BMv2" in r.stderr


def test_a_p4_file_that_does_not_exist_is_a_usage_error():
    r = conform("--p4", "no/such/program.p4", timeout=60)
    assert r.returncode == 2 and "--p4: no file no/such/program.p4" in r.stderr, r.stderr


@pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")
@pytest.mark.mininet
@pytest.mark.p4
def test_a_program_without_the_options_walk_fails_with_the_right_ids():
    r = conform("--p4", str(BROKEN), "--section", "1")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"P4 program {BROKEN} on BMv2" in r.stdout
    for spec in ("[1-2]", "[1.1-8]"):
        assert spec in r.stdout, f"{spec} not among the failures:\n{r.stdout}"


@pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")
@pytest.mark.mininet
@pytest.mark.p4
def test_our_own_program_given_as_a_users_conforms():
    r = conform("--p4", str(OURS), "--section", "1")
    assert r.returncode == 0 and "the target conforms" in r.stdout, r.stdout + r.stderr
