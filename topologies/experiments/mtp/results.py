"""Where a scenario's results go and what its metadata says: a new timestamped folder under
--out, CSV rows, and the metadata the ACK study writes (git revision, machine, parameters,
seed, command, wall time)."""
from __future__ import annotations

import csv
import json
import time
from pathlib import Path


def new_folder(base: Path, scenario: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out, n = base / f"{scenario}-{stamp}", 1
    while out.exists():
        n += 1
        out = base / f"{scenario}-{stamp}-{n}"
    out.mkdir(parents=True)
    return out


def write_csv(rows: list[dict], path: Path) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def metadata(scenario: str, params: dict, argv: list[str], secs: float, **extra) -> dict:
    from concast.topologies.experiments.ackstudy.meta import git, machine
    return {"scenario": scenario, "git": git(), "machine": machine(), "secs": secs, "parameters": params,
            "command": ["concast", "exp", "mtp", *argv], **extra}


def write_meta(meta: dict, path: Path) -> None:
    path.write_text(json.dumps(meta, indent=1) + "\n")
