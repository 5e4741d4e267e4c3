"""Scenario `sim` of `concast exp mtp`: the dissertation's simulator (section 7.4) in virtual
time. Runs `mtping sim` (Rust: its black-box network and TCP model, our MTP client and server)
for the printed runs and a loss sweep, then writes CSV, a PNG with the dissertation's numbers
drawn beside ours, and metadata, into a new timestamped folder."""
from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys
import time
from pathlib import Path
from statistics import mean

from concast import ROOT, prereq, tools

from . import results
from .paper import EMPIRICAL_WAN, PRINTED

#: every scenario of `concast exp mtp` (cli.py runs the others; this parser takes only sim's options)
SCENARIOS = ("sim", "michelle", "wan", "third-party")
#: The sweep's path: the WAN of the printed runs (80 ms, congestion factor 20), 1 MB.
SWEEP = {"rtt_ms": 80, "cong": 20, "bw": 1250, "messages": 1024}


def mtping() -> str:
    return str(tools.rust_binary("mtping"))


def _run(args: list[str]) -> list[dict]:
    p = subprocess.run([mtping(), "sim", *args], capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"mtping sim {' '.join(args)}: {p.stderr.strip() or p.returncode}")
    return list(csv.DictReader(io.StringIO(p.stdout)))


#: Our protocols: the dissertation's MTP; the same with the payload fixed at the simulator's
#: 1 KB message (mtp-1k: no halving below 4 per window, the simulator ignores datagram sizes);
#: that with Appendix F's loss and growth rules (mtp-listing); and the simulator's TCP model.
PROTOCOLS = "mtp,mtp-1k,mtp-listing,tcp"


def run_sim(seeds: int, step: float, max_loss: float, floors: str = "500,50", protos: str = PROTOCOLS) -> dict:
    """Rows of the printed runs and of the sweep, as `mtping sim` prints them."""
    printed = _run(["--printed", "--seeds", str(seeds), "--repeat-floor-ms", floors, "--proto", protos])
    sweep = _run(["--sweep", str(step), "--max-loss", str(max_loss), "--seeds", str(seeds), "--proto", protos,
                  "--repeat-floor-ms", floors, "--rtt-ms", str(SWEEP["rtt_ms"]), "--cong", str(SWEEP["cong"]),
                  "--bw", str(SWEEP["bw"]), "--messages", str(SWEEP["messages"])])
    return {"printed": printed, "sweep": sweep}


def _label(r: dict) -> str:
    return r["proto"] if r["proto"] == "tcp" else f"{r['proto']}@{r['repeat_floor_ms']}ms"


def summary(rows: list[dict], key=("run", "loss")) -> dict:
    """Mean throughput (and min, max) over seeds per (run, loss, protocol label)."""
    by: dict = {}
    for r in rows:
        by.setdefault((r["run"], float(r["loss"]), _label(r)), []).append(float(r["throughput_kBps"]))
    return {k: (mean(v), min(v), max(v), len(v)) for k, v in by.items()}


