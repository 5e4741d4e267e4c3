"""Scenario `third-party` of `concast exp mtp`: the dissertation's third-party test (section 7.3,
Figures 15-16): 0-8 simultaneous MTP transactions against 1-4 TCP transfers on a lightly loaded
long path; what each TCP transfer moves, and what each MTP transaction moves. Ours: the
emulated WAN path (10 Mbit/s, 110 ms, no loss); every cell runs its MTP transactions (one
mtping client, `--parallel N`, each restarted as it completes, as mclient did) and its TCP
transfers (one connection per 1 MB object, one after another per transfer) together for the
same fixed time; throughput counts every byte in order."""
from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from concast.argtypes import comma_list

from . import results
from .paper import FIGURE_16, FIGURE_16_MTP_COUNTS, WAN_RTT_MS
from .path import EmulatedPath
from .transact import KB, TCP_PROTOCOLS, mtp_argv, tcp_argv

OBJECT = "object-1MiB.bin"
DEFAULTS = {"rate_mbit": 10.0, "rtt_ms": float(WAN_RTT_MS), "queue_ms": 20.0, "secs": 15.0,
            "mtp_counts": [0, 1, 2, 4, 8], "tcp_counts": [1, 2, 4], "tcp": "reno-1999-8k", "size": 1 << 20}
QUICK = {"secs": 3.0, "mtp_counts": [0, 2], "tcp_counts": [1]}


def cell(path: EmulatedPath, n_mtp: int, n_tcp: int, p: dict) -> dict:
    """n_mtp MTP transactions and n_tcp TCP transfers at once for p["secs"]."""
    cc, profile = TCP_PROTOCOLS[p["tcp"]]
    path.tcp_profile(profile, p["rto_min_ms"])
    out: dict[str, list] = {"mtp": [], "tcp": []}

    def go(kind: str, argv: list[str]) -> None:
        out[kind].append(path.run_json(path.client, argv, p["secs"] + 30))

    threads = [threading.Thread(target=go, args=("tcp", tcp_argv(path, OBJECT, 1_000_000, p["secs"], cc)))
               for _ in range(n_tcp)]
    if n_mtp:
        threads.append(threading.Thread(target=go, args=("mtp", mtp_argv(
            path, OBJECT, 1_000_000, n_mtp, p["secs"], p["mtp_cc"], p["repeat_floor_ms"]))))
    ping = path.ping_start()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sent, answered = path.ping_stop(ping)
    rate = lambda r: 0.0 if r is None else (r["bytes"] + r.get("partial_bytes", 0)) / KB / max(r["secs"], 1e-9)
    tcp = [rate(r) for r in out["tcp"]]
    mtp_total = sum(rate(r) for r in out["mtp"])
    return {"mtp_count": n_mtp, "tcp_count": n_tcp, "tcp": p["tcp"], "secs": p["secs"],
            "tcp_each_kBps": sum(tcp) / len(tcp) if tcp else None, "tcp_total_kBps": sum(tcp),
            "mtp_each_kBps": mtp_total / n_mtp if n_mtp else None, "mtp_total_kBps": mtp_total,
            "failed": sum(r is None for v in out.values() for r in v),
            "ping_sent": sent, "ping_loss_pct": 100 * (sent - answered) / sent if sent else None}


def run(p: dict, work: Path, say=print) -> list[dict]:
    path = EmulatedPath(p["rate_mbit"], p["queue_ms"], work, p["seed"], p["rtt_ms"] / 2)
    rows = []
    try:
        path.start({OBJECT: p["size"]})
        for n_tcp in [0, *p["tcp_counts"]]:
            for n_mtp in p["mtp_counts"]:
                if n_tcp == 0 and n_mtp == 0:
                    continue
                r = cell(path, n_mtp, n_tcp, p)
                rows.append(r)
                say(f"{n_mtp} MTP, {n_tcp} TCP ({p['tcp']}): TCP {r['tcp_each_kBps'] or 0:.1f} KB/s each, "
                    f"MTP {r['mtp_each_kBps'] or 0:.1f} KB/s each, ping loss {r['ping_loss_pct'] or 0:.1f} %")
    finally:
        path.stop()
    return rows


