"""Where a scenario's results go and what its metadata says: a new timestamped folder under
--out, CSV rows, and the provenance record every experiment writes (concast.provenance: git
revision, tool versions, machine and load at start and end, parameters, seed, command, times)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from concast import provenance


def new_folder(base: Path, scenario: str) -> Path:
    """base/<scenario>-<UTC time>-<revision>, new for every run."""
    return provenance.run_folder(base, prefix=scenario)


def write_csv(rows: list[dict], path: Path) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def begin(params: dict, argv: list[str]) -> dict:
    """The run's provenance record, taken before the run starts (its load is the start's)."""
    return provenance.start(params, seed=params.get("seed"), command=["concast", "exp", "mtp", *argv],
                            binaries=("mtping",))


def write_meta(record: dict, scenario: str, path: Path, **extra) -> None:
    """Ends the record (time, load at the end) and writes it with the scenario's own keys."""
    meta = provenance.public(provenance.finish(record))
    path.write_text(json.dumps({"scenario": scenario, **meta, **extra}, indent=1) + "\n")
