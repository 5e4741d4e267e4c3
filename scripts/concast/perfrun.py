"""The host transport measured against kernel TCP and plain UDP between two network
namespaces: one case at a time (`run_case`, `measure`), the table of a run with ratios to the
peers measured in the same run. The networks floor (like perfpath): experiments use it, and
`concast perf` (perf.py) is its command line.

From Python: `measure(mode=..., proto=..., ...)` runs one case and returns its JSON records.
"""
from __future__ import annotations

import itertools
import json
import subprocess
import time

from concast import prereq, tools
from concast.perfpath import MininetPath, Path

RESULTS = tools.RESULTS            # --out's default; the file is OUT/perf.json
RESULT_FILE = "perf.json"
# The algorithms concast-perf knows (hosts/transport/src/cc/mod.rs NAMES).
#: concast perf's modes; mtp runs concast-perf --mode mtp (hosts/transport's MTP client fetching
#: 1 MB objects from its stateless server for --duration), its TCP peers run bulk
MODES = ("bulk", "pingpong", "stream", "mtp")
MTP_OBJECT = 1 << 20
#: The composites concast-perf --composite accepts by name (hosts/transport/src/composite.rs
#: Preset::ALL); a `+`-joined list of microprotocols names any other.
COMPOSITES = ("Minimal", "LossyFIFO", "Video", "Audio", "Bulk")
# The algorithms concast-perf knows, in its order (pinned to hosts/transport/src/cc/mod.rs's
# NAMES by tests/unit/test_cli_convention.py).
CC_NAMES = ["newreno", "ctcp", "ctcp_hs", "daimd", "blaster", "scalable", "highspeed", "bic", "westwood", "vegas",
            "fast", "tfrc"]
_ports = itertools.count(15201)


def binary(name: str = "concast-perf") -> str:
    """A transport binary (concast-perf, mtping): concast.tools' lookup, as a string."""
    return str(tools.rust_binary(name))


def missing(commands, binaries=("concast-perf",)) -> str | None:
    """Why the transport cannot run between namespaces here (root, commands, binaries), or
    None: the system tests' skip reason, and `concast perf`'s exit 3."""
    return prereq.first(prereq.root("network namespaces"), prereq.commands(*commands),
                        prereq.built(*binaries))


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _stop(p: subprocess.Popen) -> str:
    """Output of a process we started; killed (by its PID) if it will not finish."""
    try:
        out, _ = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return out


def run_case(path: Path, case: dict, secs: float, count: int, flows: int = 1) -> dict:
    """One measurement: a server in b, `flows` clients in a. Returns the case with the
    client and server JSON records."""
    exe, port = binary(), next(_ports)
    # MTP has no --proto of its own: --mode mtp selects it
    common = ["--proto", "ctp" if case["proto"] == "mtp" else case["proto"], "--mode", case["mode"], "--composite",
              case.get("composite", "Bulk"), "--cc", case.get("cc") or "newreno",
              "--size", str(case.get("size", 65536)), *case.get("args", [])]
    srv = path.popen("b", [exe, "server", "--listen", f"0.0.0.0:{port}", "--flows", str(flows),
                           "--idle", "3", *common, *case.get("server_args", [])])
    try:
        time.sleep(0.3)  # let the server bind before clients connect
        # one_process: one client drives every flow (concast-perf --parallel), else one each
        procs, per = (1, ["--parallel", str(flows)]) if case.get("one_process") and flows > 1 else (flows, [])
        clients = [path.popen("a", [exe, "client", "--to", f"{path.addr['b']}:{port}", "--secs", str(secs),
                                    "--count", str(count), "--rate", str(case.get("rate", 128000)),
                                    *per, *common]) for _ in range(procs)]
        cout, errors = [], []
        for c in clients:
            try:
                out, err = c.communicate(timeout=secs + 120)
            except subprocess.TimeoutExpired:
                c.kill()
                out, err = c.communicate()
            cout += _lines(out)
            if c.returncode:
                errors.append(err.strip())
    finally:
        sout = _stop(srv)
    return {**case, "flows": flows, "loss": path.loss, "client": cout, "server": _lines(sout),
            "errors": errors}


def measure(**case) -> dict:
    """Run one case on a fresh path: mode, proto, composite, cc, size, loss, secs, count;
    mininet=True between two Mininet hosts instead of two bare namespaces."""
    loss, secs, count = case.pop("loss", 0.0), case.pop("secs", 3.0), case.pop("count", 500)
    flows = case.pop("flows", 1)
    with (MininetPath if case.pop("mininet", False) else Path)(loss=loss) as p:
        return run_case(p, case, secs, count, flows)