def table(rows: list[dict]) -> str:
    mtps = sorted({r["mtp_count"] for r in rows})
    tcps = sorted({r["tcp_count"] for r in rows})
    get = {(r["tcp_count"], r["mtp_count"]): r for r in rows}
    fmt = lambda v: "—" if v is None else f"{v:.1f}"
    lines = ["Ours, KB/s per TCP transfer (row 0: per MTP transaction, MTP alone); in brackets the "
             "dissertation's Figure 16", "",
             "| TCP count \\ MTP count | " + " | ".join(str(m) for m in mtps) + " | TCP at max MTP / peak |",
             "|" + " ---: |" * (len(mtps) + 2)]
    for t in tcps:
        cells, peak = [], None
        for m in mtps:
            r = get.get((t, m))
            v = None if r is None else (r["mtp_each_kBps"] if t == 0 else r["tcp_each_kBps"])
            paper = FIGURE_16.get(t, ())[FIGURE_16_MTP_COUNTS.index(m)] if m in FIGURE_16_MTP_COUNTS and t in FIGURE_16 else None
            cells.append(f"{fmt(v)} ({fmt(paper)})")
            if t and v is not None:
                peak = v if peak is None else max(peak, v)
        last = get.get((t, mtps[-1]))
        share = "" if not t or not peak or last is None or last["tcp_each_kBps"] is None else \
            f"{last['tcp_each_kBps'] / peak:.0%}"
        lines.append(f"| {t} | " + " | ".join(cells) + f" | {share} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (l, r) = plt.subplots(1, 2, figsize=(13, 5))
    for i, t in enumerate(sorted({x["tcp_count"] for x in rows if x["tcp_count"]})):
        sel = sorted((x["mtp_count"], x["tcp_each_kBps"]) for x in rows if x["tcp_count"] == t)
        l.plot([m for m, _ in sel], [v for _, v in sel], marker="o", color=f"C{i}", label=f"ours, {t} TCP")
        if t in FIGURE_16:
            l.plot(FIGURE_16_MTP_COUNTS, FIGURE_16[t], ls="--", marker="s", mfc="none", color=f"C{i}",
                   label=f"paper, {t} TCP")
    l.set_xlabel("simultaneous MTP transactions")
    l.set_ylabel("KB/s per TCP transfer")
    l.set_title("Figure 16 beside ours: TCP against MTP")
    l.legend(fontsize=7)
    alone = sorted((x["mtp_count"], x["mtp_each_kBps"]) for x in rows if x["tcp_count"] == 0)
    r.plot([m for m, _ in alone], [v for _, v in alone], marker="o", label="ours")
    r.plot(FIGURE_16_MTP_COUNTS[1:], FIGURE_16[0][1:], ls="--", marker="s", mfc="none", color="black",
           label="paper (Figure 16's first row)")
    r.set_xlabel("simultaneous MTP transactions")
    r.set_ylabel("KB/s per MTP transaction")
    r.set_title("Figure 15 beside ours: MTP competing with itself")
    r.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--mtp-counts", type=comma_list(int, what="MTP counts"), default=None,
                    help="simultaneous MTP transactions (default 0,1,2,4,8)")
    ap.add_argument("--tcp-counts", type=comma_list(int, what="TCP counts"), default=None,
                    help="simultaneous TCP transfers (default 1,2,4)")
    ap.add_argument("--duration", type=float, default=DEFAULTS["secs"], metavar="S", help="seconds per cell (default 15)")
    ap.add_argument("--tcp", default=DEFAULTS["tcp"], choices=sorted(TCP_PROTOCOLS),
                    help=f"the TCP (default {DEFAULTS['tcp']}: 1999's Reno with an 8 KB window, as Figure 16's "
                         "45 KB/s suggests)")
    ap.add_argument("--rtt", type=float, default=DEFAULTS["rtt_ms"], help=f"round trip, ms (default {WAN_RTT_MS})")


def main(argv: list[str], common: argparse.Namespace, extra: argparse.Namespace) -> int:
    p = {**DEFAULTS, "secs": extra.duration, "tcp": extra.tcp, "rtt_ms": extra.rtt, "seed": common.seed,
         "mtp_cc": common.mtp_cc, "repeat_floor_ms": common.repeat_floor_ms, "rto_min_ms": common.rto_min_ms}
    if common.quick:
        p.update(QUICK)
    p["mtp_counts"] = extra.mtp_counts or p["mtp_counts"]
    p["tcp_counts"] = extra.tcp_counts or p["tcp_counts"]
    if p["secs"] <= 0 or p["rtt_ms"] <= 0 or any(x < 0 for x in p["mtp_counts"]) or any(x < 1 for x in p["tcp_counts"]):
        print("concast exp mtp: --duration > 0, --rtt > 0, MTP counts ≥ 0, TCP counts ≥ 1", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    record = results.begin(p, argv)
    out = results.new_folder(common.out, "third-party")
    rows = run(p, out / "work", lambda t: print(f"[mtp third-party] {t}", flush=True))
    results.write_csv(rows, out / "third-party.csv")
    plot(rows, out / "third-party.png")
    (out / "third-party-table.md").write_text(table(rows) + "\n")
    results.write_meta(record, "third-party", out / "third-party-meta.json", kb=KB, paper_figure_16=FIGURE_16)
    print(table(rows))
    print(f"[mtp third-party] done in {time.monotonic() - t0:.0f} s: {out}")
    return 0
