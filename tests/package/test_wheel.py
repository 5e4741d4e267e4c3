"""The installed package, as a user gets it: `pip wheel .` builds a wheel, which goes into a
fresh venv in a temporary folder, and the `concast` command runs there from a directory
outside the checkout (docs/architecture.md, "The Python project").

The fresh venv is Debian's python3 with system site packages (Mininet), like scripts/setup.sh
makes; the third-party dependencies (Scapy, pytest, ...) are taken from the venv running this
test through a .pth line, so the test needs no network. That line adds a folder to sys.path
without running the .pth files inside it, so the checkout's editable install stays out.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from concast import tools

CHECKOUT = tools.CHECKOUT
BASE_PYTHON = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(
    CHECKOUT is None or not Path(BASE_PYTHON).exists(),
    reason="builds the wheel from a checkout with Debian's python3")


def run(argv, cwd, env=None, timeout=300) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=timeout)
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(concast executable, its venv's python, an empty working directory outside the
    checkout, the wheel's path)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheels = tmp / "dist"
    r = run([sys.executable, "-m", "pip", "wheel", CHECKOUT, "--no-deps", "--no-build-isolation",
             "--disable-pip-version-check", "-q", "-w", wheels], cwd=tmp)
    assert r.returncode == 0, f"pip wheel failed:\n{r.stdout}{r.stderr}"
    (wheel,) = wheels.glob("concast-*.whl")
    venv = tmp / "venv"
    r = run([BASE_PYTHON, "-m", "venv", "--system-site-packages", venv], cwd=tmp)
    assert r.returncode == 0, r.stderr
    python = venv / "bin" / "python"
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                  cwd=tmp).stdout.strip()
    (Path(purelib) / "zz-concast-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    r = run([python, "-m", "pip", "install", "--no-deps", "--no-index",
             "--disable-pip-version-check", "-q", wheel], cwd=tmp)
    assert r.returncode == 0, f"pip install failed:\n{r.stdout}{r.stderr}"
    cwd = tmp / "elsewhere"
    cwd.mkdir()
    return venv / "bin" / "concast", python, cwd, wheel


def clean_env() -> dict:
    """This environment without anything that points back at the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in (tools.BIN_ENV, tools.SPECS_ENV, tools.ROOT_ENV, "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(CHECKOUT)))
    return env


def test_the_wheel_holds_the_package_and_the_suite(installed):
    *_, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    for want in ("concast/cli.py", "concast/tools.py", "concast/scapy/csp.py",
                 "concast/topologies/experiments/transport/runner.py",
                 "concast/controller/ovs/__init__.py", "concast/hosts/client.py",
                 "concast/vectors/vectors.json"):
        assert want in names, f"{want} is not in the wheel"
    shared = {n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n}
    for want in ("share/concast/tests/conform/conftest.py", "share/concast/docs/protocol.md",
                 "share/concast/tests/system/hostdtools.py", "share/concast/p4src/concast.p4",
                 "share/concast/controller/routerd/config.schema.json"):
        assert want in shared, f"{want} is not in the wheel"
    assert not any(n.startswith("concast/tests") or "/test_" in n.split(".data/")[0]
                   for n in names if ".data/" not in n), "tests shipped as package modules"


def test_imports_come_from_the_venv_not_the_checkout(installed):
    _, python, cwd, _ = installed
    r = run([python, "-c", "import concast, concast.tools as t, concast.topologies as tp; "
             "print(concast.__file__); print(tp.__file__); print(t.CHECKOUT); print(t.ROOT)"],
            cwd=cwd, env=clean_env())
    assert r.returncode == 0, r.stderr
    pkg, topo, checkout, root = r.stdout.splitlines()
    venv = python.parent.parent
    assert Path(pkg).is_relative_to(venv) and Path(topo).is_relative_to(venv), r.stdout
    assert checkout == "None", "an installed wheel must not find a checkout"
    assert (Path(root) / "tests" / "conform" / "conftest.py").is_file()


def test_version(installed):
    concast, _, cwd, _ = installed
    r = run([concast, "--version"], cwd=cwd, env=clean_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["concast", metadata.version("concast")], r.stdout


def test_decode_a_vector(installed):
    concast, _, cwd, _ = installed
    vectors = json.loads((CHECKOUT / "tests/vectors/vectors.json").read_text())["vectors"]
    v = next(x for x in vectors if x["kind"] == "csp" and x["valid"])
    r = run([concast, "decode", v["hex"]], cwd=cwd, env=clean_env())
    assert r.returncode == 0, r.stderr
    assert " csp group=" in r.stdout and "CSP_Join" in r.stdout, r.stdout   # one line


def test_decode_rejects_bad_hex_without_a_traceback(installed):
    concast, _, cwd, _ = installed
    r = run([concast, "decode", "zz"], cwd=cwd, env=clean_env())
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr


def test_spec_run_through_the_lookup(installed):
    concast, _, cwd, _ = installed
    try:
        runner = tools.rust_binary("concast-spec")
        spec = tools.spec_module("gather")
    except tools.MissingTool as e:
        pytest.skip(str(e))
    example = CHECKOUT / "mergespecs/examples/gather.jsonl"
    argv = ["spec", "run", spec, "--input", example, "--param", "n=3"]
    env = clean_env()
    if shutil.which("concast-spec", path=env["PATH"]) is None:
        r = run([concast, *argv], cwd=cwd, env=env)     # nothing says where the binary is
        assert r.returncode == 3 and "CONCAST_BIN" in r.stderr, r.stderr   # docs/cli.md: 3 = missing prerequisite
    r = run([concast, "--bin-dir", runner.parent, *argv], cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    # the example's two rounds (its header): three senders, then two cut by the timeout
    assert "2 datagrams forwarded, 2 of them merged" in r.stdout, r.stdout
    r = run([concast, *argv], cwd=cwd, env={**env, tools.BIN_ENV: str(runner.parent)})
    assert r.returncode == 0 and "2 datagrams forwarded" in r.stdout, r.stderr


def test_conform_help(installed):
    concast, _, cwd, _ = installed
    r = run([concast, "conform", "--help"], cwd=cwd, env=clean_env())
    assert r.returncode == 0, r.stderr
    assert "--dataplane" in r.stdout and "--ports" in r.stdout, r.stdout
