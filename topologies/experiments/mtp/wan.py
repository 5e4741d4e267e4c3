"""Scenario `wan` of `concast exp mtp`: the dissertation's WAN throughput study (section 7.2,
Figures 14a-c, Appendix D): 1 MB transactions alternating MTP and TCP over a long path (ours:
10 Mbit/s, a 110 ms round trip, emulated) at a range of loss rates, each transaction beside a
fast ping that measures the loss it met, stopped at 60 s with what arrived counted. The rows
are averaged per 2 % of measured loss, smoothed 1-2-4-2-1 and fitted with an exponential, as
the dissertation's tplot and Excel did, and drawn beside Appendix D's numbers."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from concast.argtypes import comma_list

from . import results
from .curve import bin_means, exp_fit, smooth
from .paper import APPENDIX_D_RAW, APPENDIX_D_SMOOTHED, WAN_RTT_MS
from .path import EmulatedPath, per_direction
from .transact import KB, transaction

OBJECT = "object-1MiB.bin"
BIN = 2.0
DEFAULTS = {"rate_mbit": 10.0, "rtt_ms": float(WAN_RTT_MS), "queue_ms": 20.0, "runs": 1,
            "losses": [0.0, 2.0, 5.0, 10.0, 20.0, 30.0], "protocols": ("mtp", "reno-1999"),
            "limit_s": 60.0, "size": 1 << 20}
QUICK = {"losses": [0.0, 10.0], "size": 128 * 1024, "limit_s": 10.0, "runs": 1}


def run(p: dict, work: Path, say=print) -> list[dict]:
    path = EmulatedPath(p["rate_mbit"], p["queue_ms"], work, p["seed"], p["rtt_ms"] / 2)
    rows = []
    try:
        path.start({OBJECT: p["size"]})
        for loss in p["losses"]:
            path.set_loss(per_direction(loss))
            for i in range(p["runs"]):
                for proto in p["protocols"]:
                    r = {"set_loss_pct": loss, "run": i + 1,
                         **transaction(path, proto, OBJECT, p["size"], p["limit_s"], p["mtp_cc"],
                                       p["repeat_floor_ms"], p["rto_min_ms"])}
                    rows.append(r)
                    pl = r["ping_loss_pct"]
                    say(f"loss {loss:g} % (ping {'-' if pl is None else f'{pl:.1f}'} %) {proto:12s} "
                        f"{r['kBps']:8.2f} KB/s in {r['secs']:.1f} s{'' if r['complete'] else ' (stopped)'}")
    finally:
        if path.net:
            path.set_loss(0)
        path.stop()
    return rows


def analyse(rows: list[dict]) -> dict:
    """Per protocol: bin means (by the ping's loss; the set loss where the ping got no
    answer at all), the smoothed curve, the exponential fit."""
    out = {}
    for proto in dict.fromkeys(r["proto"] for r in rows):
        pts = [(r["ping_loss_pct"] if r["ping_loss_pct"] is not None else r["set_loss_pct"], r["kBps"])
               for r in rows if r["proto"] == proto]
        means = bin_means(pts, BIN)
        out[proto] = {"bins": means, "smoothed": smooth({k: v[0] for k, v in means.items()}, BIN),
                      "fit": exp_fit(pts), "points": pts}
    return out


def paper_fit(which: int) -> tuple[float, float] | None:
    """Our exponential fit of Appendix D's raw averages (the dissertation's Excel fit has no
    printed coefficients): which 0 MTP, 1 TCP."""
    return exp_fit([(x, v[which]) for x, v in APPENDIX_D_RAW.items() if v[which]])


def table(a: dict) -> str:
    protos = list(a)
    head = ["loss % (ping, 2 % bins)"] + [f"ours {p} (smoothed)" for p in protos]
    if "mtp" in a and len(protos) > 1:
        head += [f"MTP / {p}" for p in protos if p != "mtp"]
    head += ["paper MTP (smoothed)", "paper TCP (smoothed)", "paper MTP / TCP"]
    xs = sorted({x for v in a.values() for x in v["smoothed"]})
    lines = ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    fmt = lambda v: "—" if v is None else (f"{v:.3g}" if v < 10 else f"{v:.1f}")
    for x in xs:
        cells = [f"{x:g}"] + [fmt(a[p]["smoothed"].get(x)) for p in protos]
        if "mtp" in a and len(protos) > 1:
            m = a["mtp"]["smoothed"].get(x)
            for p in protos:
                if p != "mtp":
                    t = a[p]["smoothed"].get(x)
                    cells.append(f"{m / t:.1f}×" if m and t else "—")
        pm, pt = APPENDIX_D_SMOOTHED.get(int(x), (None, None))
        cells += [fmt(pm), fmt(pt), f"{pm / pt:.1f}×" if pm and pt else "—"]
        lines.append("| " + " | ".join(cells) + " |")
    for p in protos:
        f = a[p]["fit"]
        if f:
            lines.append(f"\n{p}: fit {f[0]:.1f}·exp({f[1]:.3f}·loss%)")
    for i, name in enumerate(("MTP", "TCP")):
        f = paper_fit(i)
        if f:
            lines.append(f"paper {name} (our fit of Appendix D's raw averages): {f[0]:.1f}·exp({f[1]:.3f}·loss%)")
    return "\n".join(lines)


def plot(a: dict, path: Path) -> None:
    import math
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (l, r) = plt.subplots(1, 2, figsize=(13, 5))
    colours = {"mtp": "C0"}
    for i, (proto, v) in enumerate(a.items()):
        c = colours.get(proto, f"C{i + 1}")
        xs = sorted(v["smoothed"])
        l.plot(xs, [v["smoothed"][x] for x in xs], marker="o", color=c, label=f"ours {proto} (smoothed)")
        r.scatter([x for x, _ in v["points"]], [max(y, 1e-3) for _, y in v["points"]], color=c, s=18,
                  label=f"ours {proto}")
        if v["fit"]:
            # ours drawn over the measured losses only: a fit of two noisy points can grow so
            # fast that extending it to 60 % overflows a float (seen once in the quick test)
            lo, hi = min(x for x, _ in v["points"]), max(x for x, _ in v["points"])
            fx = [lo + (hi - lo) * k / 120 for k in range(121)]
            r.plot(fx, [v["fit"][0] * math.exp(v["fit"][1] * x) for x in fx], color=c, lw=1)
    for i, (name, m) in enumerate((("MTP", "^"), ("TCP", "v"))):
        xs = sorted(x for x, v in APPENDIX_D_SMOOTHED.items() if v[i] is not None and x <= 40)
        l.plot(xs, [max(APPENDIX_D_SMOOTHED[x][i], 1e-3) for x in xs], ls="--", marker=m, color="black",
               mfc="none", label=f"paper {name} (App. D smoothed)")
        rx = [x for x, v in APPENDIX_D_RAW.items() if v[i]]
        r.scatter(rx, [APPENDIX_D_RAW[x][i] for x in rx], marker=m, facecolors="none", edgecolors="black",
                  label=f"paper {name} (App. D raw averages)")
        f = paper_fit(i)
        if f:
            fx = [x / 2 for x in range(0, 121)]
            r.plot(fx, [f[0] * math.exp(f[1] * x) for x in fx], color="black", ls=":", lw=1)
    for ax in (l, r):
        ax.set_yscale("log")
        ax.set_xlabel("loss measured by the fast ping, % (round trip)")
        ax.set_ylabel("throughput, KB/s (1024 B)")
        ax.legend(fontsize=7)
    l.set_title("Figure 14a beside ours: 2 % bins, 1-2-4-2-1 smoothing")
    r.set_title("Figure 14b/c beside ours: points and exponential fits")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--losses", type=comma_list(float, what="loss percentages"), default=None,
                    help="round-trip (ping) loss rates to set, percent (default 0,2,5,10,20,30)")
    ap.add_argument("--runs", type=int, default=DEFAULTS["runs"], help="transaction pairs per loss rate (default 1)")
    ap.add_argument("--rtt", type=float, default=DEFAULTS["rtt_ms"], help=f"round trip, ms (default {WAN_RTT_MS})")
    ap.add_argument("--queue", type=float, default=DEFAULTS["queue_ms"], help="bottleneck queue, ms (default 20)")


def main(argv: list[str], common: argparse.Namespace, extra: argparse.Namespace) -> int:
    p = {**DEFAULTS, "runs": extra.runs, "rtt_ms": extra.rtt, "queue_ms": extra.queue, "seed": common.seed,
         "mtp_cc": common.mtp_cc, "repeat_floor_ms": common.repeat_floor_ms, "rto_min_ms": common.rto_min_ms,
         "protocols": common.protocols or DEFAULTS["protocols"]}
    if common.quick:
        p.update(QUICK)
    if extra.losses is not None:
        p["losses"] = extra.losses
    if p["runs"] < 1 or p["rtt_ms"] <= 0 or p["queue_ms"] <= 0 or any(not 0 <= x < 100 for x in p["losses"]):
        print("concast exp mtp: --runs ≥ 1, --rtt > 0, --queue > 0, losses in [0, 100)", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    record = results.begin(p, argv)
    out = results.new_folder(common.out, "wan")
    rows = run(p, out / "work", lambda t: print(f"[mtp wan] {t}", flush=True))
    a = analyse(rows)
    results.write_csv(rows, out / "wan.csv")
    plot(a, out / "wan.png")
    (out / "wan-table.md").write_text(table(a) + "\n")
    summary = {k: {"bins": {str(x): m for x, m in v["bins"].items()}, "smoothed": {str(x): y for x, y in v["smoothed"].items()},
                   "fit": v["fit"]} for k, v in a.items()}
    results.write_meta(record, "wan", out / "wan-meta.json", summary=summary, kb=KB)
    print(table(a))
    print(f"[mtp wan] done in {time.monotonic() - t0:.0f} s: {out}")
    return 0
