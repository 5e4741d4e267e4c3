"""The one owner of exit status 3 (docs/cli.md): a prerequisite is missing (not root, a binary
or spec not built, a system tool such as Mininet, Open vSwitch or tc not installed). Every verb
that finds one names it here: one line on stderr with how to get it, then exit 3."""
from __future__ import annotations

import os
import shutil
import sys

EXIT = 3        # exit status: a missing prerequisite (0 ok, 1 failed, 2 usage)
ROOT_HINT = "run it as root (sudo)"
INSTALL_HINT = "bash scripts/setup.sh installs it"


def report(verb: str, why: str) -> int:
    """Say on stderr what is missing (`why` carries its hint) and return the exit status."""
    print(f"{verb}: missing prerequisite: {why}", file=sys.stderr, flush=True)
    return EXIT


def root(what: str) -> str | None:
    """Why this process cannot do `what` (it is not root), or None."""
    return None if os.geteuid() == 0 else f"needs root ({what}): {ROOT_HINT}"


def commands(*names: str) -> str | None:
    """The first system command of `names` that is not installed, with the hint, or None."""
    for n in names:
        if not shutil.which(n):
            return f"{n} is not installed: {INSTALL_HINT}"
    return None


def built(*binaries: str, specs: tuple[str, ...] = ()) -> str | None:
    """The first Rust binary or merge spec that is not built (concast.tools' message says
    how to build it), or None."""
    from concast import tools
    try:
        for b in binaries:
            tools.rust_binary(b)
        for s in specs:
            tools.spec_module(s)
    except tools.MissingTool as e:
        return str(e)
    return None


def first(*whys: str | None) -> str | None:
    """The first of several checks that found something missing."""
    return next((w for w in whys if w), None)
