#!/usr/bin/env python3
"""Lines of code of the congestion-control algorithms, by UDT/CCC's metric (Gu and Grossman,
section 4.1.6, Table 1: "the number of semicolons in the corresponding code").

Rule for Rust (stated in docs/transport.md): in each algorithm's file under
hosts/transport/src/cc/, count the `;` characters from the top of the file up to its
`#[cfg(test)]` line (unit tests excluded), leaving out those inside comments (`//...`, doc
comments, `/* ... */`), string literals ("...", r"...", r#"..."#) and char literals (';').
Shared code is counted once on its own row, as the paper counts CVegas's timing class apart.
Rust ends a block's last expression without `;` (and a match arm with `,`), so a Rust
function of the same size shows fewer semicolons than C++; the non-blank, non-comment line
count is given beside it.

    python3 scripts/ccc_loc.py            # Markdown table beside the paper's columns
    python3 scripts/ccc_loc.py --json     # {"rows": [...]}
    python3 scripts/ccc_loc.py --count F  # semicolons and lines of one file
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CC = ROOT / "hosts" / "transport" / "src" / "cc"

# (our algorithm, file stem, paper row, UDT/CCC LOC, Linux patch added, removed) — Table 1.
TABLE1 = [
    ("newreno", "newreno", "TCP", "28", "-", "-"),
    # CTCP is NewReno's file with two policy constants (cc/mod.rs: TCP_RTO, RACK_DEFAULT); the
    # RACK mechanism is the framework's (micro/rack.rs), as the paper's CCC host is not counted
    ("ctcp", "newreno", "CTCP of 4.2 (NewReno's file, kernel TCP's RTO and RACK as policy)", "", "", ""),
    # ctcp_hs is CTCP (NewReno's file) with HyStart++ and a paced slow start: its row counts
    # what it adds, cc/hystart.rs
    ("ctcp_hs", "hystart", "CTCP with HyStart++ (not in Table 1; NewReno's file + cc/hystart.rs)", "", "", ""),
    ("scalable", "scalable", "Scalable TCP", "11", "192", "29"),
    ("highspeed", "highspeed", "HighSpeed TCP", "8", "27", "1"),
    ("bic", "bic", "BiC TCP", "38", "248", "30"),
    ("westwood", "westwood", "TCP Westwood", "27", "145", "2"),
    ("vegas", "vegas", "TCP Vegas", "37 + 36", "132", "6"),
    ("fast", "fast", "FAST TCP", "31", "365", "2"),
    ("blaster", "blaster", "UDP Blast (4.1.1, not in Table 1)", "", "", ""),
    ("daimd", "daimd", "UDT native (not in Table 1)", "", "", ""),
    ("tfrc", "tfrc", "TFRC (CTP III-D; not in Table 1)", "", "", ""),
]
SHARED = [("shared: CCC trait, controls, registry, Reno increase", "mod"),
          ("receiver-set rates and group manager (4.1.5)", "group"),
          ("performance monitor (2.2.4)", "monitor")]


def strip(text: str) -> str:
    """The code before `#[cfg(test)]` with comments, strings and char literals blanked."""
    cut = re.search(r"^\s*#\[cfg\(test\)\]", text, re.M)
    src = text[: cut.start()] if cut else text
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (m := re.match(r'r(#*)"', src[i:])) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and (m := re.match(r"'(\\.[^']*|[^\\'])'", src[i:])):
            i += len(m.group(0))  # a char literal; a lifetime ('a) has no closing quote
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def count(path: Path) -> tuple[int, int]:
    code = strip(path.read_text())
    lines = sum(1 for line in code.splitlines() if line.strip())
    return code.count(";"), lines


def rows() -> list[dict]:
    out = []
    for name, stem, paper, ccc, added, removed in TABLE1:
        f = CC / f"{stem}.rs"
        semis, lines = count(f) if f.exists() else (0, 0)
        out.append({"algorithm": name, "file": str(f.relative_to(ROOT)), "found": f.exists(),
                    "semicolons": semis, "lines": lines, "paper": paper, "paper_ccc": ccc,
                    "paper_linux_added": added, "paper_linux_removed": removed})
    for what, stem in SHARED:
        f = CC / f"{stem}.rs"
        semis, lines = count(f) if f.exists() else (0, 0)
        out.append({"algorithm": what, "file": str(f.relative_to(ROOT)), "found": f.exists(),
                    "semicolons": semis, "lines": lines, "paper": "", "paper_ccc": "",
                    "paper_linux_added": "", "paper_linux_removed": ""})
    return out


def markdown(rs: list[dict]) -> str:
    t = ["| algorithm (ours) | paper's row | ours: semicolons | ours: lines | UDT/CCC (paper) | Linux patch added | removed |",
         "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rs:
        t.append(f"| {r['algorithm']} | {r['paper']} | {r['semicolons']} | {r['lines']} | {r['paper_ccc']} "
                 f"| {r['paper_linux_added']} | {r['paper_linux_removed']} |")
    return "\n".join(t)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--count"]:
        if len(argv) != 2 or not Path(argv[1]).is_file():
            print("usage: ccc_loc.py --count FILE (an existing file)", file=sys.stderr)
            return 2
        s, l = count(Path(argv[1]))
        print(json.dumps({"semicolons": s, "lines": l}))
        return 0
    if argv and argv != ["--json"]:
        print(f"unknown arguments {argv}; use --json or --count FILE", file=sys.stderr)
        return 2
    rs = rows()
    missing = [r["file"] for r in rs if not r["found"]]
    if argv == ["--json"]:
        print(json.dumps({"rows": rs}))
    else:
        print(markdown(rs))
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
