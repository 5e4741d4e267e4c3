"""The one P4 compile step of the project: a v1model program to (BMv2 JSON, P4Info) with
p4c-bm2-ss. `concast conform --p4` and `concast net up --p4` both come here.

A program run on the project's routers must keep the names the controller writes (tables
ipv4_lpm, divert_static, concast_flows, arp_answer, their actions, the counters, CPU port 255;
docs/dataplane-bmv2.md).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

COMPILER = "p4c-bm2-ss"


class CompileError(RuntimeError):
    """p4c-bm2-ss is missing or refused the program; the message says which and why."""


def command(source: Path, json: Path, p4info: Path) -> list[str]:
    """p4c-bm2-ss's command line for `source` (unit-tested without p4c)."""
    return [COMPILER, "--arch", "v1model", "-o", str(json), "--p4runtime-files", str(p4info),
            str(source)]


def outputs(source: Path, out_dir: Path) -> tuple[Path, Path]:
    """Where the BMv2 JSON and the P4Info of `source` go in out_dir."""
    stem = Path(source).stem
    return out_dir / f"{stem}.json", out_dir / f"{stem}.p4info.txt"


def compile_program(source: Path, out_dir: Path) -> tuple[Path, Path]:
    """(BMv2 JSON, P4Info) of `source`. FileNotFoundError: no such source; CompileError:
    the toolchain is missing (see switch.tools_missing) or p4c-bm2-ss failed."""
    from concast.controller.p4.switch import tools_missing
    source = Path(source)
    if not source.is_file():
        raise FileNotFoundError(f"--p4: no file {source}")
    why = tools_missing()
    if why:
        raise CompileError(why)
    out_dir.mkdir(parents=True, exist_ok=True)
    json, p4info = outputs(source, out_dir)
    r = subprocess.run(command(source, json, p4info), capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise CompileError(f"{COMPILER} could not compile {source}:\n"
                           f"{(r.stdout + r.stderr)[-3000:]}")
    return json, p4info
