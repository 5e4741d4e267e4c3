"""Helpers for the system tests on the BMv2 data plane: a tree of simple_switch_grpc
routers, and the OVS modules' test bodies run again on it."""
from __future__ import annotations

import importlib
import subprocess

import pytest

from concast import ROOT
from concast.controller.p4 import pipeline as P
from concast.controller.p4.switch import tools_missing
from concast.topologies import tree

WHY_NOT = tools_missing()
# Every BMv2 test module carries these: skipped, with the reason, without p4c and BMv2.
MARKS = [pytest.mark.mininet, pytest.mark.p4,
         pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")]


def bodies(name: str):
    """An OVS test module, imported only when a BMv2 test runs (pytest imports its own copy
    in importlib mode; importing it at collection would run its module fixtures twice)."""
    return importlib.import_module(name)


def ensure_p4_build() -> None:
    """Skips without the toolchain; builds the P4 program if it is not built yet."""
    why = tools_missing()
    if why:
        pytest.skip(why)
    if not (P.JSON_PATH.exists() and P.P4INFO_PATH.exists()):
        r = subprocess.run(["make", "p4"], cwd=ROOT, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            pytest.fail(f"make p4 failed: {r.stdout[-1000:]}{r.stderr[-1000:]}")


def bmv2_tree(tmp_path_factory, name: str):
    """tree(levels=2, fanout=2, senders=8) on BMv2, started (P4 program built if needed)."""
    ensure_p4_build()
    return tree(levels=2, fanout=2, senders=8, dataplane="bmv2").start(
        run_dir=tmp_path_factory.mktemp(name))
