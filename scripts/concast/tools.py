"""Finding the project's own Rust binaries and build outputs."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from concast import ROOT

BUILD = ROOT / "build"
RESULTS = ROOT / "results"


class MissingTool(RuntimeError):
    """A binary or build output that `make build` should have produced is absent."""


def rust_binary(name: str) -> Path:
    """The release binary `name` from this checkout's Cargo workspace, else from PATH."""
    for candidate in (ROOT / "target" / "release" / name, ROOT / "target" / "debug" / name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise MissingTool(f"{name} is not built: run `make build` first")


def spec_module(name: str) -> Path:
    """A bundled merge spec's .wasm, built by `make specs`."""
    path = BUILD / "mergespecs" / f"{name}.wasm"
    if not path.is_file():
        raise MissingTool(f"{path.relative_to(ROOT)} is not built: run `make specs` first")
    return path
