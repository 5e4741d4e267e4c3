"""The Rust layers of docs/architecture.md ("Layers") held against the Cargo manifests: every
crate depends (in [dependencies], [build-dependencies] and target-specific dependencies; dev-
dependencies are test code and may reach anywhere) only on crates in its own top-level folder's
floor or a lower one.

Floors, ground first: lib/ (wire formats, daemon plumbing), mergespecs/ (SDK, engine, specs),
controller/ (CSP, routerd), hosts/ (hostd, mplex, transport), topologies/ (link emulator), and
tests/ above everything. A crate in a top-level folder the table does not name fails the test,
so a new folder is placed on purpose.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from concast import tools

FLOORS = {"lib": 1, "mergespecs": 2, "controller": 3, "hosts": 4, "topologies": 5, "tests": 6}
SKIP_DIRS = {"target", "build", ".git", ".venv", "node_modules", "__pycache__"}
KINDS = ("dependencies", "build-dependencies")

pytestmark = pytest.mark.skipif(tools.CHECKOUT is None, reason="reads a checkout's manifests")


def manifests(root: Path) -> list[Path]:
    """Every Cargo.toml below root that declares a package (workspace roots without one are
    left out), skipping build outputs."""
    found = []
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        if "Cargo.toml" in files:
            path = Path(here) / "Cargo.toml"
            if "package" in tomllib.loads(path.read_text()):
                found.append(path)
    return found


def path_dependencies(manifest: Path) -> list[tuple[str, Path]]:
    """(name, folder) of each non-dev path dependency, target-specific ones included."""
    doc = tomllib.loads(manifest.read_text())
    tables = [doc.get(k, {}) for k in KINDS]
    for target in doc.get("target", {}).values():
        tables += [target.get(k, {}) for k in KINDS]
    out = []
    for table in tables:
        for name, spec in table.items():
            if isinstance(spec, dict) and "path" in spec:
                out.append((name, (manifest.parent / spec["path"]).resolve()))
    return out


def folder(path: Path, root: Path) -> str:
    return path.resolve().relative_to(root.resolve()).parts[0]


def violations(root: Path, floors: dict[str, int]) -> list[str]:
    bad = []
    for m in manifests(root):
        crate = m.parent
        mine = folder(crate, root)
        if mine not in floors:
            bad.append(f"{crate.relative_to(root)}: folder {mine}/ has no floor")
            continue
        for name, dep in path_dependencies(m):
            theirs = folder(dep, root)
            if floors.get(theirs, len(floors) + 1) > floors[mine]:
                bad.append(f"{crate.relative_to(root)} ({mine}/, floor {floors[mine]}) depends "
                           f"on {name} in {dep.relative_to(root.resolve())} "
                           f"({theirs}/, floor {floors.get(theirs, '?')})")
    return bad


def test_the_manifests_are_read():
    found = {str(m.parent.relative_to(tools.CHECKOUT)) for m in manifests(tools.CHECKOUT)}
    assert {"lib/wire", "lib/daemon", "mergespecs/engine", "controller/routerd",
            "hosts/hostd", "topologies/linkemu", "mergespecs/specs/sum"} <= found
    deps = dict(path_dependencies(tools.CHECKOUT / "controller" / "routerd" / "Cargo.toml"))
    assert deps["concast-wire"] == (tools.CHECKOUT / "lib" / "wire").resolve()
    assert "concast-aggregate" not in deps          # a dev-dependency


def test_no_crate_depends_up_a_floor():
    bad = violations(tools.CHECKOUT, FLOORS)
    assert not bad, "\n".join(bad)


def test_a_wrong_floor_table_fails():
    """The rule can fail: put lib/ above controller/ and every crate using wire is caught."""
    wrong = dict(FLOORS, lib=4)
    bad = violations(tools.CHECKOUT, wrong)
    assert any(b.startswith("controller/routerd ") and "lib/wire" in b for b in bad), bad
    assert any(b.startswith("mergespecs/engine ") for b in bad), bad


def test_the_old_layout_fails(tmp_path):
    """The arrow this table forbids: mergespecs depending on a crate inside controller/, and
    a crate in a folder with no floor."""
    def crate(where: str, deps: dict[str, str], dev: dict[str, str] | None = None):
        d = tmp_path / where
        d.mkdir(parents=True)
        text = f'[package]\nname = "{d.name}"\n\n[dependencies]\n'
        text += "".join(f'{n} = {{ path = "{p}" }}\n' for n, p in deps.items())
        if dev:
            text += "\n[dev-dependencies]\n"
            text += "".join(f'{n} = {{ path = "{p}" }}\n' for n, p in dev.items())
        (d / "Cargo.toml").write_text(text)
    crate("controller/wire", {})
    crate("mergespecs/engine", {"wire": "../../controller/wire"})
    crate("controller/routerd", {"engine": "../../mergespecs/engine", "wire": "../wire"},
          dev={"linkemu": "../../topologies/linkemu"})
    crate("topologies/linkemu", {"wire": "../../controller/wire"})
    crate("elsewhere/x", {})
    bad = violations(tmp_path, FLOORS)
    assert len(bad) == 2, bad
    assert bad[0].startswith("elsewhere/x: folder elsewhere/ has no floor")
    assert bad[1].startswith("mergespecs/engine (mergespecs/, floor 2) depends on wire")
