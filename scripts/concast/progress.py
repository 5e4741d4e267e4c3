"""Progress lines of the long-running commands (experiments): `[tag] text`, flushed at once
so they interleave rightly with the programs those commands start."""
from __future__ import annotations

from typing import Callable


def say(tag: str, text: str) -> None:
    print(f"[{tag}] {text}", flush=True)


def sayer(tag: str) -> Callable[[str], None]:
    """say() with the tag filled in: `say = sayer("mplex")`."""
    def said(text: str) -> None:
        say(tag, text)
    return said