def cases(modes: list[str], composites: list[str], ccs: list[str], tcp_ccs: list[str],
          blaster_mbit: float = 500.0) -> list[dict]:
    out = []
    for mode in modes:
        if mode == "mtp":
            # MTP beside kernel TCP moving bytes in bulk (the same loss, the same run)
            out.append({"mode": "mtp", "proto": "mtp", "cc": "mtp", "size": MTP_OBJECT})
            out += [{"mode": "bulk", "size": 65536, "proto": "tcp", "cc": c} for c in tcp_ccs
                    if "bulk" not in modes]
            continue
        size = {"bulk": 65536, "pingpong": 64, "stream": 160}[mode]
        peers = [{"proto": "tcp", "cc": c} for c in tcp_ccs] + [{"proto": "udp"}]
        ctp = [{"proto": "ctp", "composite": comp, "cc": cc}
               for comp in composites for cc in (ccs if comp.lower() == "bulk" else ccs[:1])]
        for c in peers + ctp:
            # unreliable composites lose a whole message with any of its segments: bulk sends
            # them one segment per message, as UDP sends datagrams
            reliable = c.get("composite", "bulk").lower() == "bulk"
            out.append({"mode": mode, "size": size if reliable or mode != "bulk" else 1400, **c})
            if c.get("cc") == "blaster" and mode != "stream":
                out[-1]["rate"] = blaster_mbit * 1e6
    return out


def stability(samples: list[int]) -> float | None:
    """UDT/CCC's stability index of one flow: the standard deviation of its throughput samples
    over their mean (0 is perfectly steady). The first and last samples are partial and left out."""
    xs = samples[1:-1]
    if len(xs) < 2 or not any(xs):
        return None
    mean = sum(xs) / len(xs)
    return (sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5 / mean


def jain(rates: list[float]) -> float | None:
    """Jain's fairness index of the flows' rates (1: equal shares)."""
    if len(rates) < 2 or not any(rates):
        return None
    return sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates))


def fairness_late(server: list[dict], share: float = 1 / 3) -> float | None:
    """Jain's index over each flow's mean throughput sample in the last `share` of its
    samples (the partial last one left out): whether shares converged by the end of a run,
    which the index over the whole run, set largely by how slow start ended, cannot say."""
    means = []
    for r in server:
        xs = r.get("samples", [])[1:-1]
        tail = xs[int(len(xs) * (1 - share)):]
        if not tail:
            return None
        means.append(sum(tail) / len(tail))
    return jain(means)


def summarize(run: dict) -> dict:
    """The figures a row shows, taken from the receiver where throughput is concerned."""
    s = {"mode": run["mode"], "proto": run["proto"], "loss": run["loss"], "flows": run["flows"],
         "what": run["proto"] if run["proto"] in ("udp", "mtp") else
         f"{run['cc']}" if run["proto"] == "tcp" else f"{run['composite']}/{run['cc']}",
         "errors": run["errors"]}
    srv, cli = run["server"], run["client"]
    if run["mode"] == "mtp":
        # the client's goodput: whole objects, hash-checked alike (all_same)
        s["mbps"] = sum(c.get("mbit_s", 0) for c in cli) or None
        s["objects"] = sum(c.get("objects", 0) for c in cli)
        s["repeats"] = sum(c.get("stats", {}).get("repeats", 0) for c in cli)
        s["all_same"] = all(c.get("all_same", False) for c in cli)
        if not cli and not s["errors"]:
            s["errors"] = ["the MTP client printed no result"]
    elif run["mode"] == "bulk":
        rates = [r["mbps"] for r in srv]
        s["mbps"] = sum(rates)
        spans = [(r["first_us"], r["last_us"]) for r in srv if r.get("first_us") is not None]
        if len(spans) > 1 and len(spans) == len(srv):
            # flows that do not overlap exactly would add up to more than the link: the
            # aggregate is all bytes over the time from the first byte to the last
            wall = max(b for _, b in spans) - min(a for a, _ in spans)
            if wall > 0:
                s["mbps"] = sum(r["bytes"] for r in srv) * 8 / wall
        if len(rates) > 1:
            s["fairness"] = jain(rates)
            s["fairness_late"] = fairness_late(srv)
        stab = [stability(r.get("samples", [])) for r in srv]
        stab = [x for x in stab if x is not None]
        if stab:
            s["stability"] = sum(stab) / len(stab)
        secs = max((c.get("secs", 0) for c in cli), default=0) or 1
        s["cpu_per_flow"] = sum(c.get("cpu_secs", 0) for c in cli) / max(len(cli), 1) / secs
        s.update(io_path(cli, srv))
    elif run["mode"] == "pingpong" and cli:
        s["median_us"] = cli[0]["rtt"].get("median_us")
        s["p99_us"] = cli[0]["rtt"].get("p99_us")
        s["lost"] = cli[0].get("lost")
    elif run["mode"] == "stream" and cli:
        sent = sum(c.get("sent", 0) for c in cli)
        s["on_time"] = sum(r.get("stream_on_time", 0) for r in srv) / sent if sent else 0.0
    return s