def table(res: dict) -> str:
    s = summary(res["printed"])
    labels = sorted({k[2] for k in s})
    head = ["run", "loss", "rtt ms", "cong", "paper MTP", "paper TCP"] + [f"ours {l}" for l in labels]
    lines = ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    for run, p in PRINTED.items():
        pr = p["params"]
        vals = []
        for l in labels:
            v = s.get((run, float(pr["loss"]), l))
            vals.append("—" if v is None else (f"{v[0]:.1f}" if v[3] == 1 else f"{v[0]:.1f} ({v[1]:.1f}–{v[2]:.1f})"))
        lines.append(f"| {run} | {pr['loss']:g} | {pr['rtt_ms']} | {pr['cong']} | {p['mtp']['throughput']} | "
                     f"{p['tcp']['throughput']} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5))
    s = summary(res["printed"])
    runs = list(PRINTED)
    labels = sorted({k[2] for k in s})
    width = 0.8 / (2 + len(labels))
    for i, (name, get) in enumerate([("paper MTP", lambda r: PRINTED[r]["mtp"]["throughput"]),
                                     ("paper TCP", lambda r: PRINTED[r]["tcp"]["throughput"])]
                                    + [(f"ours {l}", (lambda l: lambda r: s[(r, float(PRINTED[r]["params"]["loss"]), l)][0])(l))
                                       for l in labels]):
        a.bar([x + i * width for x in range(len(runs))], [get(r) for r in runs], width, label=name,
              hatch="//" if name.startswith("paper") else None, edgecolor="black", linewidth=0.5)
    a.set_xticks([x + 0.4 - width / 2 for x in range(len(runs))], runs, rotation=15)
    a.set_yscale("log")
    a.set_ylabel("throughput, KB/s")
    a.set_title("Section 7.4's printed simulator runs: the paper's (hatched) and ours")
    a.legend(fontsize=8)
    sw = summary(res["sweep"])
    for l in sorted({k[2] for k in sw}):
        pts = sorted((k[1], v[0]) for k, v in sw.items() if k[2] == l)
        b.plot([100 * x for x, _ in pts], [y for _, y in pts], marker="o", label=f"ours {l}")
    w = PRINTED["wan"]
    b.scatter([10], [w["mtp"]["throughput"]], marker="*", s=150, color="black", zorder=5, label="paper sim MTP (10 %)")
    b.scatter([10], [w["tcp"]["throughput"]], marker="X", s=100, color="black", zorder=5, label="paper sim TCP (10 %)")
    for proto, m in (("mtp", "^"), ("tcp", "v")):
        e = EMPIRICAL_WAN[proto]
        b.scatter(list(e), list(e.values()), marker=m, facecolors="none", edgecolors="red", s=70,
                  label=f"paper empirical {proto.upper()} (App. D)")
    b.set_yscale("log")
    b.set_xlabel("loss, %")
    b.set_ylabel("throughput, KB/s")
    b.set_title(f"Loss sweep: {SWEEP['rtt_ms']} ms, congestion factor {SWEEP['cong']}, 1 MB")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save(res: dict, record: dict, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "sim-printed.csv", out / "sim-sweep.csv", out / "sim.png", out / "sim-meta.json",
             out / "sim-table.md"]
    results.write_csv(res["printed"], paths[0])
    results.write_csv(res["sweep"], paths[1])
    plot(res, paths[2])
    results.write_meta(record, "sim", paths[3])
    paths[4].write_text(table(res) + "\n")
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="concast exp mtp", description=__doc__)
    ap.add_argument("--scenario", choices=SCENARIOS, default="sim",
                    help="sim: the dissertation's simulator in virtual time (default); on an emulated "
                         "path (root): michelle (7.4's two-router LAN test), wan (7.2's throughput "
                         "against loss), third-party (7.3); --scenario NAME --help for their options")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 1..N per run (default %(default)s)")
    ap.add_argument("--step", type=float, default=0.02, help="loss step of the sweep (fraction, default %(default)s)")
    ap.add_argument("--max-loss", type=float, default=0.6,
                    help="the sweep's largest loss (fraction, default 0.6)")
    ap.add_argument("--repeat-floor-ms", default="500,50",
                    help="MTP's repeat-interval floors, ms: the dissertation's 500, its simulator's 50 (default %(default)s)")
    ap.add_argument("--protocols", default=PROTOCOLS, help="mtp, mtp-1k, mtp-listing, mtp-cubic, tcp (comma separated; default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="3 seeds, a 0.1 step: seconds")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "mtp", metavar="DIR",
                    help="results go to a new timestamped folder in DIR (default results/mtp)")
    a = ap.parse_args(argv)
    if a.quick:
        a.seeds, a.step = 3, 0.1
    if a.seeds < 1 or not 0 < a.step < 1 or not 0 <= a.max_loss < 1:
        ap.error("--seeds ≥ 1, 0 < --step < 1, 0 ≤ --max-loss < 1")
    why = prereq.built("mtping")
    if why:
        return prereq.report("concast exp mtp", why)
    t0 = time.monotonic()
    params = {"seeds": list(range(1, a.seeds + 1)), "step": a.step, "max_loss": a.max_loss,
              "repeat_floor_ms": a.repeat_floor_ms, "protocols": a.protocols, "sweep_path": SWEEP,
              "printed_runs": {k: v["params"] for k, v in PRINTED.items()}}
    record = results.begin(params, argv if argv is not None else sys.argv[1:])
    try:
        res = run_sim(a.seeds, a.step, a.max_loss, a.repeat_floor_ms, a.protocols)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        print(f"concast exp mtp: {e}", file=sys.stderr)
        return 2
    out = results.new_folder(a.out, a.scenario)
    print(table(res))
    paths = save(res, record, out)
    print(f"[mtp] done in {time.monotonic() - t0:.1f} s: {', '.join(str(p) for p in paths)}")
    return 0
