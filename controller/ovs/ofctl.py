"""Running ovs-ofctl and ovs-vsctl (the OVS programs are the API: routerd uses the same
command lines, so what the tests exercise is what routerd does)."""
from __future__ import annotations

import subprocess

from concast.controller.ovs import counters
from concast.controller.ovs.selectors import OFCTL


class OvsError(RuntimeError):
    pass


def _run(argv: list[str], stdin: str | None = None, timeout: float = 20) -> str:
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise OvsError(f"{' '.join(argv)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def vsctl(*args: str, timeout: float = 20) -> str:
    return _run(["ovs-vsctl", f"--timeout={int(timeout)}", *args], timeout=timeout + 5)


def ofctl(verb: str, bridge: str, *args: str, stdin: str | None = None) -> str:
    return _run([*OFCTL, "--no-names", verb, bridge, *args], stdin=stdin)


def add_flows(bridge: str, flows: list[str]) -> None:
    """All rules in one ovs-ofctl call (read from stdin): one process, not one per rule."""
    if flows:
        ofctl("add-flows", bridge, "-", stdin="\n".join(flows) + "\n")


def add_flows_many(flows_by_bridge: dict[str, list[str]], width: int = 32,
                   timeout: float = 120) -> None:
    """add_flows on many bridges, `width` ovs-ofctl processes at a time. With hundreds of
    userspace ports, each turn of ovs-vswitchd's main loop is slow and a lone ovs-ofctl
    waits several turns; concurrent ones share them (220 routers: ~9 min serially)."""
    items = [(b, f) for b, f in flows_by_bridge.items() if f]
    for k in range(0, len(items), width):
        running = []
        for bridge, flows in items[k:k + width]:
            p = subprocess.Popen([*OFCTL, "--no-names", "add-flows", bridge, "-"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            running.append((bridge, p, "\n".join(flows) + "\n"))
        errors = []
        try:
            for bridge, p, text in running:
                try:
                    _, err = p.communicate(text, timeout=timeout)
                except subprocess.TimeoutExpired:
                    p.kill()
                    _, err = p.communicate()
                    err = f"timed out after {timeout} s"
                if p.returncode != 0:
                    errors.append(f"add-flows {bridge}: {err.strip()}")
        finally:        # interrupted (Ctrl-C, an error): leave no ovs-ofctl behind
            for _, p, _ in running:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        if errors:
            raise OvsError("; ".join(errors))


def del_flows(bridge: str, match: str | None = None) -> None:
    ofctl("del-flows", bridge, *([match] if match else []))


def dump_flows(bridge: str, match: str | None = None) -> list[dict]:
    return counters.parse_flows(ofctl("dump-flows", bridge, *([match] if match else [])))


def dump_ports(bridge: str) -> dict[str, dict]:
    return counters.parse_ports(ofctl("dump-ports", bridge))


def ovs_running() -> bool:
    try:
        vsctl("show", timeout=3)
        return True
    except (OvsError, OSError, subprocess.TimeoutExpired):
        return False
