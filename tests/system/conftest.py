"""System tests: real Mininet networks on userspace Open vSwitch.

Tests marked `mininet` skip, with the reason, unless we are root, Mininet imports and
Open vSwitch answers. Shared helpers are in systools.py (importable from the tests:
this directory is put on sys.path here, as pytest's importlib mode does not).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from systools import CpuPort  # noqa: E402


def why_not_mininet() -> str | None:
    if os.geteuid() != 0:
        return "needs root (Mininet, network namespaces, Open vSwitch)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return ("mininet is not importable: run pytest with .venv/bin/python "
                "(Debian's python3 site-packages hold Mininet)")
    for tool in ("ovs-vsctl", "ovs-ofctl", "tcpdump", "ip"):
        if not shutil.which(tool):
            return f"{tool} is not installed (make setup)"
    from concast.controller.ovs.ofctl import ovs_running
    if not ovs_running():
        return "Open vSwitch is not running (bash scripts/setup.sh starts it)"
    return None


@pytest.fixture(scope="session", autouse=True)
def runs_in_pytest_tmp(tmp_path_factory):
    """Networks keep their run directories (logs, configs, sockets) in pytest's temporary
    space, which pytest prunes, rather than adding one to /tmp/concast/runs per test."""
    os.environ["CONCAST_RUNS_DIR"] = str(tmp_path_factory.mktemp("runs"))


def pytest_configure(config):
    # Debian's Mininet compares OVS versions with distutils; not our warning to fix.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:mininet.node")


def pytest_collection_modifyitems(config, items):
    reason = None
    checked = False
    for item in items:
        if item.get_closest_marker("mininet") is None:
            continue
        if not checked:
            reason, checked = why_not_mininet(), True
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def cpu_port():
    opened: list[CpuPort] = []

    def open_port(iface: str) -> CpuPort:
        p = CpuPort(iface)
        opened.append(p)
        return p
    yield open_port
    for p in opened:
        p.close()


@pytest.fixture(scope="module")
def emulated_servers():
    """Two emulated servers, a and b, for a module's cluster tests (clustertools.py): skipped
    with the reason where sshd and namespaces cannot be had; removed after the module, and
    anything of them left behind fails it."""
    from clustertools import emulated
    with emulated(["a", "b"]) as servers:
        yield servers
