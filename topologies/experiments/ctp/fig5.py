"""`concast exp ctp --tables fig5`: the CTP paper's Figure 5 (Bridges et al., §V-C-1), real-time
audio at 128 kbit/s with a 3000 ms playout window, over a local and a wide-area path with
added random loss: the share of packets delivered inside the window for UDP, CTP-Bulk and
CTP-Audio (block-erasure FEC, N=5, K=4), and Figure 5(c)'s lateness breakdown for CTP-Bulk.

Both paths are concast-linkemu links (seeded loss in both directions, as the paper's loss at
each host's ingress device): "local" with no added delay, "wide" with the paper's ~413 ms
RTT; 100 Mbit/s each way. A test is `packets` packets of `size` bytes at 128 kbit/s; the
protocols of one (path, loss, run) cell stream at the same time over the same path (4 x 128
kbit/s on a 100 Mbit/s link: they cannot queue behind each other). The receiver
(concast-perf server) times every packet against its send time on the same CLOCK_MONOTONIC.
"""
from __future__ import annotations

import statistics
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

# How each protocol of Figure 5 runs here. CTP-Audio is the paper's CTP-Video plus FEC; our
# Video stand-in (TFRC under rate-based control, see PROTOCOLS in __init__) plus FEC is
# "CTP-Audio (TFRC)"; the preset Audio (Lossy FIFO, virtual circuit, timestamp jitter, FEC;
# no congestion control) is "CTP-Audio".
PROTOCOLS = {
    "UDP": {"proto": "udp"},
    "CTP-Bulk": {"proto": "ctp", "composite": "Bulk", "cc": "newreno"},
    "CTP-Audio": {"proto": "ctp", "composite": "Audio"},
    "CTP-Audio (TFRC)": {"proto": "ctp", "composite": "LossyFIFO+positive-ack+rtt-estimation+rate-congestion+fec",
                         "cc": "tfrc"},
}
PATHS = {"local": 0.0, "wide": 206.5}       # one-way delay, ms
# Bucket labels of concast-perf's stream_delay_buckets (report.rs LATE_EDGES_US), then the
# packets never delivered before the sender closed.
LATENESS = ["on time (<= 3 s)", "late <= 1 s", "late 1-3 s", "late 3-7 s", "late > 7 s", "never"]
# What the paper's text says of Figure 5 (its plotted values are not in the text; §V-C-1).
PAPER_SAYS = ("paper (text of §V-C-1, no values): wide area, CTP-Bulk unable to deliver on time under "
              "significant loss; UDP and CTP-Audio reasonable; CTP-Audio more robust than UDP; local "
              "behaves the same")


@dataclass
class Fig5Settings:
    runs: int = 3
    packets: int = 1500        # the paper: 1500 packet transmissions per test
    size: int = 160            # bytes per packet: 100 packets/s at 128 kbit/s (not in the paper)
    rate_bps: float = 128_000.0
    losses: list[float] = field(default_factory=lambda: [0, 1, 2, 5, 10, 20])
    paths: list[str] = field(default_factory=lambda: list(PATHS))
    protocols: list[str] = field(default_factory=lambda: list(PROTOCOLS))
    rate_mbit: float = 100.0
    seed: int = 1

    @property
    def secs(self) -> float:
        return self.packets * self.size * 8 / self.rate_bps


def _one(rec: dict) -> dict:
    """Sent, on-time and lateness counts of one stream case."""
    sent = sum(c.get("sent", 0) for c in rec["client"])
    srv = [r for r in rec["server"] if r.get("role") == "server"]
    buckets = [0] * (len(LATENESS) - 1)
    for r in srv:
        for i, n in enumerate(r.get("stream_delay_buckets", [])):
            buckets[i] += n
    delivered = sum(buckets)
    rx = [r.get("stats") or {} for r in srv]
    tx = [c.get("stats") or {} for c in rec["client"]]
    return {"sent": sent, "delivered": delivered, "on_time": buckets[0], "buckets": buckets + [max(sent - delivered, 0)],
            "errors": rec["errors"], "rx_late_dropped": sum(x.get("late", 0) for x in rx),
            "rx_fec_recovered": sum(x.get("fec_recovered", 0) for x in rx),
            "tx_retransmits": sum(x.get("retransmits", 0) for x in tx), "tx_timeouts": sum(x.get("timeouts", 0) for x in tx)}


