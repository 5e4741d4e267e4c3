"""The servers a cluster network runs on, and a shell on each (docs/cluster.md).

`--servers a,b,c` names them. A name is looked up in the emulated servers' state
(scripts/cluster_servers.py; $CONCAST_CLUSTER_STATE or /var/tmp/ccs-cluster) if they are
there, else resolved like any host name (getent) and reached with the user's own ssh set-up.
"localhost" is the driver's machine itself (no ssh). Every command meant for a server goes
through ServerSet.run(), so it cannot silently run on the driver instead.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from concast.topologies.cluster.servers import (STATE_DIR, ClusterError, EmulatedServers,
                                                ServerDown)


def parse(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise ValueError("--servers: give at least one server name, e.g. a,b,c")
    bad = [n for n in names if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", n)]
    if bad:
        raise ValueError(f"--servers: not a host name: {', '.join(bad)}")
    if len(set(names)) != len(names):
        raise ValueError(f"--servers: a server named twice: {text}")
    return names


@dataclass
class ServerSet:
    names: list[str]
    ips: dict[str, str]
    ssh_config: str | None      # an ssh client config (-F), or None for ~/.ssh's
    user: str = "root"

    @classmethod
    def resolve(cls, names: list[str], state_dir: Path | str | None = None) -> "ServerSet":
        state_dir = Path(state_dir or os.environ.get("CONCAST_CLUSTER_STATE", STATE_DIR))
        emulated = None
        if (state_dir / "servers.json").exists():
            emulated = EmulatedServers.load(state_dir).state
        ips, config = {}, None
        for n in names:
            if n == "localhost":
                ips[n] = "127.0.0.1"
            elif emulated and any(s.name == n for s in emulated.servers):
                ips[n] = emulated.ip_of(n)
                config = str(emulated.ssh_config)
            else:
                out = subprocess.run(["getent", "ahostsv4", n], capture_output=True,
                                     text=True).stdout.split()
                if not out:
                    raise ClusterError(f"server {n!r}: no address (not an emulated server in "
                                       f"{state_dir}, and getent does not know it)")
                ips[n] = out[0]
        return cls(list(names), ips, config)

    def ssh_argv(self, name: str) -> list[str]:
        cfg = ["-F", self.ssh_config] if self.ssh_config else []
        return ["ssh", *cfg, "-o", "BatchMode=yes", f"{self.user}@{self.ips[name]}"]

    def argv(self, name: str, argv: list[str]) -> list[str]:
        """`argv` as run on server `name`."""
        if name == "localhost":
            return list(argv)
        return [*self.ssh_argv(name), "--", shlex.join(argv)]

    def run(self, name: str, argv: list[str], stdin: str | None = None, check: bool = True,
            timeout: float = 120) -> str:
        """`argv` on server `name`; its output. ServerDown if ssh cannot reach the server
        (exit 255) or the command does not finish within `timeout` s."""
        try:
            p = subprocess.run(self.argv(name, argv), input=stdin, capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ServerDown(name, f"{' '.join(argv[:4])}... did not finish within {timeout:g} s")
        if p.returncode == 255 and name != "localhost":
            raise ServerDown(name, f"ssh: {p.stderr.strip() or 'exit 255'}")
        if check and p.returncode != 0:
            raise ClusterError(f"on {name}: {' '.join(argv[:6])}...: "
                               f"{p.stderr.strip() or p.stdout.strip() or p.returncode}")
        return p.stdout

    def alive(self, name: str, timeout: float = 10) -> bool:
        try:
            return subprocess.run(self.argv(name, ["true"]), capture_output=True,
                                  timeout=timeout).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def describe(self) -> dict:
        """What a run's metadata records about them."""
        return {"servers": self.names, "addresses": self.ips,
                "emulated": bool(self.ssh_config)}
