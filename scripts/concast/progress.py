"""Progress lines of the long-running commands (experiments): `[tag] text`, flushed at once
so they interleave rightly with the programs those commands start. They go to standard
output, or to `stream` (standard error where a command's standard output is its result)."""
from __future__ import annotations

from typing import Callable, TextIO


def say(tag: str, text: str, stream: TextIO | None = None) -> None:
    print(f"[{tag}] {text}", file=stream, flush=True)


def sayer(tag: str, stream: TextIO | None = None) -> Callable[[str], None]:
    """say() with the tag (and stream) filled in: `say = sayer("mplex")`."""
    def said(text: str) -> None:
        say(tag, text, stream)
    return said