def cell(s: Fig5Settings, path_name: str, loss: float, run: int, say=print) -> list[dict]:
    """Every protocol streaming at once over one fresh path."""
    from concast import perfrun as perf

    from .emupath import EmuPath
    tag = f"f5{path_name[0]}{int(loss * 10)}r{run}"
    seed = s.seed * 1000 + run
    with EmuPath(delay_ms=PATHS[path_name], rate_mbit=s.rate_mbit, loss=loss / 100, seed=seed, tag=tag) as p:
        cases = {name: {"mode": "stream", "size": s.size, "rate": s.rate_bps, **PROTOCOLS[name]}
                 for name in s.protocols}
        with ThreadPoolExecutor(len(cases)) as ex:
            futs = {name: ex.submit(perf.run_case, p, c, s.secs, 1) for name, c in cases.items()}
            recs = {name: f.result() for name, f in futs.items()}
        st = p.stats()
    rows = []
    for name, rec in recs.items():
        o = _one(rec)
        rows.append({"figure": "5", "path": path_name, "loss_pct": float(loss), "protocol": name, "run": run,
                     "seed": seed, **{k: o[k] for k in ("sent", "delivered", "on_time", "rx_late_dropped",
                                                        "rx_fec_recovered", "tx_retransmits", "tx_timeouts")},
                     "on_time_share": o["on_time"] / o["sent"] if o["sent"] else None,
                     **{f"n_{i}": n for i, n in enumerate(o["buckets"])},
                     "emu_dropped_loss": st["ab"]["dropped_loss"] + st["ba"]["dropped_loss"],
                     "emu_frames_in": st["ab"]["frames_in"] + st["ba"]["frames_in"],
                     "case": cases[name], "errors": "; ".join(o["errors"])[:300]})
        say(f"fig5 {path_name} {loss}% run {run} {name}: {rows[-1]['on_time_share']}")
    return rows


