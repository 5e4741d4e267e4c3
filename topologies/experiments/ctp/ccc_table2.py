"""UDT/CCC Table 2 beside ours: `concast perf --flows ... --out DIR`'s rows (aggregate
throughput, Jain's fairness, UDT's stability index, sender CPU per flow) as CSV, PNG and
metadata next to the paper's figures.

    python -m concast.topologies.experiments.ctp.ccc_table2 results/ctp-flows/perf.json docs/figures/ccc-table2
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

# Gu and Grossman, Table 2: flows -> (TCP, CTCP) throughput Mbit/s, fairness, stability.
PAPER = {1: ((112, 122), (1, 1), (0.517, 0.415)), 2: ((191, 208), (0.997, 0.999), (0.476, 0.426)),
         4: ((322, 323), (0.949, 0.999), (0.484, 0.492)), 8: ((378, 422), (0.971, 0.999), (0.633, 0.550)),
         16: ((672, 642), (0.958, 0.985), (0.502, 0.482)), 32: ((877, 799), (0.988, 0.997), (0.491, 0.470)),
         64: ((921, 716), (0.994, 0.996), (0.569, 0.529))}


def rows(run: dict) -> list[dict]:
    out = []
    for r in run["rows"]:
        name = {"tcp": f"TCP {r['what']}", "udp": "UDP", "ctp": f"CTCP (Bulk/{r['what'].split('/')[-1]})"}[r["proto"]]
        p = PAPER.get(r["flows"])
        j = 1 if r["proto"] == "ctp" else 0
        out.append({"flows": r["flows"], "sender": name, "mbps": r["mbps"], "fairness": r.get("fairness"),
                    "stability": r.get("stability"), "cpu_per_flow": r.get("cpu_per_flow"),
                    "vs_tcp": r.get("vs_tcp"), "rate_mbit": r.get("rate_mbit"),
                    "paper_mbps": p[0][j] if p and r["proto"] != "udp" else None,
                    "paper_fairness": p[1][j] if p and r["proto"] != "udp" else None,
                    "paper_stability": p[2][j] if p and r["proto"] != "udp" else None})
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not Path(argv[0]).is_file():
        print("usage: ccc_table2 RESULTS.json OUT_PREFIX", file=sys.stderr)
        return 2
    run = json.loads(Path(argv[0]).read_text())
    rs, prefix = rows(run), Path(argv[1])
    with open(f"{prefix}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(rs[0]))
        w.writeheader()
        w.writerows(rs)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    senders = [s for s in dict.fromkeys(r["sender"] for r in rs) if s != "UDP"]
    for ax, key, label in zip(axes, ("mbps", "fairness", "stability"),
                              ("aggregate Mbit/s", "Jain's fairness", "stability index")):
        for s in senders:
            xs = [r for r in rs if r["sender"] == s]
            ax.plot([r["flows"] for r in xs], [r[key] for r in xs], marker="o", label=f"{s}, here (1 Gbit/s tbf, sub-ms RTT)")
        for j, name in enumerate(("TCP (Linux 2.4)", "CTCP")):
            ax.plot(list(PAPER), [PAPER[n][("mbps", "fairness", "stability").index(key)][j] for n in PAPER],
                    "--", marker="s", alpha=0.6, label=f"{name}, paper (1 Gbit/s, 110 ms)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("parallel flows")
        ax.set_ylabel(label)
        ax.legend(fontsize=6)
    fig.suptitle("UDT/CCC Table 2: parallel flows, ours beside the paper's", fontsize=9)
    fig.tight_layout()
    fig.savefig(f"{prefix}.png", dpi=110)
    meta = {"source": argv[0], "runs": run.get("runs"), "note": "one run per cell, 5 s each"}
    Path(f"{prefix}-meta.json").write_text(json.dumps(meta, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
