"""`concast exp ctp`: the CTP paper's section V-B and V-C-2 measurements (Bridges et al.,
Table I and Table II) between two network namespaces, beside the paper's numbers.

    a ──veth, tc tbf 100 Mbit/s each way (the paper's 100 Mbit/s Ethernet)── b
        (Table II: nftables random loss at both hosts' input)

Table I: ping-pong latency of 1-byte messages (`--count` round trips, mean per run) and
receiver-side bandwidth of 1250-byte messages (`--duration` per run) for UDP, CTP-Minimal,
CTP-LossyFIFO, CTP-Video, kernel TCP and CTP-Bulk; mean ± sd over `--runs` runs. Table II:
ping-pong round trips of CTP-Bulk and kernel TCP under 0-5 % random loss. Everything runs
through `concast-perf` (`concast.perfrun.run_case`) on `concast.perfpath.Path`. Writes
<out>/<UTC timestamp>/ctp.csv, ctp.json (rows and metadata: git revision, machine, load
average before and after every cell, parameters) and ctp.png (ours beside the paper's).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path as FsPath

from concast import ROOT, prereq
from concast.argtypes import hidden_alias
from concast.progress import sayer

# The paper's Table I, local area: (latency ms, sd), (bandwidth Mbit/s, sd).
PAPER_TABLE1 = {
    "UDP": ((0.152, 0.0028), (90.28, 0.005)),
    "CTP-Minimal": ((0.273, 0.0052), (81.76, 0.014)),
    "CTP-LossyFIFO": ((0.279, 0.0031), (81.77, 0.008)),
    "CTP-Video": ((0.366, 0.0050), (82.17, 0.005)),
    "TCP": ((0.162, 0.0029), (89.40, 0.025)),
    "CTP-Bulk": ((0.380, 0.0090), (68.31, 0.148)),
}
# The paper's Table I, wide area (UNM to Georgia Tech, ~413 ms RTT).
PAPER_TABLE1_WIDE = {
    "UDP": ((413, 3), (61.54, 1.317)),
    "CTP-Minimal": ((414, 0.4), (56.81, 0.637)),
    "CTP-LossyFIFO": ((414, 0.7), (56.62, 0.975)),
    "CTP-Video": ((414, 1), (21.97, 0.745)),
    "TCP": ((412, 0.9), (9.38, 0.189)),
    "CTP-Bulk": ((415, 0.8), (4.73, 0.288)),
}
WIDE_RTT_MS = 413.0
# The paper's Table II: loss % -> (CTP-Bulk ms, sd), (TCP ms, sd).
PAPER_TABLE2 = {
    0: ((0.34, 0.002), (0.17, 0.0008)),
    1: ((0.62, 0.07), (2.1, 8)),
    2: ((0.66, 0.07), (4.4, 8)),
    3: ((1.9, 0.5), (8.0, 13)),
    4: ((2.1, 0.4), (13, 18)),
    5: ((2.4, 0.7), (16, 25)),
}
# How each of the paper's protocols is run here (concast-perf case). CTP-Video: the paper's
# has SCP congestion control, positive and negative ACKs, RTT estimation and Lossy FIFO; SCP
# is not built and Negative ACK needs Retransmit here, so TFRC under Rate-based control stands
# in (docs/transport.md, "Held against the papers").
PROTOCOLS = {
    "UDP": {"proto": "udp"},
    "CTP-Minimal": {"proto": "ctp", "composite": "Minimal"},
    "CTP-LossyFIFO": {"proto": "ctp", "composite": "LossyFIFO"},
    "CTP-Video": {"proto": "ctp", "composite": "LossyFIFO+positive-ack+rtt-estimation+rate-congestion",
                  "cc": "tfrc"},
    "TCP": {"proto": "tcp", "cc": "cubic"},
    "CTP-Bulk": {"proto": "ctp", "composite": "Bulk", "cc": "newreno"},
}


@dataclass
class Settings:
    runs: int = 10
    count: int = 10            # Table I ping-pong round trips per run (the paper: 10)
    secs: float = 2.0          # Table I bandwidth: seconds per run
    loss_runs: int = 10
    loss_count: int = 100      # Table II: round trips per run (the paper: 100)
    losses: list[float] = field(default_factory=lambda: [0, 1, 2, 3, 4, 5])
    rate_mbit: float = 100.0
    protocols: list[str] = field(default_factory=lambda: list(PROTOCOLS))
    tcp_cc: str = "cubic"
    wide_rate_mbit: float = 100.0
    seed: int = 1              # the link emulator's loss generator (wide-area path, Figure 5)


def missing_prerequisites() -> str | None:
    from concast import perfrun as perf
    return perf.missing(("ip", "nft", "ethtool", "tc"))


def _case(name: str, mode: str, size: int, s: Settings) -> dict:
    c = {"mode": mode, "size": size, **PROTOCOLS[name]}
    if c["proto"] == "tcp":
        c["cc"] = s.tcp_cc
    return c


def _mean_sd(xs: list[float]) -> tuple[float | None, float | None]:
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def _rtt_ms(rec: dict) -> tuple[float | None, int]:
    cl = rec["client"][0] if rec["client"] else {}
    rtt = cl.get("rtt", {})
    return (rtt["mean_us"] / 1000 if rtt.get("count") else None), int(cl.get("lost", 0))


def _median_ms(rec: dict) -> float | None:
    rtt = (rec["client"][0] if rec["client"] else {}).get("rtt", {})
    return rtt["median_us"] / 1000 if rtt.get("count") else None


def _recovery(rec: dict) -> tuple[int, int]:
    """Retransmissions and retransmission timeouts of both ends (ctp only; kernel TCP's are
    not reported by concast-perf)."""
    ends = [r.get("stats", {}) for r in rec["client"] + rec["server"]]
    return sum(e.get("retransmits", 0) for e in ends), sum(e.get("timeouts", 0) for e in ends)


def _rx_mbps(rec: dict) -> float | None:
    srv = [r for r in rec["server"] if r.get("role") == "server"]
    return srv[0]["mbps"] if srv and srv[0].get("bytes") else None


def wide_path(s: Settings, loss: float = 0.0, tag: str | None = None):
    """The wide-area path: the paper's ~413 ms RTT from concast-linkemu (this kernel has no
    netem), `wide_rate_mbit` each way, one bandwidth-delay product of drop-tail queue."""
    from .emupath import EmuPath
    bdp = int(s.wide_rate_mbit * 1e6 / 8 * WIDE_RTT_MS / 1e3 / 1514)
    return EmuPath(delay_ms=WIDE_RTT_MS / 2, rate_mbit=s.wide_rate_mbit, loss=loss,
                   queue_pkts=max(bdp, 100), seed=s.seed, tag=tag)


def table1(s: Settings, say=print, wide: bool = False) -> list[dict]:
    from concast import perfrun as perf
    from concast.perfpath import Path
    rows = []
    paper, label = (PAPER_TABLE1_WIDE, "I-wide") if wide else (PAPER_TABLE1, "I")
    with (wide_path(s) if wide else Path(rate_mbit=s.rate_mbit)) as p:
        for name in s.protocols:
            load0 = os.getloadavg()[0]
            lat, med, lost, bw, errors = [], [], 0, [], []
            for _ in range(s.runs):
                rec = perf.run_case(p, _case(name, "pingpong", 1, s), 1.0, s.count)
                ms, l = _rtt_ms(rec)
                lat.append(ms)
                med.append(_median_ms(rec))
                lost += l
                errors += rec["errors"]
            for _ in range(s.runs):
                rec = perf.run_case(p, _case(name, "bulk", 1250, s), s.secs, 1)
                bw.append(_rx_mbps(rec))
                errors += rec["errors"]
            (lm, ls), (bm, bs) = _mean_sd(lat), _mean_sd(bw)
            (plm, pls), (pbm, pbs) = paper[name]
            rows.append({"table": label, "protocol": name, "loss_pct": 0.0,
                         "latency_ms": lm, "latency_sd": ls, "median_ms": _mean_sd(med)[0], "pings_lost": lost,
                         "bandwidth_mbps": bm, "bandwidth_sd": bs,
                         "paper_latency_ms": plm, "paper_latency_sd": pls,
                         "paper_bandwidth_mbps": pbm, "paper_bandwidth_sd": pbs,
                         "runs": s.runs, "load1_before": load0, "load1_after": os.getloadavg()[0],
                         "case": json.dumps(_case(name, "bulk", 1250, s)), "errors": "; ".join(errors)[:300]})
            say(f"table {label} {name}: {lm} ms, {bm} Mbit/s")
    return rows


def table2(s: Settings, say=print) -> list[dict]:
    from concast import perfrun as perf
    from concast.perfpath import Path
    rows = []
    for loss in s.losses:
        with Path(loss=loss / 100, rate_mbit=s.rate_mbit) as p:
            for name in ("CTP-Bulk", "TCP"):
                load0 = os.getloadavg()[0]
                lat, med, lost, errors, resent, rtos, warm = [], [], 0, [], 0, 0, []
                d0 = p.dropped("a") + p.dropped("b")
                for _ in range(s.loss_runs):
                    rec = perf.run_case(p, _case(name, "pingpong", 1, s), 1.0, s.loss_count)
                    ms, l = _rtt_ms(rec)
                    lat.append(ms)
                    med.append(_median_ms(rec))
                    lost += l
                    # CTP's untimed first round trip (concast-perf's warm-up; TCP's is its handshake)
                    warm += [c["warmup_us"] / 1e3 for c in rec["client"] if c.get("warmup_us") is not None]
                    r, t = _recovery(rec)
                    resent, rtos = resent + r, rtos + t
                    errors += rec["errors"]
                m, sd = _mean_sd(lat)
                paper = PAPER_TABLE2.get(int(loss)) if float(loss).is_integer() else None
                pm, ps = (paper[0] if name == "CTP-Bulk" else paper[1]) if paper else (None, None)
                rows.append({"table": "II", "protocol": name, "loss_pct": float(loss),
                             "latency_ms": m, "latency_sd": sd, "median_ms": _mean_sd(med)[0], "pings_lost": lost,
                             "dropped": p.dropped("a") + p.dropped("b") - d0, "retransmits": resent, "timeouts": rtos,
                             "warmup_ms_max": max(warm, default=None),
                             "paper_latency_ms": pm, "paper_latency_sd": ps, "runs": s.loss_runs,
                             "load1_before": load0, "load1_after": os.getloadavg()[0],
                             "case": json.dumps(_case(name, "pingpong", 1, s)), "errors": "; ".join(errors)[:300]})
                say(f"table II {loss}% {name}: {m} ms")
    return rows


def run(s: Settings, tables: str = "I,II", say=print) -> list[dict]:
    rows = []
    if "I" in tables.split(","):
        rows += table1(s, say)
    if "I-wide" in tables.split(","):
        rows += table1(s, say, wide=True)
    if "II" in tables.split(","):
        rows += table2(s, say)
    return rows


TABLES = ("I", "I-wide", "II", "fig5", "ccc2", "blast")
COLUMNS = ["table", "protocol", "loss_pct", "latency_ms", "latency_sd", "median_ms", "pings_lost", "dropped",
           "retransmits", "timeouts", "warmup_ms_max", "bandwidth_mbps",
           "bandwidth_sd", "paper_latency_ms", "paper_latency_sd", "paper_bandwidth_mbps",
           "paper_bandwidth_sd", "runs", "load1_before", "load1_after", "case", "errors"]


def _f(v, fmt="{:.3f}"):
    return "—" if v is None else fmt.format(v)


def text(rows: list[dict]) -> str:
    out = []
    for label in ("I", "I-wide"):
        t1 = [r for r in rows if r["table"] == label]
        if not t1:
            continue
        out += [f"Table {label}", "| protocol | latency ms (here) | paper | bandwidth Mbit/s (here) | paper | load |",
                "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for r in t1:
            out.append(f"| {r['protocol']} | {_f(r['latency_ms'])} ± {_f(r['latency_sd'])} | "
                       f"{r['paper_latency_ms']} ± {r['paper_latency_sd']} | {_f(r['bandwidth_mbps'], '{:.2f}')} ± "
                       f"{_f(r['bandwidth_sd'], '{:.2f}')} | {r['paper_bandwidth_mbps']} ± {r['paper_bandwidth_sd']} | "
                       f"{r['load1_before']:.1f}–{r['load1_after']:.1f} |")
    t2 = [r for r in rows if r["table"] == "II"]
    if t2:
        out += ["", "| loss % | CTP-Bulk ms (here) | paper | TCP ms (here) | paper | Bulk / TCP (here) | load |",
                "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for loss in sorted({r["loss_pct"] for r in t2}):
            b = next(r for r in t2 if r["loss_pct"] == loss and r["protocol"] == "CTP-Bulk")
            t = next(r for r in t2 if r["loss_pct"] == loss and r["protocol"] == "TCP")
            ratio = b["latency_ms"] / t["latency_ms"] if b["latency_ms"] and t["latency_ms"] else None
            out.append(f"| {loss:g} | {_f(b['latency_ms'])} ± {_f(b['latency_sd'])} | {_f(b['paper_latency_ms'], '{}')} | "
                       f"{_f(t['latency_ms'])} ± {_f(t['latency_sd'])} | {_f(t['paper_latency_ms'], '{}')} | "
                       f"{_f(ratio, '{:.2f}')} | {b['load1_before']:.1f}–{t['load1_after']:.1f} |")
    return "\n".join(out)


def plot(rows: list[dict], png: FsPath, meta: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t1s = [(label, [r for r in rows if r["table"] == label]) for label in ("I", "I-wide")]
    t1s = [(label, t) for label, t in t1s if t]
    t2 = [r for r in rows if r["table"] == "II"]
    n = 2 * len(t1s) + (1 if t2 else 0)
    fig, axes = plt.subplots(1, max(n, 1), figsize=(5.2 * max(n, 1), 4.2))
    axes = list(axes) if n > 1 else [axes]
    i = 0
    for label, t1 in t1s:
        names = [r["protocol"] for r in t1]
        x = range(len(names))
        wide = label == "I-wide"
        for ax, key, unit in ((axes[i], "latency", "ms"), (axes[i + 1], "bandwidth", "Mbit/s")):
            col = "latency_ms" if key == "latency" else "bandwidth_mbps"
            sd = "latency_sd" if key == "latency" else "bandwidth_sd"
            ax.bar([j - 0.2 for j in x], [r[f"paper_{col}"] for r in t1], 0.4,
                   yerr=[r[f"paper_{sd}"] or 0 for r in t1] if wide else None,
                   label="CTP paper (UNM-Georgia Tech, ~413 ms)" if wide else "CTP paper (2.2 GHz P3, 100 Mbit/s Ethernet)",
                   color="#999999")
            ax.bar([j + 0.2 for j in x], [r[col] or 0 for r in t1], 0.4, yerr=[r[sd] or 0 for r in t1],
                   label="here (linkemu 413 ms RTT, 100 Mbit/s)" if wide else "here (veth + tbf 100 Mbit/s)",
                   color="#2ca02c" if wide else "#1f77b4")
            ax.set_xticks(list(x), names, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel(f"{key} ({unit})")
            if wide and key == "latency":
                ax.set_ylim(400, 420)
            ax.set_title(f"Table I {'wide area' if wide else 'local'}: {key}")
            ax.legend(fontsize=7)
        i += 2
    if t2:
        ax = axes[i]
        for name, color in (("CTP-Bulk", "#1f77b4"), ("TCP", "#d62728")):
            rs = sorted((r for r in t2 if r["protocol"] == name), key=lambda r: r["loss_pct"])
            ax.errorbar([r["loss_pct"] for r in rs], [r["latency_ms"] for r in rs],
                        yerr=[r["latency_sd"] or 0 for r in rs], marker="o", color=color, label=f"{name} here")
            pr = [r for r in rs if r["paper_latency_ms"] is not None]
            ax.plot([r["loss_pct"] for r in pr], [r["paper_latency_ms"] for r in pr], "--", marker="s",
                    color=color, alpha=0.5, label=f"{name} paper")
        ax.set_yscale("log")
        ax.set_xlabel("random loss at each host (%)")
        ax.set_ylabel("mean round trip (ms)")
        ax.set_title("Table II: round trip under loss")
        ax.legend(fontsize=7)
    la, lb = meta["machine"]["loadavg_at_start"][0], meta["loadavg_at_end"][0]
    fig.suptitle(f"concast exp ctp — {meta['git']['rev'][:10]}, {meta['machine']['cpus']} CPUs shared, "
                 f"load {la:.1f} at start, {lb:.1f} at end", fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def save(rows: list[dict], meta: dict, out: FsPath) -> list[FsPath]:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "ctp.csv", "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    (out / "ctp.json").write_text(json.dumps({"rows": rows, "meta": meta}, indent=1))
    plot(rows, out / "ctp.png", meta)
    return [out / "ctp.csv", out / "ctp.json", out / "ctp.png"]


def metadata(s: Settings, tables: str, command: list[str] | None = None) -> dict:
    from concast import provenance      # the one provenance record, plus this study's keys
    return {**provenance.start(asdict(s), command=command, binaries=("concast-perf",),
                               seed="Table II: none, loss is nftables numgen random (kernel "
                                    "PRNG); I-wide: the link emulator's splitmix64 seeded with "
                                    f"{s.seed}"),
            "settings": asdict(s), "tables": tables,
            "path": f"two namespaces, veth, tc tbf {s.rate_mbit} Mbit/s each way, MTU 1500",
            "wide_path": f"two namespaces, TAPs joined by concast-linkemu: {WIDE_RTT_MS / 2} ms each way, "
                         f"{s.wide_rate_mbit} Mbit/s, one BDP of drop-tail queue, MTU 1500"}


def _floats(t: str) -> list[float]:
    return [float(x) for x in t.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="concast exp ctp", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", default="I,II", help=f"comma separated, from {','.join(TABLES)} (I-wide: "
                    "Table I over a 413 ms RTT path from the link emulator; default %(default)s)")
    ap.add_argument("--runs", type=int, default=10, help="Table I runs per protocol (default %(default)s)")
    ap.add_argument("--count", type=int, default=10, help="Table I ping-pong round trips per run (default %(default)s)")
    hidden_alias(ap, "--secs", ap.add_argument(
        "--duration", type=float, default=2.0, metavar="S",
        help="Table I bandwidth: seconds per run (default 2)"))
    ap.add_argument("--loss-runs", type=int, default=10, help="Table II runs per loss (default 10)")
    ap.add_argument("--loss-count", type=int, default=100, help="Table II round trips per run (default %(default)s)")
    ap.add_argument("--losses", type=_floats, default=[0, 1, 2, 3, 4, 5], help="percent, comma separated (default 0,1,2,3,4,5)")
    ap.add_argument("--rate", type=float, default=100.0, help="tbf rate each way, Mbit/s (default %(default)s)")
    ap.add_argument("--tcp-cc", default="cubic", help="kernel TCP congestion control (default %(default)s)")
    ap.add_argument("--wide-rate", type=float, default=100.0, help="I-wide: emulated rate each way, Mbit/s (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="I-wide: the link emulator's loss seed (default %(default)s)")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS), help="Table I's protocols, comma separated (default %(default)s)")
    ap.add_argument("--fig5-runs", type=int, default=3, help="fig5: runs per (path, loss) (default 3)")
    ap.add_argument("--fig5-losses", type=_floats, default=[0, 1, 2, 5, 10, 20], help="fig5: loss %%, comma separated (default 0,1,2,5,10,20)")
    ap.add_argument("--ccc-flows", type=lambda t: [int(x) for x in t.split(",")], default=[1, 2, 4, 8, 16],
                    help="ccc2: parallel flow counts (default 1,2,4,8,16)")
    ap.add_argument("--ccc-rate", type=float, default=1000.0, help="ccc2: emulated rate, Mbit/s (default 1000)")
    ap.add_argument("--ccc-secs", type=float, default=15.0, help="ccc2: seconds per cell (default 15)")
    ap.add_argument("--ccc-runs", type=int, default=1, help="ccc2: runs per cell, interleaved over the senders (default 1)")
    ap.add_argument("--ccc-tap-queue", type=int, default=None, metavar="FRAMES",
                    help="ccc2: the TAPs' queue ahead of the emulator (txqueuelen; default 250 ms at the rate, 1000 "
                         "is the kernel's)")
    ap.add_argument("--ccc-senders", type=lambda t: t.split(","), default=None, metavar="NAMES",
                    help="ccc2: senders, comma separated, from 'TCP reno', 'TCP cubic', 'CTCP-HS 1p' (default "
                         "all three; every CTCP flow in one process), and only when named 'CTCP-HS' (a "
                         "process per flow) and CTCP (that, without HyStart++ and pacing)")
    ap.add_argument("--quick", action="store_true", help="2 runs, few round trips, 0 and 5 %% loss")
    ap.add_argument("--out", type=FsPath, default=ROOT / "results" / "ctp", metavar="DIR",
                    help="results go to a new timestamped folder in DIR (default results/ctp)")
    a = ap.parse_args(argv)
    if (a.runs < 1 or a.count < 1 or a.duration <= 0 or a.loss_runs < 1 or a.loss_count < 1 or a.rate <= 0
            or any(not 0 <= x < 100 for x in a.losses) or not set(a.tables.split(",")) <= set(TABLES) or not set(a.protocols.split(",")) <= set(PROTOCOLS)):
        ap.error(f"runs, counts, duration and rate > 0; losses in [0, 100); tables from {','.join(TABLES)}; protocols from {','.join(PROTOCOLS)}")
    why = missing_prerequisites()
    if why:
        return prereq.report("concast exp ctp", why)
    s = Settings(runs=a.runs, count=a.count, secs=a.duration, loss_runs=a.loss_runs, loss_count=a.loss_count,
                 losses=a.losses, rate_mbit=a.rate, tcp_cc=a.tcp_cc, protocols=a.protocols.split(","),
                 wide_rate_mbit=a.wide_rate, seed=a.seed)
    if a.quick:
        s = Settings(runs=2, count=5, secs=0.5, loss_runs=2, loss_count=20, losses=[0, 5],
                     rate_mbit=a.rate, tcp_cc=a.tcp_cc, wide_rate_mbit=a.wide_rate, seed=a.seed)
    from . import fig5
    f5 = fig5.Fig5Settings(runs=a.fig5_runs, losses=a.fig5_losses, seed=a.seed)
    if a.quick:
        f5 = fig5.Fig5Settings(runs=1, packets=200, losses=[0, 10], seed=a.seed)
    if a.fig5_runs < 1 or any(not 0 <= x < 100 for x in a.fig5_losses):
        ap.error("fig5 runs >= 1, losses in [0, 100)")
    from . import ccc_long
    known = {**ccc_long.SENDERS, **ccc_long.OPTIONAL_SENDERS}
    if a.ccc_senders is not None and not (a.ccc_senders and set(a.ccc_senders) <= set(known)):
        ap.error(f"--ccc-senders: names from {', '.join(known)}")
    cc2 = ccc_long.CccSettings(flows=a.ccc_flows, rate_mbit=a.ccc_rate, secs=a.ccc_secs, runs=a.ccc_runs, seed=a.seed,
                               tap_queue=a.ccc_tap_queue, **({"senders": a.ccc_senders} if a.ccc_senders else {}))
    if a.quick:
        cc2 = ccc_long.CccSettings(flows=[1, 2], rate_mbit=100.0, secs=2.0, runs=1, seed=a.seed)
    if (a.ccc_runs < 1 or a.ccc_secs <= 0 or a.ccc_rate <= 0 or any(n < 1 for n in a.ccc_flows)
            or (a.ccc_tap_queue is not None and a.ccc_tap_queue < 1)):
        ap.error("ccc2 runs, flows, seconds, rate and TAP queue > 0")
    from . import blast
    bl = blast.BlastSettings(rate_mbit=a.ccc_rate, seed=a.seed)
    if a.quick:
        bl = blast.BlastSettings(rates_mbit=[20], secs=2.0, runs=1, merge_start_mbit=20, merge_total_mbit=10,
                                 merge_after=1.5, merge_secs=4.0, rate_mbit=100.0, seed=a.seed)
    say = sayer("ctp", sys.stderr)        # standard output carries the tables
    out = a.out / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    command = ["concast", "exp", "ctp", *(argv if argv is not None else sys.argv[1:])]
    tables, paths = a.tables.split(","), []
    ctp_tables = ",".join(t for t in tables if t in ("I", "I-wide", "II"))
    if ctp_tables:
        t0 = time.monotonic()
        meta = metadata(s, ctp_tables, command)
        rows = run(s, ctp_tables, say=say)
        from concast import provenance
        meta = {**provenance.finish(meta), "loadavg_at_end": os.getloadavg(),
                "secs": time.monotonic() - t0, "command": command}
        paths += save(rows, meta, out)
        print(text(rows))
    if "fig5" in tables:
        from concast.topologies.experiments.ackstudy.meta import git, machine
        t0 = time.monotonic()
        meta = {"git": git(), "machine": machine(), "settings": asdict(f5), "secs_per_test": f5.secs,
                "seed": f"link emulator splitmix64, seed {f5.seed} x 1000 + run",
                "path": "two namespaces, TAPs joined by concast-linkemu: local 0 ms, wide 206.5 ms each way, "
                        f"{f5.rate_mbit} Mbit/s, loss both ways"}
        rows = fig5.run(f5, say=say)
        meta |= {"loadavg_at_end": os.getloadavg(), "secs": time.monotonic() - t0, "command": command}
        paths += fig5.save(rows, meta, out)
        print(fig5.text(rows))
    if "ccc2" in tables:
        from concast.topologies.experiments.ackstudy.meta import git, machine
        t0 = time.monotonic()
        meta = {"git": git(), "machine": machine(), "settings": asdict(cc2),
                "path": f"two namespaces, TAPs joined by concast-linkemu: {ccc_long.RTT_MS / 2} ms each way, "
                        f"{cc2.rate_mbit} Mbit/s, one BDP of drop-tail queue; tcp_rmem/wmem {ccc_long.TCP_BUF}",
                "seed": "no random loss on this path"}
        rows = ccc_long.run(cc2, say=say)
        meta |= {"loadavg_at_end": os.getloadavg(), "secs": time.monotonic() - t0, "command": command}
        paths += ccc_long.save(rows, meta, out)
        print(ccc_long.text(rows))
    if "blast" in tables:
        from concast.topologies.experiments.ackstudy.meta import git, machine
        t0 = time.monotonic()
        meta = {"git": git(), "machine": machine(), "settings": asdict(bl),
                "path": f"two namespaces, TAPs joined by concast-linkemu: {bl.rtt_ms / 2} ms each way, "
                        f"{bl.rate_mbit} Mbit/s, one BDP of drop-tail queue", "seed": "no random loss on this path"}
        rows = blast.run(bl, say=say)
        meta |= {"loadavg_at_end": os.getloadavg(), "secs": time.monotonic() - t0, "command": command}
        paths += blast.save(rows, meta, out)
        print(blast.text(rows))
    print(f"done: {', '.join(str(p) for p in paths)}")
    return 0
