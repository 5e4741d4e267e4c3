"""`concast conform --p4 FILE.p4`: compile a user's v1model program for BMv2, so the suite
can run the project's s1 - r1 - rx network on it (simple_switch_grpc programmed over
P4Runtime by the project's controller, routerd beside it).

The program must keep the names the controller writes (tables ipv4_lpm, divert_static,
concast_flows, arp_answer and their actions, CPU port 255; docs/dataplane-bmv2.md): the suite
checks what it does with them, not how.
"""
from __future__ import annotations

from pathlib import Path

from concast import tools
from concast.controller.p4 import program

BUILD = tools.BUILD / "conform-p4"
COMPILER = program.COMPILER


class CannotTest(RuntimeError):
    """The program cannot be put on BMv2 here; the message says why."""


def tools_missing() -> str | None:
    from concast.controller.p4.switch import tools_missing as why
    return why()


def compile_program(source: Path, out_dir: Path | None = None) -> tuple[Path, Path]:
    """(BMv2 JSON, P4Info) of `source`, compiled by the project's one compile step
    (concast.controller.p4.program)."""
    source = Path(source)
    if not source.is_file():
        raise FileNotFoundError(f"--p4: no file {source}")
    why = tools_missing()
    if why:
        raise CannotTest(f"--p4 runs the program on BMv2, and {why}")
    try:
        return program.compile_program(source, out_dir or BUILD / source.stem)
    except program.CompileError as e:
        raise CannotTest(str(e)) from None
