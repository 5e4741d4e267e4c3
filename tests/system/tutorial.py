"""Reading docs/tutorial.md as a script: its ```console blocks, each `$ COMMAND` with the
output lines shown under it. A shown line is a loose pattern: `...` stands for anything."""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Step:
    command: str                # without the prompt, `sudo ` or a trailing `&`
    background: bool
    expect: list[str] = field(default_factory=list)     # shown lines, "..." kept

    def patterns(self) -> list[re.Pattern]:
        return [pattern(line) for line in self.expect if line.strip() != "..."]


def pattern(line: str) -> re.Pattern:
    """A shown line as a regular expression: the text around `...` literally, in order."""
    parts = [re.escape(p.strip()) for p in line.strip().split("...")]
    return re.compile(".*".join(parts))


def steps(markdown: str) -> list[Step]:
    out: list[Step] = []
    for block in re.findall(r"^```console\n(.*?)^```", markdown, re.S | re.M):
        for line in block.splitlines():
            if line.startswith("$ "):
                cmd = line[2:].strip()
                cmd = cmd[len("sudo "):] if cmd.startswith("sudo ") else cmd
                bg = cmd.endswith("&")
                out.append(Step(cmd.rstrip("&").strip(), bg))
            elif out and line.strip():
                out[-1].expect.append(line)
    return out


def unmatched(step: Step, output: str) -> list[str]:
    """The shown lines the output does not have, in order (each on a later line than the
    one before it)."""
    lines = output.splitlines()
    i = 0
    missing = []
    for pat in step.patterns():
        while i < len(lines) and not pat.search(lines[i]):
            i += 1
        if i == len(lines):
            missing.append(pat.pattern)
            i = 0               # keep looking for the others from the top
        else:
            i += 1
    return missing
