"""concast.tools, the one lookup of Rust binaries and merge specs: its order is explicit path,
$CONCAST_BIN, PATH, the checkout's build (docs/architecture.md, "Finding the binaries and
specs")."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from concast import tools

NAME = "concast-lookup-probe"      # a name nothing builds


def exe(folder: Path, name: str = NAME) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text("#!/bin/sh\n")
    p.chmod(0o755)
    return p


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A fake checkout with a release build, a PATH folder and a $CONCAST_BIN folder, each
    holding the binary."""
    checkout = tmp_path / "checkout"
    monkeypatch.setattr(tools, "CHECKOUT", checkout)
    monkeypatch.delenv(tools.BIN_ENV, raising=False)
    monkeypatch.delenv(tools.SPECS_ENV, raising=False)
    built = exe(checkout / "target" / "release")
    on_path = exe(tmp_path / "path")
    env_dir = exe(tmp_path / "env")
    monkeypatch.setenv("PATH", str(on_path.parent))
    return {"built": built, "path": on_path, "env": env_dir, "tmp": tmp_path}


def test_explicit_beats_everything(places, monkeypatch):
    monkeypatch.setenv(tools.BIN_ENV, str(places["env"].parent))
    mine = exe(places["tmp"] / "mine")
    assert tools.rust_binary(NAME, explicit=mine) == mine


def test_explicit_that_is_not_there_is_an_error(places):
    with pytest.raises(tools.MissingTool):
        tools.rust_binary(NAME, explicit=places["tmp"] / "nothing")


def test_env_beats_path_and_checkout(places, monkeypatch):
    monkeypatch.setenv(tools.BIN_ENV, os.pathsep.join([str(places["tmp"] / "empty"),
                                                       str(places["env"].parent)]))
    assert tools.rust_binary(NAME) == places["env"]


def test_path_beats_checkout(places):
    assert tools.rust_binary(NAME) == places["path"]


def test_checkout_last_release_before_debug(places, monkeypatch):
    monkeypatch.setenv("PATH", str(places["tmp"] / "empty"))
    debug = exe(tools.CHECKOUT / "target" / "debug")
    assert tools.rust_binary(NAME) == places["built"]
    places["built"].unlink()
    assert tools.rust_binary(NAME) == debug


def test_nowhere_says_how_to_point_at_it(places, monkeypatch):
    monkeypatch.setenv("PATH", str(places["tmp"] / "empty"))
    monkeypatch.setattr(tools, "CHECKOUT", None)
    with pytest.raises(tools.MissingTool, match=tools.BIN_ENV):
        tools.rust_binary(NAME)


def test_a_file_that_is_not_executable_is_not_a_binary(places, monkeypatch):
    monkeypatch.setenv("PATH", str(places["tmp"] / "empty"))
    places["built"].chmod(0o644)
    with pytest.raises(tools.MissingTool):
        tools.rust_binary(NAME)


def test_specs_env_beats_checkout(places, monkeypatch):
    built = tools.CHECKOUT / "build" / "mergespecs" / "sum.wasm"
    built.parent.mkdir(parents=True)
    built.write_bytes(b"\0asm")
    assert tools.spec_module("sum") == built
    other = places["tmp"] / "specs" / "sum.wasm"
    other.parent.mkdir()
    other.write_bytes(b"\0asm")
    monkeypatch.setenv(tools.SPECS_ENV, str(other.parent))
    assert tools.spec_module("sum") == other
    assert tools.spec_module("sum", explicit=built) == built
    with pytest.raises(tools.MissingTool, match="make specs"):
        tools.spec_module("nothing")
