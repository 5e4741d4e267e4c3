"""Lines of code of the host transport's congestion-control algorithms and microprotocols
(`concast perf --loc`): non-blank lines that are not comments, unit tests excluded (a file's
`#[cfg(test)]` module ends it)."""
from __future__ import annotations

import sys
from pathlib import Path

from concast import tools

SRC = (tools.CHECKOUT or tools.WORK) / "hosts" / "transport" / "src"


def count(path: Path) -> int:
    n = 0
    for line in path.read_text().splitlines():
        s = line.strip()
        if s.startswith("#[cfg(test)]"):
            break
        if s and not s.startswith("//"):
            n += 1
    return n


def table() -> str:
    rows = ["| part | file | lines |", "| --- | --- | ---: |"]
    for kind, folder in (("congestion control", "cc"), ("microprotocol", "micro")):
        for f in sorted((SRC / folder).glob("*.rs")):
            shared = "(trait, controls, registry)" if folder == "cc" else "(registry)"
            what = shared if f.stem == "mod" else f.stem
            rows.append(f"| {kind} | {what} | {count(f)} |")
    for f in ("session.rs", "event.rs", "attr.rs", "segment.rs", "composite.rs", "udp.rs", "sim.rs"):
        rows.append(f"| framework | {Path(f).stem} | {count(SRC / f)} |")
    return "\n".join(rows)


def main() -> int:
    if not SRC.is_dir():
        print(f"concast perf --loc: counts the transport's Rust sources, which are in a "
              f"checkout ({SRC} is not there; set $CONCAST_ROOT)", file=sys.stderr)
        return 2
    print(table())
    return 0
