"""Tables, CSV, JSON and a plot of `concast exp transport`, beside the dissertation's figures."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from .settings import DISSERTATION, GOAL_RATIO, REFERENCE_TCP

COLUMNS = ["rate_mbit", "size", "loss_pct", "proto", "kbytes_per_s", "ratio_to_tcp", "bytes",
           "partial_bytes", "wanted_bytes", "secs", "complete", "hash_ok", "repairs", "dropped"]


def _key(r: dict) -> tuple:
    return r["rate_mbit"], r["size"], r["loss_pct"]


def with_ratios(rows: list[dict]) -> list[dict]:
    """Each row's goodput over the reference TCP's (loss-based CUBIC) in the same cell."""
    tcp = {_key(r): r["kbytes_per_s"] for r in rows if r["proto"] == REFERENCE_TCP}
    out = []
    for r in rows:
        t = tcp.get(_key(r))
        out.append({**r, "ratio_to_tcp": r["kbytes_per_s"] / t if t else None})
    return out


def table(rows: list[dict]) -> str:
    """Markdown: one line per rate, object size and loss; KB/s per protocol; MTP over each
    kernel TCP measured."""
    protos = list(dict.fromkeys(r["proto"] for r in rows))
    tcps = [p for p in protos if p.startswith("tcp-")]
    head = (["Mbit/s", "object", "loss %"] + [f"{p} KB/s" for p in protos]
            + [f"MTP / {p.removeprefix('tcp-')}" for p in tcps])
    lines = ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    cells = {}
    for r in rows:
        cells.setdefault(_key(r), {})[r["proto"]] = r
    for (rate, size, loss), by in cells.items():
        vals = []
        for p in protos:
            r = by.get(p)
            if r is None:
                vals.append("—")
                continue
            if r["complete"] and r["hash_ok"]:
                mark = ""
            elif r["bytes"] + r.get("partial_bytes", 0) == 0:
                mark = " (none in time)"        # nothing arrived in order before the limit
            else:
                mark = " (partial)" if r["hash_ok"] else " (BAD)"
            vals.append(f"{r['kbytes_per_s']:.1f}{mark}")
        mtp = by.get("mtp", {}).get("kbytes_per_s")
        for p in tcps:
            t = by.get(p, {}).get("kbytes_per_s")
            vals.append(f"{mtp / t:.2f}" if mtp is not None and t else "—")
        lines.append(f"| {rate:g} | {_size(size)} | {loss:g} | " + " | ".join(vals) + " |")
    d = DISSERTATION
    lines.append(f"| dissertation | | ~{d['loss_pct']:g} | {d['mtp_kbytes_per_s']} (MTP) | {d['tcp_kbytes_per_s']} (TCP) | "
                 + " | " * max(len(protos) + len(tcps) - 3, 0)
                 + f"{d['mtp_kbytes_per_s'] / d['tcp_kbytes_per_s']:.1f} (goal ≥ {GOAL_RATIO:g}) |")
    return "\n".join(lines)


def _size(n: int) -> str:
    return f"{n / 1e6:g} MB" if n >= 1_000_000 else f"{n / 1e3:g} kB"


def third_party_table(tp: list[dict]) -> str:
    lines = ["| Mbit/s | loss % | TCP | MTP alone | TCP alone | MTP shared | TCP shared | TCP's share | Jain |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    f = lambda v, spec=".1f": "—" if v is None else format(v, spec)
    for r in tp:
        lines.append(f"| {r['rate_mbit']:g} | {r['loss_pct']:g} | {r.get('tcp_cc', '?')} | {f(r['mtp_alone'])} | {f(r['tcp_alone'])} | "
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
    fig, ax = plt.subplots(figsize=(7, 4.5))
    # a colour per protocol, a line style per link and object size
    protos = list(dict.fromkeys(r["proto"] for r in rows))
    paths = list(dict.fromkeys((r["rate_mbit"], r["size"]) for r in rows))
    styles = ["-", "--", ":", "-."]
    for k, (rate, size) in enumerate(paths):
        for c, proto in enumerate(protos):
            pts = [(r["loss_pct"], r["kbytes_per_s"]) for r in rows
                   if r["proto"] == proto and (r["rate_mbit"], r["size"]) == (rate, size)]
            if pts:
                ax.plot(*zip(*pts), marker="o", color=f"C{c}", linestyle=styles[k % len(styles)],
                        label=f"{proto} {rate:g} Mbit/s {_size(size)}")
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
