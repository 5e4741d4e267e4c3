"""The study's results: one row per run in, Table 1 and Figures 5-6 out (CSV, Markdown,
PNG), each of ours beside the paper's (paper.py)."""
from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

from concast.topologies.experiments.ackstudy import faults, fidelity, paper, phases

RUN_FIELDS = ["env", "delay_ms", "mode", "seed", "attempt", "clients", "completed", "failed",
              "fetch_errors", "intact",
              "acks_captured", "records_at_r", "acks_lost_link_queue", "acks_lost_link_loss",
              "acks_lost_link_down", "acks_unaccounted", "records_combined", "combined_pct",
              "mplex_pkts_at_r", "mean_bundle", "late_records", "expired_ttl",
              "session_tput_mbps", "agg_tput_mbps", "makespan_s", "median_s", "p95_s",
              "cross_udp_loss_pct", "cross_tcp_mbps", "join_s", "rejoins", "wall_s",
              "links_frames_in", "links_dropped_queue", "links_dropped_loss", "links_tap_dropped",
              "engine_received", "engine_out", "engine_taken", "engine_dropped",
              "engine_gate_held", "engine_gate_hold_us", "engine_timer_fires",
              "engine_cpu_port_kernel_drops", "routers_open_states_end", *fidelity.FIELDS, *faults.FIELDS,
              *phases.FIELDS]


def write_runs(rows: list[dict], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RUN_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _fmt(r.get(k)) for k in RUN_FIELDS})


def _fmt(v):
    return f"{v:.4g}" if isinstance(v, float) else ("" if v is None else v)


def _spread(values: list[float]) -> dict:
    if not values:
        return {"mean": None, "min": None, "max": None, "n": 0}
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values),
            "n": len(values)}


def counted(rows: list[dict], keep_unfaithful: bool = False) -> list[dict]:
    """The runs Table 1 counts: the faithful ones (fidelity.py), or all when kept."""
    return rows if keep_unfaithful else [r for r in rows if r.get("faithful", True)]


def summarise(rows: list[dict], keep_unfaithful: bool = False) -> dict:
    """Per environment and delay: combined % (runs with multiplexing on) and session
    throughput normalised to the paired run without multiplexing (same env, seed). Runs
    that broke a fidelity bound are left out unless `keep_unfaithful`."""
    every = rows
    rows = counted(rows, keep_unfaithful)
    out: dict = {}
    envs = sorted({r["env"] for r in every}, key=lambda e: list(paper.TABLE1).index(e)
                  if e in paper.TABLE1 else 99)
    for env in envs:
        delays = sorted({r["delay_ms"] for r in every if r["env"] == env})
        out[env] = {}
        for d in delays:
            on = [r for r in rows if r["env"] == env and r["delay_ms"] == d and r["mode"] == "on"]
            off = {r["seed"]: r for r in rows
                   if r["env"] == env and r["delay_ms"] == d and r["mode"] == "off"}
            norm = [r["session_tput_mbps"] / off[r["seed"]]["session_tput_mbps"]
                    for r in on if r["seed"] in off and off[r["seed"]]["session_tput_mbps"]]
            norm_agg = [r["agg_tput_mbps"] / off[r["seed"]]["agg_tput_mbps"]
                        for r in on if r["seed"] in off and off[r["seed"]]["agg_tput_mbps"]]
            out[env][d] = {
                "combined_pct": _spread([r["combined_pct"] for r in on
                                         if r.get("combined_pct") is not None]),
                "mean_bundle": _spread([r["mean_bundle"] for r in on if r.get("mean_bundle")]),
                "tput_norm": _spread(norm),
                "agg_tput_norm": _spread(norm_agg),
                "paper_combined_pct": paper.TABLE1.get(env, {}).get(d),
                "failed": sum(r.get("failed", 0) for r in on + list(off.values())),
                "runs": sum(1 for r in every if r["env"] == env and r["delay_ms"] == d),
                "unfaithful": sum(1 for r in every if r["env"] == env and r["delay_ms"] == d
                                  and not r.get("faithful", True)),
                "points": [(r["combined_pct"], bool(r.get("faithful", True))) for r in every
                           if r["env"] == env and r["delay_ms"] == d and r["mode"] == "on"
                           and r.get("combined_pct") is not None],
            }
    return out


