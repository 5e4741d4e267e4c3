"""Start and stop one simple_switch_grpc process (by PID, never by name).

The switch can run inside a network namespace (`netns`); its P4Runtime server then listens
on a unix socket, which is reachable from any namespace, so the controller does not have to
enter the switch's namespace. Thrift (port 9090 inside the namespace) and the nanomsg
notification socket get per-switch addresses so that several switches coexist.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path


def tools_missing() -> str | None:
    """Why the BMv2 tests cannot run here, or None."""
    for tool in ("p4c-bm2-ss", "simple_switch_grpc"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (p4c and BMv2 are in no registry; see docs/dataplane-bmv2.md)"
    return None


class Switch:
    """One simple_switch_grpc. `ports` maps BMv2 port numbers to interface names."""

    def __init__(self, name: str, ports: dict[int, str], netns: str | None = None,
                 device_id: int = 0, rundir: str | Path = "/tmp", log: bool = False,
                 thrift_port: int | None = None):
        self.name = name
        self.ports = dict(ports)
        self.netns = netns
        self.device_id = device_id
        self.rundir = Path(rundir)
        self.socket = self.rundir / f"{name}.p4rt.sock"
        self.notify = self.rundir / f"{name}.notify.ipc"
        self.logfile = self.rundir / f"{name}.log"
        self.log = log
        self.thrift_port = thrift_port  # several switches in one namespace need their own
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"unix:{self.socket}"

    def command(self) -> list[str]:
        cmd = []
        if self.netns:
            cmd += ["ip", "netns", "exec", self.netns]
        cmd += ["simple_switch_grpc", "--device-id", str(self.device_id), "--no-p4",
                "--notifications-addr", f"ipc://{self.notify}"]
        if self.thrift_port is not None:
            cmd += ["--thrift-port", str(self.thrift_port)]
        if self.log:
            # BMv2 names the file itself from this stem (its logger adds the extension)
            cmd += ["--log-file", str(self.logfile.with_suffix("")), "--log-flush",
                    "--log-level", "debug"]
        for port, iface in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{iface}"]
        cmd += ["--", "--grpc-server-addr", self.address]
        return cmd

    def start(self, timeout: float = 15.0) -> "Switch":
        if self.socket.exists():
            self.socket.unlink()
        out = open(self.rundir / f"{self.name}.out", "wb")
        # `ip netns exec` execs the switch, so the PID is the switch's own.
        self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.socket.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"simple_switch_grpc exited ({self.proc.returncode}): "
                                   + (self.rundir / f"{self.name}.out").read_text(errors="replace")[-2000:])
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("simple_switch_grpc did not open its P4Runtime socket")
            time.sleep(0.05)
        return self

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        for p in (self.socket, self.notify):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
