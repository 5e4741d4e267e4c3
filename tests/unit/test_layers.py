"""The Python layers of docs/architecture.md ("The Python project") held against the code:
every import of a concast module, at the top of a file or inside a function, goes to the
importer's own floor or one below, and no modules import each other in a ring. An import by
name (`importlib.import_module`, `__import__`) counts too: a string or f-string argument is
read as the module(s) it can name; any other argument makes every concast module the file
names in a string literal count as imported (controller/dataplanes.py keeps its back ends in
a table of names).

Floors: 1 foundation, 2 data planes and daemons' clients, 3 networks and experiments,
4 the command line. A new module is placed by its folder (controller/, hosts/: 2;
topologies/: 3); one new in scripts/concast/ counts as command line until FOUNDATION names it.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from concast import tools

FOLDERS = {"scripts/concast": "concast", "controller": "concast.controller",
           "hosts": "concast.hosts", "topologies": "concast.topologies",
           "mergespecs": "concast.mergespecs", "tests/vectors": "concast.vectors"}
FOUNDATION = {"concast", "concast.tools", "concast.netns", "concast.netmodel", "concast.procs",
              "concast.registry", "concast.sysfs", "concast.inet", "concast.scapy",
              "concast.argtypes", "concast.prereq", "concast.progress", "concast.pcapfile",
              "concast.offline", "concast.provenance", "concast.fanout",
              "concast.vectors"}
NETWORKS = {"concast.topologies", "concast.perfpath", "concast.perfrun"}
DAEMONS = {"concast.controller", "concast.hosts", "concast.mergespecs"}
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


def dynamic_imports(tree: ast.AST, known: dict[str, Path]) -> list[str]:
    """The modules `importlib.import_module(...)` / `__import__(...)` calls in tree can load."""
    def is_loader(f):
        return (isinstance(f, ast.Attribute) and f.attr == "import_module"
                or isinstance(f, ast.Name) and f.id in ("import_module", "__import__"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and is_loader(n.func) and n.args]
    out, by_name = [], False
    for call in calls:
        arg = call.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            out.append(arg.value)
        elif isinstance(arg, ast.JoinedStr):            # f"concast.x.{name}": each {} one name
            pattern = "".join(re.escape(v.value) if isinstance(v, ast.Constant) else r"[^.]+"
                              for v in arg.values)
            out += [m for m in known if re.fullmatch(pattern, m)]
        else:
            by_name = True
    if by_name:                                         # loaded by a name held elsewhere
        out += [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                and isinstance(n.value, str) and n.value in known]
    return out


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    out = set()
    for w in dynamic_imports(tree, known):
        while w and w not in known:
            w = w.rpartition(".")[0]
        if w and w != module:
            out.add(w)
    for node in ast.walk(tree):
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
    # every folder the wheel ships (setup.py FOLDERS) is read here, and no other
    setup = ast.parse((tools.CHECKOUT / "setup.py").read_text())
    shipped = next(ast.literal_eval(n.value) for n in setup.body if isinstance(n, ast.Assign)
                   and getattr(n.targets[0], "id", "") == "FOLDERS")
    assert {v: k for k, v in shipped.items()} == FOLDERS
    # every command-line module is on the top floor
    cli = {"cli", "hostcli", "mplexcli", "expcli", "perfcli", "perf", "decode", "demo",
           "transportloc", "conform"}
    assert {floor(f"concast.{m}") for m in cli} == {4}
    assert {f"concast.{m}" for m in cli} <= set(graph)


def test_imports_by_name_are_read(graph):
    """expcli loads an experiment by an f-string, dataplanes a back end from a table."""
    assert "concast.topologies.experiments.ackstudy" in graph["concast.expcli"]
    assert "concast.topologies.experiments.mtp" in graph["concast.expcli"]
    assert {"concast.controller.ovs.dataplane", "concast.controller.p4.dataplane",
            "concast.controller.linux.dataplane"} <= graph["concast.controller.dataplanes"]


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


@pytest.mark.parametrize("source", [
    'import importlib\ndef f():\n    return importlib.import_module("concast.mplexcli")\n',
    'from importlib import import_module\ndef f(v):\n    return import_module(f"concast.{v}cli")\n',
    'WHO = {"m": "concast.mplexcli"}\ndef f(k):\n    return __import__(WHO[k])\n',
])
def test_the_checker_sees_an_upward_import_by_name(tmp_path, source):
    """The rule cannot be dodged by naming the module in a string."""
    f = tmp_path / "x.py"
    f.write_text(source)
    known = {"concast.tools": f, "concast.mplexcli": f}
    assert imports("concast.tools", f, known) == {"concast.mplexcli"}
