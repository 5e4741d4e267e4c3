"""The Python layers of docs/architecture.md ("The Python project") held against the code:
every import of a concast module, at the top of a file or inside a function, goes to the
importer's own floor or one below, and no modules import each other in a ring.

Floors: 1 foundation, 2 data planes and daemons' clients, 3 networks and experiments,
4 the command line. A new module is placed by its folder (controller/, hosts/: 2;
topologies/: 3); one new in scripts/concast/ counts as command line until FOUNDATION names it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from concast import tools

FOLDERS = {"scripts/concast": "concast", "controller": "concast.controller",
           "hosts": "concast.hosts", "topologies": "concast.topologies",
           "tests/vectors": "concast.vectors"}
FOUNDATION = {"concast", "concast.tools", "concast.netns", "concast.netmodel", "concast.procs",
              "concast.registry", "concast.sysfs", "concast.inet", "concast.scapy",
              "concast.argtypes", "concast.prereq", "concast.progress", "concast.pcapfile",
              "concast.offline", "concast.provenance",
              "concast.vectors"}
NETWORKS = {"concast.topologies", "concast.perfpath", "concast.perfrun"}
DAEMONS = {"concast.controller", "concast.hosts"}
NAMES = ("foundation", "data planes and daemons", "networks and experiments", "command line")


def floor(module: str) -> int:
    def under(group):
        return any(module == g or module.startswith(g + ".") for g in group)
    if under(FOUNDATION - {"concast"}) or module == "concast":
        return 1
    if under(DAEMONS):
        return 2
    if under(NETWORKS):
        return 3
    return 4


def modules() -> dict[str, Path]:
    root = tools.CHECKOUT
    found = {}
    for folder, name in FOLDERS.items():
        for f in (root / folder).rglob("*.py"):
            parts = [p for p in f.relative_to(root / folder).with_suffix("").parts
                     if p != "__init__"]
            found[".".join([name, *parts])] = f
    return found


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            wanted = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names]
            wanted = [s for s in subs if s in known] or [base]
        else:
            continue
        for w in wanted:
            while w and w not in known:
                w = w.rpartition(".")[0]
            if w and w != module:
                out.add(w)
    return out


pytestmark = pytest.mark.skipif(tools.CHECKOUT is None, reason="reads a checkout's sources")


@pytest.fixture(scope="module")
def graph():
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def test_the_layers_cover_the_package(graph):
    assert "concast.tools" in graph and "concast.topologies.net" in graph
    assert {floor(m) for m in graph} == {1, 2, 3, 4}


def test_no_import_runs_up_a_floor(graph):
    up = sorted(f"{m} ({NAMES[floor(m) - 1]}) imports {t} ({NAMES[floor(t) - 1]})"
                for m, targets in graph.items() for t in targets if floor(t) > floor(m))
    assert not up, "\n".join(up)


def test_no_import_cycles(graph):
    index, low, stack, on, rings = {}, {}, [], set(), []

    def visit(v):                                       # Tarjan's strongly connected parts
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                rings.append(sorted(part))
    for v in graph:
        if v not in index:
            visit(v)
    assert not rings, rings


def test_the_checker_sees_an_upward_import(tmp_path):
    """The rule can fail: a foundation module importing the CLI is caught."""
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from concast.mplexcli import cmd_mplex\n")
    known = {"concast.tools": f, "concast.mplexcli": f}
    got = imports("concast.tools", f, known)
    assert got == {"concast.mplexcli"} and floor("concast.mplexcli") > floor("concast.tools")
