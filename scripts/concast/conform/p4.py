"""`concast conform --p4 FILE.p4`: compile a user's v1model program for BMv2, so the suite
can run the project's s1 - r1 - rx network on it (simple_switch_grpc programmed over
P4Runtime by the project's controller, routerd beside it).

The program must keep the names the controller writes (tables ipv4_lpm, divert_static,
concast_flows, arp_answer and their actions, CPU port 255; docs/dataplane-bmv2.md): the suite
checks what it does with them, not how.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from concast import tools

BUILD = tools.BUILD / "conform-p4"
COMPILER = "p4c-bm2-ss"


class CannotTest(RuntimeError):
    """The program cannot be put on BMv2 here; the message says why."""


def tools_missing() -> str | None:
    from concast.controller.p4.switch import tools_missing as why
    return why()


def compile_program(source: Path, out_dir: Path | None = None) -> tuple[Path, Path]:
    """(BMv2 JSON, P4Info) of `source`, compiled with p4c-bm2-ss."""
    source = Path(source)
    if not source.is_file():
        raise FileNotFoundError(f"--p4: no file {source}")
    why = tools_missing()
    if why:
        raise CannotTest(f"--p4 runs the program on BMv2, and {why}")
    out_dir = out_dir or BUILD / source.stem
    out_dir.mkdir(parents=True, exist_ok=True)
    json, p4info = out_dir / f"{source.stem}.json", out_dir / f"{source.stem}.p4info.txtpb"
    r = subprocess.run([COMPILER, "--arch", "v1model", "-o", str(json), "--p4runtime-files",
                        str(p4info), str(source)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise CannotTest(f"{COMPILER} could not compile {source}:\n{(r.stdout + r.stderr)[-3000:]}")
    return json, p4info
