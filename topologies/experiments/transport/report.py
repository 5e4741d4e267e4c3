"""Tables, CSV, JSON and a plot of `concast exp transport`, beside the dissertation's figures."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from .settings import DISSERTATION, GOAL_RATIO

COLUMNS = ["rate_mbit", "loss_pct", "proto", "kbytes_per_s", "ratio_to_tcp", "bytes", "wanted_bytes",
           "secs", "complete", "hash_ok", "repairs", "dropped"]


def with_ratios(rows: list[dict]) -> list[dict]:
    tcp = {(r["rate_mbit"], r["loss_pct"]): r["kbytes_per_s"] for r in rows if r["proto"] == "tcp"}
    out = []
    for r in rows:
        t = tcp.get((r["rate_mbit"], r["loss_pct"]))
        out.append({**r, "ratio_to_tcp": r["kbytes_per_s"] / t if t else None})
    return out


def table(rows: list[dict]) -> str:
    """Markdown: one line per rate and loss, KB/s per protocol and MTP / TCP."""
    rows = with_ratios(rows)
    protos = list(dict.fromkeys(r["proto"] for r in rows))
    head = ["Mbit/s", "loss %"] + [f"{p} KB/s" for p in protos] + ["MTP / TCP"]
    lines = ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    cells = {}
    for r in rows:
        cells.setdefault((r["rate_mbit"], r["loss_pct"]), {})[r["proto"]] = r
    for (rate, loss), by in cells.items():
        vals = []
        for p in protos:
            r = by.get(p)
            if r is None:
                vals.append("—")
                continue
            if r["complete"] and r["hash_ok"]:
                mark = ""
            elif r["bytes"] == 0:
                mark = " (none in time)"        # the client gave no result before the limit
            else:
                mark = " (partial)" if r["hash_ok"] else " (BAD)"
            vals.append(f"{r['kbytes_per_s']:.1f}{mark}")
        ratio = by.get("mtp", {}).get("ratio_to_tcp")
        lines.append(f"| {rate:g} | {loss:g} | " + " | ".join(vals) + f" | {'—' if ratio is None else f'{ratio:.2f}'} |")
    d = DISSERTATION
    lines.append(f"| dissertation | ~{d['loss_pct']:g} | {d['mtp_kbytes_per_s']} (MTP) | {d['tcp_kbytes_per_s']} (TCP) | "
                 + " | " * max(len(protos) - 2, 0)
                 + f"{d['mtp_kbytes_per_s'] / d['tcp_kbytes_per_s']:.1f} (goal ≥ {GOAL_RATIO:g}) |")
    return "\n".join(lines)


def third_party_table(tp: list[dict]) -> str:
    lines = ["| Mbit/s | loss % | MTP alone | TCP alone | MTP shared | TCP shared | TCP's share | Jain |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    f = lambda v, spec=".1f": "—" if v is None else format(v, spec)
    for r in tp:
        lines.append(f"| {r['rate_mbit']:g} | {r['loss_pct']:g} | {f(r['mtp_alone'])} | {f(r['tcp_alone'])} | "
                     f"{f(r['mtp_shared'])} | {f(r['tcp_shared'])} | {f(r.get('tcp_share'), '.2f')} | "
                     f"{f(r.get('jain'), '.2f')} |")
    return "\n".join(lines)


def save(res: dict, out: Path) -> list[Path]:
    rows = with_ratios(res["rows"])
    paths = [out / "transport.csv", out / "transport.json"]
    with open(paths[0], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    paths[1].write_text(json.dumps({**res, "rows": rows, "dissertation": DISSERTATION}, indent=1) + "\n")
    png = plot(rows, out / "transport.png")
    return paths + ([png] if png else [])


def plot(rows: list[dict], path: Path) -> Path | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for rate in sorted({r["rate_mbit"] for r in rows}):
        for proto in dict.fromkeys(r["proto"] for r in rows):
            pts = [(r["loss_pct"], r["kbytes_per_s"]) for r in rows
                   if r["proto"] == proto and r["rate_mbit"] == rate]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=f"{proto} {rate:g} Mbit/s")
    d = DISSERTATION
    ax.scatter([d["loss_pct"]] * 2, [d["mtp_kbytes_per_s"], d["tcp_kbytes_per_s"]], marker="x",
               color="k", label="dissertation (MTP, TCP)")
    ax.set_xlabel("random loss, % (both directions)")
    ax.set_ylabel("goodput, KB/s")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