def run(s: Fig5Settings, say=print) -> list[dict]:
    """Every (path, loss, run) cell; the two paths' cells run side by side."""
    rows, lock = [], threading.Lock()

    def one_path(name: str) -> None:
        for loss in s.losses:
            for r in range(s.runs):
                got = cell(s, name, loss, r, say)
                with lock:
                    rows.extend(got)
    with ThreadPoolExecutor(len(s.paths)) as ex:
        for f in [ex.submit(one_path, n) for n in s.paths]:
            f.result()
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Mean and sd of the on-time share, and mean lateness shares, per (path, loss, protocol)."""
    out = []
    keys = sorted({(r["path"], r["loss_pct"], r["protocol"]) for r in rows})
    for path, loss, proto in keys:
        rs = [r for r in rows if (r["path"], r["loss_pct"], r["protocol"]) == (path, loss, proto)]
        xs = [r["on_time_share"] for r in rs if r["on_time_share"] is not None]
        sent = sum(r["sent"] for r in rs) or 1
        out.append({"path": path, "loss_pct": loss, "protocol": proto, "runs": len(rs),
                    "on_time_pct": 100 * statistics.fmean(xs) if xs else None,
                    "on_time_sd": 100 * statistics.stdev(xs) if len(xs) > 1 else 0.0,
                    **{LATENESS[i]: 100 * sum(r[f"n_{i}"] for r in rs) / sent for i in range(len(LATENESS))}})
    return out


def text(rows: list[dict]) -> str:
    sm = summary(rows)
    protos = list(dict.fromkeys(r["protocol"] for r in sm))
    out = ["Figure 5(a, b): % of packets inside the 3000 ms playout window (mean ± sd over runs)", "",
           "| path | loss % | " + " | ".join(protos) + " |", "| --- | ---: |" + " ---: |" * len(protos)]
    for path, loss in sorted({(r["path"], r["loss_pct"]) for r in sm}):
        cells = []
        for p in protos:
            r = next((x for x in sm if (x["path"], x["loss_pct"], x["protocol"]) == (path, loss, p)), None)
            cells.append(f"{r['on_time_pct']:.1f} ± {r['on_time_sd']:.1f}" if r and r["on_time_pct"] is not None else "—")
        out.append(f"| {path} | {loss:g} | " + " | ".join(cells) + " |")
    out += ["", "Figure 5(c): CTP-Bulk's packets by lateness (% of sent, all runs)", "",
            "| path | loss % | " + " | ".join(LATENESS) + " |", "| --- | ---: |" + " ---: |" * len(LATENESS)]
    for r in sm:
        if r["protocol"] == "CTP-Bulk":
            out.append(f"| {r['path']} | {r['loss_pct']:g} | " + " | ".join(f"{r[k]:.1f}" for k in LATENESS) + " |")
    return "\n".join(out)


def plot(rows: list[dict], png, meta: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sm = summary(rows)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    colors = {"UDP": "#d62728", "CTP-Bulk": "#1f77b4", "CTP-Audio": "#2ca02c", "CTP-Audio (TFRC)": "#9467bd"}
    for ax, path, title in ((axes[0], "wide", "(a, b) wide area, ~413 ms RTT"), (axes[1], "local", "local area")):
        for proto in dict.fromkeys(r["protocol"] for r in sm):
            rs = sorted((r for r in sm if r["path"] == path and r["protocol"] == proto), key=lambda r: r["loss_pct"])
            if rs:
                ax.errorbar([r["loss_pct"] for r in rs], [r["on_time_pct"] for r in rs],
                            yerr=[r["on_time_sd"] for r in rs], marker="o", capsize=3, label=proto,
                            color=colors.get(proto))
        ax.set_xlabel("added random loss each way (%)")
        ax.set_ylabel("packets inside the 3000 ms playout window (%)")
        ax.set_ylim(0, 102)
        ax.set_title(f"Figure 5 {title}", fontsize=9)
        if ax.get_legend_handles_labels()[1]:
            ax.legend(fontsize=7, loc="lower left")
        else:                                   # a run of the other path only (--quick)
            ax.text(0.5, 0.5, "path not run", ha="center", transform=ax.transAxes)
    ax = axes[2]
    rs = sorted((r for r in sm if r["path"] == "wide" and r["protocol"] == "CTP-Bulk"), key=lambda r: r["loss_pct"])
    bottom = [0.0] * len(rs)
    cmap = plt.get_cmap("viridis")
    for i, k in enumerate(LATENESS):
        vals = [r[k] for r in rs]
        ax.bar([f"{r['loss_pct']:g}" for r in rs], vals, bottom=bottom, label=k,
               color="#dddddd" if k == "never" else cmap(i / (len(LATENESS) - 1)))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xlabel("added random loss each way (%)")
    ax.set_ylabel("% of packets sent")
    ax.set_title("Figure 5(c): CTP-Bulk lateness, wide area", fontsize=9)
    ax.legend(fontsize=7)
    fig.text(0.01, 0.005, PAPER_SAYS, fontsize=7)
    fig.suptitle(f"concast exp ctp --tables fig5 — {meta['git']['rev'][:10]}, 128 kbit/s audio, "
                 f"{rows[0]['sent'] if rows else 0} packets a test", fontsize=9)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(png, dpi=120)
    plt.close(fig)


def save(rows: list[dict], meta: dict, out) -> list:
    import csv
    import json
    out.mkdir(parents=True, exist_ok=True)
    cols = ["figure", "path", "loss_pct", "protocol", "run", "seed", "sent", "delivered", "on_time",
            "on_time_share", *[f"n_{i}" for i in range(len(LATENESS))], "emu_dropped_loss", "emu_frames_in",
            "rx_late_dropped", "rx_fec_recovered", "tx_retransmits", "tx_timeouts", "case", "errors"]
    with open(out / "fig5.csv", "w", newline="") as f:
        w = csv.DictWriter(f, cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    (out / "fig5.json").write_text(json.dumps({"rows": rows, "summary": summary(rows), "lateness": LATENESS,
                                               "paper": PAPER_SAYS, "meta": meta}, indent=1, default=str))
    plot(rows, out / "fig5.png", meta)
    return [out / "fig5.csv", out / "fig5.json", out / "fig5.png"]
