"""routerd, hostd (any per-node daemon) on the node's server, as controller.daemons.Daemons
does on one machine (docs/cluster.md, "Daemons").

A daemon is `ssh SERVER -- sh -c 'echo $$ > PIDFILE; exec ip netns exec NS argv'`: it runs
in the node's namespace on the node's server, its output comes back over the ssh session into
the driver's log file, its PID (the server's) is in a PID file on the server, and it is
stopped by that PID, over ssh, with its process group. The driver reaches its Unix socket
through one `ssh -N -L local.sock:remote.sock ...` per server (SocketForwards).
"""
from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

from concast.controller.daemons import Daemon
from concast.topologies.cluster.servers import ServerDown
from concast.topologies.cluster.serverset import ServerSet


class ClusterDaemons:
    """Daemons' interface (start, stop, stop_all, of, running) over the servers."""

    def __init__(self, log_dir: Path, servers: ServerSet, placement: dict[str, str],
                 pid_dir: Path, on_start=None, prepare=None) -> None:
        self.log_dir = Path(log_dir)
        self.servers = servers
        self.placement = placement
        self.pid_dir = Path(pid_dir)        # a path on each server
        self.on_start = on_start
        self.prepare = prepare              # called once, before the first daemon starts
        self.running: list[Daemon] = []
        self.server_of: dict[int, str] = {}     # id(Daemon) -> server

    def start(self, router: str, argv: list[str], name: str = "routerd",
              env: dict | None = None, netns: str | None = None,
              server: str | None = None) -> Daemon:
        """server: where a daemon that belongs to no node runs (a server's link emulator);
        otherwise the node's server. Only node daemons need the shipped configs."""
        if server is None:
            server = self.placement[router]
        elif server not in self.servers.names:
            raise ValueError(f"no server {server!r}")
        if self.prepare is not None and router in self.placement:
            prepare, self.prepare = self.prepare, None
            prepare()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{router}-{name}.log"
        pidfile = self.pid_dir / f"{router}-{name}.pid"
        inner = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
        if env:
            inner = ["env", *[f"{k}={v}" for k, v in env.items()], *inner]
        script = (f"mkdir -p {shlex.quote(str(self.pid_dir))} && echo $$ > "
                  f"{shlex.quote(str(pidfile))} && exec {shlex.join(inner)}")
        full = self.servers.argv(server, ["sh", "-c", script])
        with open(log, "ab") as out:
            popen = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        pid = self._read_pid(server, pidfile, popen)
        d = Daemon(router, name, full, pid, None, log, popen)
        self.server_of[id(d)] = server
        self.running.append(d)
        if self.on_start:
            self.on_start(d, server)
        return d

    def _read_pid(self, server: str, pidfile: Path, popen, timeout: float = 10) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.servers.run(server, ["cat", str(pidfile)], check=False, timeout=10)
            if out.strip().isdigit():
                return int(out.strip())
            if popen.poll() is not None:
                return 0
            time.sleep(0.05)
        return 0

    def stop(self, daemon: Daemon, timeout: float = 3.0) -> int | None:
        self._stop([daemon], timeout)
        return daemon.popen.poll()

    def stop_all(self, timeout: float = 3.0) -> list[str]:
        """Stops every daemon, one ssh per server; returns the servers that did not answer
        (their daemons' ssh sessions are ended here; the daemons went with the server)."""
        return self._stop(list(self.running), timeout)

    def _stop(self, daemons: list[Daemon], timeout: float) -> list[str]:
        by_server: dict[str, list[Daemon]] = {}
        for d in daemons:
            by_server.setdefault(self.server_of.get(id(d), ""), []).append(d)
        down = []
        for server, ds in by_server.items():
            live = [d for d in ds if d.pid and d.popen.poll() is None]
            # Each leads a process group on its server (sshd starts each command in a
            # session of its own): TERM the groups, then KILL what is left, by PID.
            for sig in ("TERM", "KILL"):
                if not live or not server:
                    break
                pids = " ".join(f"-{d.pid}" for d in live)
                try:
                    self.servers.run(server, ["sh", "-c", f"kill -{sig} {pids} 2>/dev/null; true"],
                                     check=False, timeout=10)
                except ServerDown as e:
                    print(f"concast: {e}: its daemons went with it")
                    down.append(server)
                    break
                deadline = time.monotonic() + timeout
                for d in live:
                    try:
                        d.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
                live = [d for d in live if d.popen.poll() is None]
            for d in ds:
                if d.popen.poll() is None:      # the server does not answer: end our ssh
                    d.popen.kill()
                    d.popen.wait()
                if d in self.running:
                    self.running.remove(d)
        return down

    def of(self, router: str) -> list[Daemon]:
        return [d for d in self.running if d.router == router]


class SocketForwards:
    """The driver's ends of the daemons' Unix sockets: local path -> (server, remote path),
    one `ssh -N` per server with every forward of that server."""

    def __init__(self, servers: ServerSet, local_dir: Path) -> None:
        self.servers = servers
        self.local_dir = Path(local_dir)
        self.wanted: dict[str, list[tuple[Path, Path]]] = {}
        self.procs: dict[str, subprocess.Popen] = {}

    def add(self, server: str, name: str, remote: Path) -> Path:
        if server == "localhost":
            return Path(remote)
        local = self.local_dir / f"{name}.sock"
        self.wanted.setdefault(server, []).append((local, Path(remote)))
        return local

    def start(self) -> None:
        self.local_dir.mkdir(parents=True, exist_ok=True)
        for server, pairs in self.wanted.items():
            if server == "localhost" or server in self.procs:
                continue
            fwd = [a for local, remote in pairs for a in ("-L", f"{local}:{remote}")]
            self.procs[server] = subprocess.Popen(
                [*self.servers.ssh_argv(server), "-N", "-o", "StreamLocalBindUnlink=yes",
                 "-o", "ExitOnForwardFailure=yes", "-o", "ControlMaster=no", "-o", "ControlPath=none", *fwd],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 15
        for server, pairs in self.wanted.items():
            while not all(local.exists() for local, _ in pairs):
                p = self.procs.get(server)
                if p is not None and p.poll() is not None:
                    raise RuntimeError(f"socket forwarding to {server} exited ({p.returncode})")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"socket forwarding to {server} not up within 15 s")
                time.sleep(0.05)

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = {}
        for pairs in self.wanted.values():
            for local, _ in pairs:
                local.unlink(missing_ok=True)
