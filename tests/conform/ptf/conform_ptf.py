"""The conformance suite's router tests under PTF's runner (PyPI `ptf`), for P4 users:

    ptf --test-dir tests/conform/ptf --interface 0@IFACE_TO_CHILDREN --interface 1@IFACE_TO_R \
        --test-params "addr='s1=10.1.1.2,rx=10.2.1.2';dut_addr='10.0.0.1,10.1.1.1,10.2.1.1'"

Port 0 faces the children (s1), port 1 faces R (rx); the test parameters are those of
`concast conform --ports` (addr, dut_addr, optional dut_mac, and pcaps: a folder for the
pcaps of failed tests). This is a thin adapter, not a second suite: for each test function
of tests/conform (and each of its parametrized cases) it makes a PTF test class that calls
that very function, with the pytest fixtures it asks for supplied from PTF's dataplane.
"""
from __future__ import annotations

import atexit
import importlib.util
import inspect
import re
import sys
import tempfile
from pathlib import Path

import ptf
import ptf.dataplane
import pytest
from ptf import testutils
from ptf.base_tests import BaseTest

SUITE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SUITE))
sys.path.append(str(SUITE.parent / "system"))     # hostdtools, for test_csp's trap spec

from concast.conform import specids  # noqa: E402
from concast.conform.ports import parse  # noqa: E402
from conform_target import on_ports  # noqa: E402
from conform_wire import Wire  # noqa: E402

# The router's tests; test_receiver and test_sender check our own hostd on networks they build.
MODULES = ("test_forwarding", "test_csp", "test_signing", "test_mplex", "test_spec_checks")
PORT_OF = {"s1": 0, "rx": 1}


class PtfWire(Wire):
    """One end of the suite on a PTF dataplane port (device 0)."""

    def __init__(self, role: str, iface: str, log, ip: str) -> None:
        mac = (Path("/sys/class/net") / iface / "address").read_text().strip()
        super().__init__(role, mac, "", log, ip)
        self.port = PORT_OF[role]

    def _send(self, frame: bytes) -> None:
        ptf.dataplane_instance.send(0, self.port, frame)

    def _recv(self, timeout: float) -> bytes | None:
        got = ptf.dataplane_instance.poll(device_number=0, port_number=self.port,
                                          timeout=max(timeout, 0.0))
        return bytes(got.packet) if isinstance(got, ptf.dataplane.DataPlane.PollSuccess) else None


_state: dict = {}


def target():
    """The suite's Target on PTF's ports 0 and 1, made once per run."""
    if "target" not in _state:
        params = testutils.test_params_get()
        pmap = ptf.config["port_map"]
        if (0, 0) not in pmap or (0, 1) not in pmap:
            raise RuntimeError("give PTF two ports: --interface 0@IFACE (children) "
                               "--interface 1@IFACE (R)")
        dut = parse(f"s1={pmap[(0, 0)]},rx={pmap[(0, 1)]}", params.get("addr"),
                    params.get("dut_addr"), params.get("dut_mac"))
        _state["target"] = on_ports(dut, make_port=PtfWire)
        _state["pcaps"] = Path(params.get("pcaps") or tempfile.mkdtemp(prefix="conform-ptf-"))
    return _state["target"]


def module_fixture(module, name: str):
    """A module-scoped fixture of a suite module (test_mplex's `group`), made once."""
    key = (module.__name__, name)
    if key not in _state:
        fixture = getattr(module, name)
        make = getattr(fixture, "__wrapped__", fixture)
        _state[key] = make(target())
    return _state[key]


def cases(func) -> list[tuple[str, dict, tuple]]:
    """(case id, parameters, spec ids) of a test function, one per parametrized case."""
    marks = getattr(func, "pytestmark", [])
    own = tuple(i for m in marks if m.name == "spec" for i in m.args)
    param = next((m for m in marks if m.name == "parametrize"), None)
    if param is None:
        return [("", {}, own)]
    name, values = param.args[0], param.args[1]
    ids = param.kwargs.get("ids")
    out = []
    for n, v in enumerate(values):
        if isinstance(v, type(pytest.param(None))):
            value, pid = v.values[0], v.id
            extra = tuple(i for m in v.marks if m.name == "spec" for i in m.args)
        else:
            value, pid, extra = v, None, ()
        pid = pid or (ids[n] if ids else str(value))
        out.append((pid, {name: value}, own + extra))
    return out


def make_test(module, func, case: str, params: dict, spec: tuple):
    sentences = specids.spec_ids()

    def runTest(self):
        t = target()
        self.properties = {}
        given = {"wire": lambda: t.for_test(self),
                 "target": lambda: t,
                 "tmp_path": lambda: Path(tempfile.mkdtemp(prefix="conform-ptf-")),
                 "record_property": lambda: lambda k, v: self.properties.__setitem__(k, v)}
        failure = None
        try:
            kwargs = dict(params)
            for arg in inspect.signature(func).parameters:
                if arg not in kwargs:
                    kwargs[arg] = given[arg]() if arg in given else module_fixture(module, arg)
            func(**kwargs)
        except pytest.skip.Exception as e:
            self.skipTest(str(e))
        except (pytest.fail.Exception, AssertionError) as e:
            failure = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if failure is not None:         # outside the handler: no chained traceback
            log = getattr(self, "conform_log", None)
            where = ""
            if log is not None and log.frames:
                pcap = log.write_pcap(_state["pcaps"] / f"{type(self).__name__}.pcap")
                where = f"\n  pcap: {pcap}"
            self.fail(f"[{spec[0]}] {sentences.get(spec[0], '')[:200]}\n  got: {failure}{where}")

    label = func.__name__ + (f"__{re.sub(r'[^A-Za-z0-9_]', '_', case)}" if case else "")
    doc = f"[{' '.join(spec)}] {func.__name__}" + (f"[{case}]" if case else "")
    return label, type(label, (BaseTest,), {"runTest": runTest, "__doc__": doc, "spec": spec})


def _load(name: str):
    """A suite module by its path (tests/system has modules of the same names)."""
    spec = importlib.util.spec_from_file_location(f"conform_suite_{name}", SUITE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _classes() -> dict:
    out = {}
    for name in MODULES:
        mod = _load(name)
        for fname, func in vars(mod).items():
            if fname.startswith("test_") and inspect.isfunction(func):
                for case, params, spec in cases(func):
                    label, cls = make_test(mod, func, case, params, spec)
                    out[label] = cls
    return out


globals().update(_classes())        # PTF finds the TestCase classes among the globals


@atexit.register
def _close() -> None:
    t = _state.get("target")
    if t is not None:
        for p in t.ports.values():
            p.close()
