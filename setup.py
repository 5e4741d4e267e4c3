"""Packaging for `concast` (metadata in pyproject.toml; docs/architecture.md, "The Python project").

The package's code lives in the folders the design names, each mapped to one import name
(FOLDERS). Every folder below them that holds an `__init__.py` is a subpackage, found here at
build time: a new module or subpackage needs no entry anywhere. A wheel (`pip install .`) also
carries, under <prefix>/share/concast laid out as in a checkout, the files the command reads at
run time (SHARED): the protocol text the conformance suite names, the suite itself with the
system-test helpers it imports, and the P4 program. concast.tools finds them there when there
is no checkout.
"""
import shutil
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent

# import name -> folder (relative to this file). A folder without an __init__.py is skipped.
FOLDERS = {
    "concast": "scripts/concast",
    "concast.topologies": "topologies",
    "concast.controller": "controller",
    "concast.hosts": "hosts",
    "concast.mergespecs": "mergespecs",
    "concast.vectors": "tests/vectors",
}

# Globs of checkout files a wheel carries to share/concast (the conformance suite runs
# tests/system's helpers conftest, systools, hostdtools and bmv2tools).
SHARED = ["docs/protocol.md", "tests/conform/**/*.py", "tests/conform/**/*.p4",
          "tests/system/conftest.py", "tests/system/systools.py",
          "tests/system/hostdtools.py", "tests/system/bmv2tools.py", "tests/system/specs/*.wat",
          "p4src/**/*.p4", "controller/routerd/config.schema.json"]


def packages() -> tuple[list[str], dict[str, str]]:
    names, dirs = [], {}
    for name, folder in FOLDERS.items():
        if not (HERE / folder / "__init__.py").is_file():
            continue
        dirs[name] = folder
        names.append(name)
        names += [f"{name}.{sub}" for sub in find_packages(str(HERE / folder))]
    return names, dirs


def shared() -> list[tuple[str, list[str]]]:
    by_dir: dict[str, list[str]] = {}
    for pattern in SHARED:
        for f in sorted(HERE.glob(pattern)):
            rel = f.relative_to(HERE)
            by_dir.setdefault(str(Path("share/concast") / rel.parent), []).append(str(rel))
    return sorted(by_dir.items())


# setuptools' scratch space, apart from the Rust and spec outputs in build/, and emptied on
# every run: a module removed from the tree must not ship from a stale copy.
SCRATCH = "build/python"
shutil.rmtree(HERE / SCRATCH, ignore_errors=True)

names, dirs = packages()
setup(packages=names, package_dir=dirs,
      package_data={"concast.vectors": ["*.json"]},
      data_files=shared(),
      options={"build": {"build_base": SCRATCH}})
shutil.rmtree(HERE / SCRATCH, ignore_errors=True)     # the wheel is written by now