def io_path(cli: list[dict], srv: list[dict]) -> dict:
    """Which UDP path the transport's driver (or the UDP peer) took, from concast-perf's "io"
    records: GSO sends and GRO receives, or the plain sendmmsg/recvmsg fallback (and why),
    with the sender's send calls per MB sent."""
    ios = [c["io"] for c in cli if c.get("io")]
    if not ios:
        return {}
    sent = sum(i["bytes_sent"] for i in ios)
    out = {"io": ("gso" if all(i["gso"] for i in ios) else "sendmmsg") + "+" +
                  ("gro" if all(r.get("io", {}).get("gro", True) for r in srv) else "recvmsg"),
           "send_calls_per_mb": sum(i["send_calls"] for i in ios) / max(sent / 1e6, 1e-9)}
    why = [i["fallback"] for i in ios if i.get("fallback")]
    if why:
        out["io_fallback"] = why[0]
    return out


def add_ratios(rows: list[dict]) -> None:
    """Ratios to kernel TCP (cubic if measured) and UDP of the same mode, loss and flows."""
    def peer(r, proto, cc=None):
        for p in rows:
            if (p["mode"], p["loss"], p["flows"], p["proto"]) == (r["mode"], r["loss"], r["flows"], proto) \
                    and (cc is None or p["what"] == cc):
                return p
        return None
    for r in rows:
        # MTP is set beside the bulk peers of the same loss
        look = dict(r, mode="bulk") if r["mode"] == "mtp" else r
        tcp = peer(look, "tcp", "cubic") or peer(look, "tcp")
        udp = peer(look, "udp")
        if r["mode"] in ("bulk", "mtp"):
            for name, p in (("vs_tcp", tcp), ("vs_udp", udp)):
                if p and p.get("mbps"):
                    r[name] = r["mbps"] / p["mbps"]
        elif r["mode"] == "pingpong":
            for name, p in (("plus_us_tcp", tcp), ("plus_us_udp", udp)):
                if p and p.get("median_us") is not None and r.get("median_us") is not None:
                    r[name] = r["median_us"] - p["median_us"]


def table(rows: list[dict]) -> str:
    def f(v, fmt):
        return format(v, fmt) if isinstance(v, (int, float)) else "-"
    lines = []
    for mode in MODES:
        sel = [r for r in rows if r["mode"] == mode]
        if not sel:
            continue
        if mode == "bulk":
            lines.append(f"{'bulk':24} {'bneck':>5} {'loss':>5} {'flows':>5} {'Mbit/s':>9} {'/TCP':>6} "
                         f"{'/UDP':>6} {'fair':>5} {'stab':>5} {'cpu/flow':>8} {'io':>8}")
            for r in sel:
                lines.append(f"{r['proto'] + ' ' + r['what']:24} {f(r.get('rate_mbit') or None, '5.0f')} "
                             f"{r['loss'] * 100:4.0f}% {r['flows']:5} "
                             f"{f(r.get('mbps'), '9.1f')} {f(r.get('vs_tcp'), '6.3f')} "
                             f"{f(r.get('vs_udp'), '6.3f')} {f(r.get('fairness'), '5.2f')} "
                             f"{f(r.get('stability'), '5.2f')} "
                             f"{f(r.get('cpu_per_flow'), '8.2f')} {r.get('io', '-'):>8}")
        elif mode == "mtp":
            lines.append(f"{'mtp (1 MB objects)':24} {'loss':>5} {'Mbit/s':>9} {'/TCP':>6} {'objects':>8} {'repeats':>8}")
            for r in sel:
                lines.append(f"{'mtp':24} {r['loss'] * 100:4.0f}% {f(r.get('mbps'), '9.1f')} "
                             f"{f(r.get('vs_tcp'), '6.3f')} {f(r.get('objects'), '8d')} {f(r.get('repeats'), '8d')}")
        elif mode == "pingpong":
            lines.append(f"{'ping-pong':24} {'loss':>5} {'median us':>10} {'p99 us':>9} {'+us/UDP':>8} {'+us/TCP':>8}")
            for r in sel:
                lines.append(f"{r['proto'] + ' ' + r['what']:24} {r['loss'] * 100:4.0f}% "
                             f"{f(r.get('median_us'), '10.1f')} {f(r.get('p99_us'), '9.1f')} "
                             f"{f(r.get('plus_us_udp'), '8.1f')} {f(r.get('plus_us_tcp'), '8.1f')}")
        else:
            lines.append(f"{'stream 128 kbit/s':24} {'loss':>5} {'on time (3000 ms playout)':>26}")
            for r in sel:
                lines.append(f"{r['proto'] + ' ' + r['what']:24} {r['loss'] * 100:4.0f}% {f(r.get('on_time'), '26.3f')}")
        for r in sel:
            for e in r["errors"]:
                lines.append(f"  ! {r['proto']} {r['what']}: {e[:200]}")
        lines.append("")
    return "\n".join(lines)
