"""The conformance suite (docs/conformance.md): run it with `concast conform`, which passes
--conform-dataplane; plain `pytest tests/` skips it (it builds its own network).

Target: s1 - r1 - rx on the chosen data plane. The suite plays both ends itself: s1 is a
child joining and sending, rx is the receiver R answering joins and serving the spec, so
the router under test is checked alone, from the wire. With --conform-target plain, r1 is a
concast-oblivious router (no routerd): a target that must fail the router's tests.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SYSTEM = HERE.parent / "system"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(SYSTEM))


def _system_conftest():
    """tests/system's checks (root, Mininet, OVS), loaded under another module name."""
    spec = importlib.util.spec_from_file_location("concast_system_conftest",
                                                  SYSTEM / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def pytest_addoption(parser):
    g = parser.getgroup("conform", "concast conformance suite")
    g.addoption("--conform-dataplane", choices=["linux", "ovs", "bmv2"], default=None,
                help="build s1 - r1 - rx on this data plane and run the suite")
    g.addoption("--conform-target", choices=["ours", "plain"], default="ours",
                help="ours: routerd on r1; plain: r1 is an oblivious router (must fail)")
    g.addoption("--conform-pcaps", default=None, help="folder for failed tests' pcaps")
    g.addoption("--conform-p4", default=None,
                help="JSON,P4INFO: a compiled user program in place of p4src/concast.p4 (bmv2)")
    g.addoption("--conform-ports", default=None,
                help="s1=IFACE,rx=IFACE: run against an external device on these interfaces")
    g.addoption("--conform-addr", default=None, help="s1=IP,rx=IP: the suite's addresses")
    g.addoption("--conform-dut-addr", default=None, help="IP[,IP...]: the device's addresses")
    g.addoption("--conform-dut-mac", default=None, help="the device's MAC (default: ARP)")


def pytest_configure(config):
    config.addinivalue_line("markers", "spec(id): the protocol.md sentence a test checks")
    # also registered in pyproject.toml; here for a wheel's copy, which runs without it
    config.addinivalue_line("markers", "mininet: needs root, Mininet and Open vSwitch")
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:mininet.node")


def pytest_collection_modifyitems(config, items):
    mine = [i for i in items if Path(str(i.fspath)).parent == HERE]
    if not mine:
        return
    reason = None
    if config.getoption("--conform-ports"):
        if os.geteuid() != 0:
            reason = "--ports needs root (raw sockets on the interfaces)"
    elif config.getoption("--conform-dataplane") is None:
        reason = "the conformance suite runs under `concast conform --dataplane ...`"
    else:
        reason = _system_conftest().why_not_mininet()
    for item in mine:
        if item.get_closest_marker("spec") is None:
            raise pytest.UsageError(f"{item.nodeid}: every conformance test names its spec id")
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    log = getattr(item, "conform_log", None)
    if report.when == "call" and report.failed and log is not None and log.frames:
        folder = Path(item.config.getoption("--conform-pcaps") or
                      item.config._tmp_path_factory.getbasetemp() / "conform-pcaps")
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.name)
        path = log.write_pcap(folder / f"{name}.pcap")
        report.sections.append(("conform pcap", str(path)))
        report.user_properties.append(("pcap", str(path)))


def device_under_test(config):
    """The --conform-ports description, checked (concast.conform.ports), or None."""
    from concast.conform.ports import parse
    if not config.getoption("--conform-ports"):
        return None
    return parse(config.getoption("--conform-ports"), config.getoption("--conform-addr"),
                 config.getoption("--conform-dut-addr"), config.getoption("--conform-dut-mac"))


@pytest.fixture(scope="session")
def target(request, tmp_path_factory):
    from conform_target import build, build_on_ports
    dut = device_under_test(request.config)
    if dut is not None:
        yield from build_on_ports(dut)
        return
    yield from build(request.config.getoption("--conform-dataplane"),
                     request.config.getoption("--conform-target"),
                     tmp_path_factory.mktemp("conform"),
                     request.config.getoption("--conform-p4"))


@pytest.fixture
def wire(target, request):
    """The target with this test's frame log; both ends drained of earlier traffic."""
    return target.for_test(request.node)
