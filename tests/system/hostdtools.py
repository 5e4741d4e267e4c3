"""Helpers for the concast system tests: routerd and hostd in a running network, senders
driven through the `concast send` command line inside their namespaces, the receiver
through concast.hosts.Client, and routers through their management sockets."""
from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from concast import ROOT, tools
from concast.controller import routerdmgmt as routerd
from concast.hosts import Client, aggregate

# Found by the one lookup (concast.tools: $CONCAST_BIN, PATH, the checkout's build).
ROUTERD = tools.binary_or_build_path("concast-routerd")
HOSTD = tools.binary_or_build_path("concast-hostd")
SPECS = tools.spec_or_build_path("sum").parent
PYTHON = sys.executable      # the interpreter running the tests, with this `concast` installed
HOLD = "3"          # short soft state: refreshes every second, so restarts heal quickly
SPEC_TOOL = tools.binary_or_build_path("concast-spec")
# How long a round waits for a late child before going out partial. The specs' 10 ms default
# splits rounds when the shared test machine is loaded; the receiver embeds a longer one.
ROUND_TIMEOUT_US = 200_000


def tolerant(name: str) -> Path:
    """The bundled spec `name` with ROUND_TIMEOUT_US embedded as its receiver parameter."""
    out = tools.BUILD / "test-specs" / f"{name}-t{ROUND_TIMEOUT_US}.wasm"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(SPEC_TOOL), "embed", str(SPECS / f"{name}.wasm"), "--param",
                        f"timeout_us={ROUND_TIMEOUT_US}", "--output", str(out)],
                       check=True, capture_output=True)
    return out


def missing_builds() -> str | None:
    for path in (ROUTERD, HOSTD, SPEC_TOOL, SPECS / "sum.wasm", SPECS / "max.wasm"):
        if not path.exists():
            return f"{path} is not built (cargo build --release; make specs)"
    return None


def quick_ack_study(out: Path, *args: str) -> subprocess.CompletedProcess:
    """`concast exp ack-study --quick ARGS --out OUT`, as a user runs it from the checkout;
    skips the test when the binaries or the multiplex spec are not built."""
    why = missing_builds() or (None if tools.spec_or_build_path("multiplex").exists()
                               else f"{tools.spec_or_build_path('multiplex')} is not built (make specs)")
    if why:
        pytest.skip(why)
    return subprocess.run([PYTHON, "-m", "concast.cli", "exp", "ack-study", "--quick", *args,
                           "--out", str(out)], capture_output=True, text=True, timeout=900,
                          cwd=str(ROOT))


def start_routerd(net, routers: list[str] | None = None) -> dict:
    """routerd on every capable router (or the ones named), answering; no hostd."""
    return net.start_concast(hold=float(HOLD), routers=routers, hosts=(), timeout=10)[0]


def concast_network(topology, run_dir: Path):
    """The body of a module fixture (`yield from`): `topology` started in `run_dir` with
    routerd on every capable router and hostd on every host, stopped afterwards; skips when
    the daemons or specs are not built."""
    why = missing_builds()
    if why:
        pytest.skip(why)
    n = topology.start(run_dir=run_dir)
    try:
        n.routerd_daemons = start_concast(n)
        yield n
    finally:
        n.stop()


def start_concast(net) -> dict:
    """routerd on every capable router, hostd on every host; returns the routerd daemons."""
    return net.start_concast(hold=float(HOLD), hostd_args=("--join-retry-ms", "300"))[0]


def wait_for(predicate, timeout: float, what: str, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"{what} (waited {timeout} s)")


def router(net, name: str, what: str = "stats") -> dict:
    return routerd.query(net.routerd_socket(name), what)


def router_counters(net, names) -> dict[str, dict]:
    return {r: router(net, r)["counters"] for r in names}


def router_flow(net, name: str, group: int) -> dict | None:
    for f in router(net, name, "flows")["flows"]:
        if f["group"] == group:
            return f
    return None


def kill(daemon) -> None:
    """A crash: SIGKILL to the daemon's own PID (no clean-up of its diversions)."""
    os.kill(daemon.pid, signal.SIGKILL)
    daemon.popen.wait(timeout=5)


class Senders:
    """`concast send ... --leave -` running in each sender's namespace: each joins, says
    `ready`, sends every line written to it as it arrives, and leaves when its stdin closes."""

    def __init__(self, net, hosts: list[str], group: int, dport: int = 5000,
                 extra: tuple[str, ...] = ()) -> None:
        self.net, self.group = net, group
        self.procs: dict[str, subprocess.Popen] = {}
        self.output: dict[str, list[str]] = collections.defaultdict(list)
        argv = [PYTHON, "-m", "concast.cli", "send", "--to", net.ip("rx"), "--group", str(group),
                "--dport", str(dport), "--leave", *extra, "-"]
        for h in hosts:
            self.procs[h] = net[h].popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True, cwd=str(tools.WORK))
        for h, p in self.procs.items():
            while True:
                line = p.stdout.readline()
                assert line, f"concast send in {h} exited: {self.output[h]}"
                self.output[h].append(line.rstrip())
                if line.strip() == "ready":
                    break

    def events(self, host: str) -> list[str]:
        return [line for line in self.output[host] if line.startswith("event ")]

    def send(self, lines: dict[str, str]) -> None:
        """Write one line to each sender, back to back, so their datagrams travel together."""
        for h, line in lines.items():
            self.procs[h].stdin.write(line + "\n")
            self.procs[h].stdin.flush()

    def finish(self) -> dict[str, list[str]]:
        """Close stdin, wait for every sender to exit; returns their output lines."""
        for p in self.procs.values():
            p.stdin.close()
            p.stdin = None          # so communicate() does not flush it
        for h, p in self.procs.items():
            out, _ = p.communicate(timeout=30)
            self.output[h].extend(out.splitlines())
            assert p.returncode == 0, f"concast send in {h} failed: {self.output[h]}"
        return self.output

    def kill(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def round_lines(hosts: list[str], keys: list[int], value) -> dict[str, str]:
    """One line per sender: KEY=VALUE for every key, value(host_index, key)."""
    return {h: " ".join(f"{k}={value(i, k)}" for k in keys) for i, h in enumerate(hosts)}


def collect(rx: Client, group: int, want: dict[int, int], timeout: float = 10.0,
            settle: float = 0.3):
    """Datagram events of `group` until every key's counts add up to want[key] (the number
    of contributions sent), then `settle` seconds more so a late duplicate would show;
    returns (sum of values per key, count per key, events)."""
    sums: dict[int, int] = collections.Counter()
    counts: dict[int, int] = collections.Counter()
    events = []
    deadline = time.monotonic() + timeout
    settling = False
    while True:
        if not settling and all(counts[k] >= n for k, n in want.items()):
            deadline, settling = time.monotonic() + settle, True
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ev = rx.next_event(left, lambda e: e.get("event") == "datagram" and e.get("group") == group)
        if ev is None:
            break
        c = aggregate.decode(bytes.fromhex(ev["payload"]))
        assert c is not None, f"not an aggregate payload: {ev}"
        sums[c.key] += c.value
        counts[c.key] += c.count
        events.append(ev)
    return dict(sums), dict(counts), events


def wasm_from_wat(wat: Path, out_dir: Path) -> Path:
    out = out_dir / (wat.stem + ".wasm")
    subprocess.run(["wat2wasm", str(wat), "-o", str(out)], check=True)
    return out
