"""Scenario `michelle` of `concast exp mtp`: the dissertation's two-router LAN test (section 7.4,
the run printed from the host "michelle"): a 1 MB object over a 10 Mbit/s path with a 2 ms round
trip and about 3 % loss, MTP against TCP, a fast ping measuring the loss. Ours: the emulated
path (path.py), MTP against kernel Reno set as close to 1999's TCP as Linux allows
(`reno-1999`) and plain CUBIC, alternating, several runs; mean and standard deviation."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from statistics import mean, stdev

from concast import ROOT

from . import results
from .paper import MICHELLE
from .path import EmulatedPath, per_direction
from .transact import PROTOCOLS, transaction

OBJECT = "object-1MiB.bin"
#: 1 MB, as the dissertation's tserve sent by default (1048576 bytes received in its rows)
SIZE = 1 << 20
DEFAULTS = {"runs": 5, "rate_mbit": 10.0, "rtt_ms": 2.0, "loss_pct": 3.0, "queue_ms": 20.0,
            "protocols": ("mtp", "reno-1999", "reno-1999-8k", "cubic"), "limit_s": 60.0, "size": SIZE}


def run(p: dict, work: Path, say=print) -> list[dict]:
    path = EmulatedPath(p["rate_mbit"], p["queue_ms"], work, p["seed"], p["rtt_ms"] / 2)
    rows = []
    try:
        path.start({OBJECT: p["size"]})
        path.set_loss(per_direction(p["loss_pct"]))
        for i in range(p["runs"]):
            for proto in p["protocols"]:
                r = {"run": i + 1, **transaction(path, proto, OBJECT, p["size"], p["limit_s"],
                                                 p["mtp_cc"], p["repeat_floor_ms"], p["rto_min_ms"])}
                rows.append(r)
                say(f"run {i + 1} {proto:9s} {r['kBps']:8.1f} KB/s in {r['secs']:.2f} s, ping loss "
                    f"{r['ping_loss_pct'] if r['ping_loss_pct'] is None else round(r['ping_loss_pct'], 1)} %"
                    f"{'' if r['complete'] and r['hash_ok'] else ' INCOMPLETE/BAD'}")
    finally:
        path.set_loss(0) if path.net else None
        path.stop()
    return rows


def summary(rows: list[dict]) -> dict[str, dict]:
    out = {}
    for proto in dict.fromkeys(r["proto"] for r in rows):
        xs = [r["kBps"] for r in rows if r["proto"] == proto]
        pl = [r["ping_loss_pct"] for r in rows if r["proto"] == proto and r["ping_loss_pct"] is not None]
        out[proto] = {"n": len(xs), "mean": mean(xs), "sd": stdev(xs) if len(xs) > 1 else 0.0,
                      "ping_loss": mean(pl) if pl else None}
        for k in ("timeouts", "fast_retrans", "retrans_segs", "mean_window", "repeats", "window_cuts"):
            v = [r[k] for r in rows if r["proto"] == proto and r.get(k) is not None]
            if v:
                out[proto][k] = mean(v)
    return out


def table(s: dict) -> str:
    lines = ["| | KB/s (mean ± sd) | runs | ping loss % | MTP / this | TCP timeouts | fast retransmits |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    m = s.get("mtp", {}).get("mean")
    for proto, v in s.items():
        ratio = "" if proto == "mtp" or not m or not v["mean"] else f"{m / v['mean']:.1f}×"
        lines.append(f"| ours {proto} | {v['mean']:.1f} ± {v['sd']:.1f} | {v['n']} | "
                     f"{'' if v['ping_loss'] is None else format(v['ping_loss'], '.1f')} | {ratio} | "
                     f"{format(v['timeouts'], '.1f') if 'timeouts' in v else ''} | "
                     f"{format(v['fast_retrans'], '.1f') if 'fast_retrans' in v else ''} |")
    lines.append(f"| dissertation MTP | {MICHELLE['mtp']} | 1 | 2.8 | | | |")
    lines.append(f"| dissertation TCP | {MICHELLE['tcp']} | 1 | 2.7 | "
                 f"{MICHELLE['mtp'] / MICHELLE['tcp']:.1f}× | | |")
    return "\n".join(lines)


def plot(s: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = [f"ours {p}" for p in s] + ["paper MTP", "paper TCP"]
    vals = [v["mean"] for v in s.values()] + [MICHELLE["mtp"], MICHELLE["tcp"]]
    errs = [v["sd"] for v in s.values()] + [0, 0]
    ax.bar(names, vals, yerr=errs, capsize=4, edgecolor="black", linewidth=0.5,
           hatch=None, color=["C0"] * len(s) + ["0.7", "0.7"])
    ax.set_yscale("log")
    ax.set_ylabel("throughput, KB/s (1024 B), 1 MB object")
    ax.set_title("Two-router LAN test (\"michelle\", section 7.4): 10 Mbit/s, 2 ms, ~3 % ping loss")
    ax.tick_params(axis="x", rotation=15)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--runs", type=int, default=DEFAULTS["runs"], help="transactions per protocol (default 5)")
    ap.add_argument("--loss", type=float, default=DEFAULTS["loss_pct"],
                    help="round-trip (ping) loss, percent; each direction loses 1-sqrt(1-L) (default 3)")
    ap.add_argument("--queue", type=float, default=DEFAULTS["queue_ms"],
                    help="the bottleneck's drop-tail queue, ms of its rate (default 20)")
    ap.add_argument("--rtt", type=float, default=DEFAULTS["rtt_ms"], help="round trip, ms (default 2)")


def main(argv: list[str], common: argparse.Namespace, extra: argparse.Namespace) -> int:
    p = {**DEFAULTS, "runs": extra.runs, "loss_pct": extra.loss, "rtt_ms": extra.rtt, "queue_ms": extra.queue, "seed": common.seed,
         "mtp_cc": common.mtp_cc, "repeat_floor_ms": common.repeat_floor_ms, "rto_min_ms": common.rto_min_ms,
         "protocols": common.protocols or DEFAULTS["protocols"]}
    if common.quick:
        p.update(runs=1, size=256 * 1024, limit_s=20.0)
    if p["runs"] < 1 or not 0 <= p["loss_pct"] < 100 or p["rtt_ms"] <= 0 or p["queue_ms"] <= 0:
        print("concast exp mtp: --runs ≥ 1, 0 ≤ --loss < 100, --rtt > 0, --queue > 0", file=sys.stderr)
        return 2
    p["loss_each_way_pct"] = per_direction(p["loss_pct"])
    t0 = time.monotonic()
    record = results.begin(p, argv)
    out = results.new_folder(common.out, "michelle")
    rows = run(p, out / "work", lambda t: print(f"[mtp michelle] {t}", flush=True))
    s = summary(rows)
    results.write_csv(rows, out / "michelle.csv")
    plot(s, out / "michelle.png")
    (out / "michelle-table.md").write_text(table(s) + "\n")
    results.write_meta(record, "michelle", out / "michelle-meta.json", summary=s, paper=MICHELLE)
    print(table(s))
    print(f"[mtp michelle] done in {time.monotonic() - t0:.0f} s: {out}")
    return 0
