"""The one lookup for what the Python side needs from outside its own modules: the Rust
binaries, the built merge specs, and the checkout's files (docs/architecture.md, "Finding the
binaries and specs").

A binary NAME is, in this order:
  1. an explicit path (a verb's own flag, passed as `explicit=`);
  2. in a folder of $CONCAST_BIN (os.pathsep-separated; `concast --bin-dir DIR` sets it);
  3. on $PATH;
  4. in the checkout's target/release, then target/debug (every crate, the transport too,
     is a member of the one Cargo workspace, so this is where `cargo build` puts them).
A merge spec NAME.wasm is: an explicit path, else in $CONCAST_SPECS (`concast --spec-dir`),
else in the checkout's build/mergespecs.

The checkout is $CONCAST_ROOT, else the tree this package was imported from (an editable
install), else none (an installed wheel). ROOT is where read-only project files are read
(docs/protocol.md, tests/conform, p4src): the checkout, or the copy a wheel installs under
<prefix>/share/concast. WORK is where build outputs and results go: the checkout, else the
current directory.
"""
from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

BIN_ENV, SPECS_ENV, ROOT_ENV = "CONCAST_BIN", "CONCAST_SPECS", "CONCAST_ROOT"


class MissingTool(RuntimeError):
    """A binary or build output that `make build` should have produced is absent."""


def _is_checkout(p: Path) -> bool:
    return (p / "Cargo.toml").is_file() and (p / "p4src").is_dir()


def find_checkout() -> Path | None:
    """The concast source tree, or None when running from an installed wheel."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]).resolve()
    here = Path(__file__).resolve().parents[2]      # scripts/concast/tools.py -> the checkout
    return here if _is_checkout(here) else None


def _shared() -> Path:
    """Where a wheel's data files went (setup.py SHARED)."""
    for base in (sysconfig.get_path("data"), sys.prefix, getattr(__import__("site"), "USER_BASE", "")):
        p = Path(base) / "share" / "concast"
        if p.is_dir():
            return p
    return Path(sys.prefix) / "share" / "concast"


CHECKOUT = find_checkout()
ROOT = CHECKOUT or _shared()
WORK = CHECKOUT or Path.cwd()
BUILD = WORK / "build"
RESULTS = WORK / "results"


def _executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def rust_binary(name: str, explicit: str | os.PathLike | None = None) -> Path:
    """The Rust binary `name` (see the module's docstring for the order)."""
    if explicit:
        p = Path(explicit)
        if not _executable(p):
            raise MissingTool(f"{p} is not an executable file")
        return p
    for folder in filter(None, os.environ.get(BIN_ENV, "").split(os.pathsep)):
        if _executable(Path(folder) / name):
            return Path(folder) / name
    found = shutil.which(name)
    if found:
        return Path(found)
    if CHECKOUT is not None:
        for profile in ("release", "debug"):
            if _executable(CHECKOUT / "target" / profile / name):
                return CHECKOUT / "target" / profile / name
        raise MissingTool(f"{name} is not built: run `make build` first")
    raise MissingTool(f"{name} not found: put it on PATH or name its folder with "
                      f"${BIN_ENV} (or concast --bin-dir)")


def library(name: str) -> Path:
    """A shared library the Rust build makes (libconcast_transport.so): found like a binary
    but it need not be executable."""
    for folder in filter(None, os.environ.get(BIN_ENV, "").split(os.pathsep)):
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    if CHECKOUT is not None and (CHECKOUT / "target" / "release" / name).is_file():
        return CHECKOUT / "target" / "release" / name
    raise MissingTool(f"{name} is not built: cargo build --release -p concast-transport "
                      f"(or name its folder with ${BIN_ENV})")


def spec_dir() -> Path | None:
    """The folder the built merge specs are taken from, or None."""
    if os.environ.get(SPECS_ENV):
        return Path(os.environ[SPECS_ENV])
    return CHECKOUT / "build" / "mergespecs" if CHECKOUT is not None else None


def spec_module(name: str, explicit: str | os.PathLike | None = None) -> Path:
    """A bundled merge spec's .wasm (`make specs` builds them into build/mergespecs)."""
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise MissingTool(f"{p} is not a file")
        return p
    folder = spec_dir()
    if folder is None:
        raise MissingTool(f"no merge specs here: name their folder with ${SPECS_ENV} "
                          f"(or concast --spec-dir)")
    path = folder / f"{name}.wasm"
    if not path.is_file():
        raise MissingTool(f"{path} is not built: run `make specs` first")
    return path


def revision() -> str | None:
    """The checkout's git revision (with -dirty), or None."""
    if CHECKOUT is None or not (CHECKOUT / ".git").exists():
        return None
    import subprocess
    try:
        r = subprocess.run(["git", "-C", str(CHECKOUT), "describe", "--always", "--dirty"],
                           capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


def binary_or_build_path(name: str) -> Path:
    """rust_binary(name), or where `make build` would put it (for scripts that check and
    report their missing prerequisites themselves)."""
    try:
        return rust_binary(name)
    except MissingTool:
        return WORK / "target" / "release" / name


def spec_or_build_path(name: str) -> Path:
    """spec_module(name), or where `make specs` would put it."""
    try:
        return spec_module(name)
    except MissingTool:
        return (spec_dir() or BUILD / "mergespecs") / f"{name}.wasm"
