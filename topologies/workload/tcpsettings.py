"""TCP settings of a host namespace for the ACK study: congestion control (sysctl),
initial congestion window and advertised MSS (route options), delayed ACKs off
(route option quickack 1). Each is applied only when asked for; what is in force
afterwards is read back and returned, so results record it either way.

The root namespace is never changed: these settings are machine-wide there.
"""
from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass

from concast import netns as ns

CC_KEY = "net.ipv4.tcp_congestion_control"
ROUTE_OPTS = ("initcwnd", "advmss", "quickack")


@dataclass(frozen=True)
class TcpSettings:
    """None means "leave the namespace's own value" (Linux: cubic or what the namespace
    inherited, initcwnd 10, MSS from the MTU, delayed ACKs on)."""
    cc: str | None = None
    initcwnd: int | None = None
    advmss: int | None = None
    quickack: bool | None = None

    def __post_init__(self) -> None:
        if self.cc is not None and not self.cc.replace("_", "").isalnum():
            raise ValueError(f"congestion control {self.cc!r}: not a name")
        if self.initcwnd is not None and not 1 <= self.initcwnd <= 1000:
            raise ValueError(f"initcwnd {self.initcwnd}: must be 1..1000 segments")
        if self.advmss is not None and not 88 <= self.advmss <= 65495:
            raise ValueError(f"advmss {self.advmss}: must be 88..65495 bytes")

    def route_options(self) -> list[str]:
        opts = []
        if self.initcwnd is not None:
            opts += ["initcwnd", str(self.initcwnd)]
        if self.advmss is not None:
            opts += ["advmss", str(self.advmss)]
        if self.quickack is not None:
            opts += ["quickack", "1" if self.quickack else "0"]
        return opts

    def empty(self) -> bool:
        return self == TcpSettings()

    def asdict(self) -> dict:
        return asdict(self)


def _ip(netns: str, args: list[str], stdin: str | None = None) -> str:
    argv = ["nsenter", f"--net={ns.path_of(netns)}", "ip", *args]
    r = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r.stdout


def routes(netns: str) -> list[dict]:
    return json.loads(_ip(netns, ["-j", "route", "show"]) or "[]")


def _replace_command(route: dict, opts: list[str]) -> str:
    """An `ip route replace` line that keeps the route and sets `opts` (other metrics
    the route already had are kept too)."""
    words = ["route", "replace", route["dst"]]
    if "gateway" in route:
        words += ["via", route["gateway"]]
    if "dev" in route:
        words += ["dev", route["dev"]]
    for key, word in (("protocol", "proto"), ("scope", "scope"), ("prefsrc", "src")):
        if key in route:
            words += [word, str(route[key])]
    setting = dict(zip(opts[::2], opts[1::2]))
    for metric in route.get("metrics", []):
        for name, value in metric.items():
            if name not in setting and name in ROUTE_OPTS + ("mtu", "window", "rtt"):
                words += [name, str(value)]
    for name, value in setting.items():
        words += [name, value]
    return " ".join(words)


def apply(netnses: list[str], settings: TcpSettings) -> dict[str, dict]:
    """Apply `settings` to every namespace; return what each namespace has afterwards."""
    if any(n is None for n in netnses) and not settings.empty():
        raise ValueError("refusing to change TCP settings of the root namespace "
                         "(they are machine-wide there); give a host namespace")
    if settings.cc is not None:
        available = ns.run_in([(n, lambda: ns.read_sysctl(
            "net.ipv4.tcp_available_congestion_control")) for n in netnses[:1]])
        if available and settings.cc not in available[0].split():
            raise ValueError(f"congestion control {settings.cc!r} is not available "
                             f"(have: {available[0]})")
        ns.run_in([(n, lambda: ns.write_sysctl(CC_KEY, settings.cc)) for n in netnses])
    opts = settings.route_options()
    if opts:
        for n in netnses:
            batch = "\n".join(_replace_command(r, opts) for r in routes(n)
                              if r.get("type", "unicast") == "unicast")
            if batch:
                _ip(n, ["-batch", "-"], stdin=batch + "\n")
    return read_back(netnses)


def read_back(netnses: list[str | None]) -> dict[str, dict]:
    """{netns: {"cc": ..., "routes": {dst: {initcwnd, advmss, quickack}}}} as in force."""
    ccs = ns.run_in([(n, lambda: ns.read_sysctl(CC_KEY)) for n in netnses])
    out = {}
    for n, cc in zip(netnses, ccs):
        rts = {}
        if n is not None:
            for r in routes(n):
                metrics = {k: v for m in r.get("metrics", []) for k, v in m.items()
                           if k in ROUTE_OPTS}
                rts[r["dst"]] = metrics
        out[n or "(own)"] = {"cc": cc, "routes": rts}
    return out


def summarize(state: dict[str, dict]) -> dict:
    """What the namespaces have, collapsed: {"cc": {value: count}, "initcwnd": {...}, ...},
    route options taken from each namespace's default route (or its only route)."""
    out: dict[str, dict] = {"cc": {}, **{k: {} for k in ROUTE_OPTS}}
    for st in state.values():
        out["cc"][st["cc"]] = out["cc"].get(st["cc"], 0) + 1
        rts = st["routes"]
        chosen = rts.get("default") or (next(iter(rts.values())) if rts else {})
        for k in ROUTE_OPTS:
            v = str(chosen.get(k, "default"))
            out[k][v] = out[k].get(v, 0) + 1
    return out
