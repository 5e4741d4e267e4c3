"""Run records: what each running concast network has created, on disk, so that the
leftovers of a crashed run can be found and removed without touching anything else.

One JSON file per network under /run/concast/nets/<tag>.json (tmpfs: gone after a
reboot, like the network). It is created, exclusively, before anything else and
lists planned names first, so a crash at any point leaves a record of it.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

from concast import procs

from concast.netmodel import naming

STATE_DIR = Path("/run/concast/nets")


def _existing_names() -> set[str]:
    names = set()
    try:
        names.update(subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                                    text=True, timeout=10).stdout.split())
    except (OSError, subprocess.TimeoutExpired):
        pass
    names.update(os.listdir("/sys/class/net"))
    if os.path.isdir("/run/netns"):
        names.update(os.listdir("/run/netns"))
    return names


class RunRecord:
    def __init__(self, path: Path, data: dict) -> None:
        self.path = path
        self.data = data

    @property
    def tag(self) -> str:
        return self.data["tag"]

    @classmethod
    def reserve(cls) -> "RunRecord":
        """Pick a run tag no record and no existing name uses, and claim it."""
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        taken = _existing_names()
        tags = [a + b for a in naming.TAG_ALPHABET for b in naming.TAG_ALPHABET]
        random.shuffle(tags)
        me = os.getpid()
        for tag in tags:
            prefix = naming.run_prefix(tag)
            if any(n.startswith(prefix) for n in taken):
                continue
            path = STATE_DIR / f"{tag}.json"
            data = {"tag": tag, "owner_pid": me, "owner_start": procs.start_time(me),
                    "bridges": [], "ifaces": [], "netns": [], "daemons": []}
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
            return cls(path, data)
        raise RuntimeError("no free run tag: run python -m concast.topologies.leftovers")

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    def extend(self, key: str, items: list) -> None:
        self.data[key].extend(i for i in items if i not in self.data[key])
        self.save()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    def owner_alive(self) -> bool:
        return procs.alive(self.data["owner_pid"], self.data.get("owner_start"))


def load_all() -> list[RunRecord]:
    records = []
    if STATE_DIR.is_dir():
        for path in sorted(STATE_DIR.glob("*.json")):
            try:
                records.append(RunRecord(path, json.loads(path.read_text())))
            except (OSError, ValueError):
                continue
    return records