def table1_markdown(summary: dict) -> str:
    lines = ["| environment | MaxLocalDelay (ms) | ACKs combined, ours (%) | min–max over seeds "
             "| paper (%) | difference (points) | mean bundle | throughput vs plain TCP "
             "| runs faithful |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for env, by_delay in summary.items():
        for d, s in by_delay.items():
            c, p = s["combined_pct"], s["paper_combined_pct"]
            ours = f"{c['mean']:.1f}" if c["mean"] is not None else "–"
            rng = f"{c['min']:.1f}–{c['max']:.1f}" if c["n"] > 1 else ""
            diff = f"{c['mean'] - p:+.1f}" if c["mean"] is not None and p is not None else ""
            mb = s["mean_bundle"]["mean"]
            tn = s["tput_norm"]["mean"]
            lines.append(f"| {env} | {d:g} | {ours} | {rng} | {'' if p is None else p} | {diff} "
                         f"| {'' if mb is None else f'{mb:.2f}'} "
                         f"| {'' if tn is None else f'{tn:.2f}'} "
                         f"| {s['runs'] - s['unfaithful']}/{s['runs']} |")
    return "\n".join(lines)


def plot(summary: dict, out: Path, title_note: str = "") -> list[Path]:
    """table1.png (combined % per delay, ours beside the paper's) and figures5-6.png
    (throughput normalised to plain TCP, with what the paper's text says)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(summary)
    written = []
    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 4), squeeze=False)
    for ax, env in zip(axes[0], envs):
        delays = list(summary[env])
        x = range(len(delays))
        ours = [summary[env][d]["combined_pct"]["mean"] or 0 for d in delays]
        lo = [o - (summary[env][d]["combined_pct"]["min"] or o) for o, d in zip(ours, delays)]
        hi = [(summary[env][d]["combined_pct"]["max"] or o) - o for o, d in zip(ours, delays)]
        theirs = [paper.TABLE1.get(env, {}).get(d) for d in delays]
        ax.bar([i - 0.2 for i in x], ours, 0.4, yerr=[lo, hi], capsize=3, label="concast (here)",
               color="#3b75af")
        ax.bar([i + 0.2 for i in x], [t if t is not None else 0 for t in theirs], 0.4,
               label="paper, Table 1", color="#c0c0c0", edgecolor="#606060")
        for i, t in enumerate(theirs):
            if t is None:
                ax.text(i + 0.2, 2, "n/a", ha="center", fontsize=7)
        # Every run as a dot on its bar: filled if faithful, hollow if it broke a bound.
        for i, d in enumerate(delays):
            for pct, ok in summary[env][d].get("points", []):
                ax.plot(i - 0.2, pct, "o", ms=4, mec="black", mew=0.6,
                        mfc="black" if ok else "none")
        ax.set_xticks(list(x), [f"{d:g}" for d in delays])
        ax.set_xlabel("MaxLocalDelay (ms)")
        ax.set_ylabel("ACKs combined (%)")
        ax.set_ylim(0, 105)
        ax.set_title(f"Table 1, {env}")
        ax.legend(loc="lower right", fontsize=8)
    if title_note:
        fig.suptitle(title_note, fontsize=8)
    fig.tight_layout()
    p = out / "table1.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    written.append(p)

    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 4), squeeze=False)
    for ax, env in zip(axes[0], envs):
        # A cell whose runs were all left out (unfaithful) has no point to draw.
        delays = [d for d in summary[env] if summary[env][d]["tput_norm"]["mean"] is not None]
        t = [summary[env][d]["tput_norm"] for d in delays]
        ys = [s["mean"] for s in t]
        ax.errorbar(delays, ys, yerr=[[(y - s["min"]) if y is not None and s["min"] is not None
                                       else 0 for y, s in zip(ys, t)],
                                      [(s["max"] - y) if y is not None and s["max"] is not None
                                       else 0 for y, s in zip(ys, t)]],
                    marker="o", capsize=3, label="concast (here), session throughput",
                    color="#3b75af")
        ya = [summary[env][d]["agg_tput_norm"]["mean"] for d in delays]
        ax.plot(delays, ya, marker="s", ls="--", color="#7aa6d0",
                label="concast (here), aggregate throughput")
        for kind, d, op, v, text in paper.FIGURE_CLAIMS.get(env, []):
            marker = "v" if op == "<" else "D"
            ax.plot([d], [v], marker=marker, color="#a03030", ls="none")
            ax.annotate(f"paper: {text}", (d, v), textcoords="offset points",
                        xytext=(-4 if d else 4, -12), ha="right" if d else "left",
                        fontsize=6.5, color="#a03030")
        ax.axhline(1.0, color="#888888", lw=0.8)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xticks(delays, [f"{d:g}" for d in delays])
        ax.set_xlim(-0.3, max(delays) * 1.3 if delays else 1)
        ax.set_xlabel("MaxLocalDelay (ms)")
        ax.set_ylabel("throughput, normalised to plain TCP")
        shown = [v for v in ys + ya if v is not None]
        ax.set_ylim(0, max([1.3] + [v * 1.1 for v in shown]))
        ax.set_title(f"Figure {5 if env == 'low-loss' else 6}, {env}")
        ax.legend(loc="lower left", fontsize=7)
    if title_note:
        fig.suptitle(title_note, fontsize=8)
    fig.tight_layout()
    p = out / "figures5-6.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    written.append(p)
    return written


def write_all(rows: list[dict], meta: dict, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    write_runs(rows, out / "runs.csv")
    summary = summarise(rows, meta.get("settings", {}).get("keep_unfaithful", False))
    with open(out / "table1.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["env", "delay_ms", "combined_pct_mean", "combined_pct_min",
                    "combined_pct_max", "paper_combined_pct", "mean_bundle",
                    "tput_norm_mean", "tput_norm_min", "tput_norm_max", "agg_tput_norm_mean"])
        for env, by_delay in summary.items():
            for d, s in by_delay.items():
                c, t = s["combined_pct"], s["tput_norm"]
                w.writerow([env, d, _fmt(c["mean"]), _fmt(c["min"]), _fmt(c["max"]),
                            s["paper_combined_pct"], _fmt(s["mean_bundle"]["mean"]),
                            _fmt(t["mean"]), _fmt(t["min"]), _fmt(t["max"]),
                            _fmt(s["agg_tput_norm"]["mean"])])
    md = table1_markdown(summary)
    (out / "table1.md").write_text(md + "\n")
    (out / "meta.json").write_text(json.dumps({**meta, "summary": _json_keys(summary)},
                                              indent=1, default=str) + "\n")
    note = (f"{meta.get('scale', {}).get('routers', '?')} routers, "
            f"{meta.get('scale', {}).get('clients', '?')} clients, "
            f"{len(meta.get('settings', {}).get('seeds', []))} seed(s), "
            f"rev {meta.get('git', {}).get('rev', '?')[:10]}")
    plot(summary, out, note)
    return summary


def _json_keys(d):
    if isinstance(d, dict):
        return {str(k): _json_keys(v) for k, v in d.items()}
    return d
