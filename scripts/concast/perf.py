"""`concast perf`: the host transport (concast-perf) measured against kernel TCP and plain
UDP in the same run, between two network namespaces joined by a veth pair, with optional
random loss from nftables. Prints a table with ratios (or, with --json, the JSON on stdout) and
writes the JSON to OUT/perf.json (its "meta": the provenance record of concast.provenance, also
in OUT/meta.json); OUT is --out or a new folder results/perf/<UTC time>-<revision>/.

From Python: `measure(mode=..., proto=..., ...)` runs one case and returns its JSON records.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path as FsPath

from concast import prereq, provenance
from concast.argtypes import hidden_alias
from concast.perfpath import MininetPath, Path, PathError
# The measuring code lives a floor down (experiments use it too); these names stay here
# for scripts written against `concast.perf`.
from concast.perfrun import (CC_NAMES, COMPOSITES, MODES, RESULT_FILE, RESULTS, add_ratios, binary,  # noqa: F401
                             cases, io_path, measure, missing, run_case, stability, summarize,
                             table)


DESCRIPTION = ("The host transport (concast-perf: CTP composites and MTP) measured against kernel TCP "
               "and plain UDP in the same run, between two network namespaces (root). Prints a "
               "table with ratios and writes perf.json and meta.json to a new result folder.")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--mode", default="bulk,pingpong",
                    help=f"{','.join(MODES)} (comma list; mtp: MTP transactions of 1 MB objects "
                         f"from concast-perf's stateless server, beside kernel TCP bulk; "
                         f"default %(default)s)")
    ap.add_argument("--composite", default="Minimal,Bulk",
                    help=f"CTP composites (comma list) of {', '.join(COMPOSITES)}, or "
                         f"microprotocols joined by + (default %(default)s)")
    ap.add_argument("--cc", default="newreno",
                    help=f"the host transport's (CTP) congestion controls for Bulk (comma list, "
                         f"or 'all') of {', '.join(CC_NAMES)} (default %(default)s)")
    ap.add_argument("--tcp-cc", default="cubic,reno",
                    help="kernel TCP congestion controls (comma list; default %(default)s)")
    ap.add_argument("--loss", default="0",
                    help="random loss percentages (comma list; default %(default)s)")
    ap.add_argument("--flows", default="1",
                    help="parallel flows (comma list; bulk only; default %(default)s)")
    hidden_alias(ap, "--secs", ap.add_argument(
        "--duration", type=float, default=5.0, metavar="S",
        help="seconds per bulk or stream run (default 5)"))
    ap.add_argument("--count", type=int, default=2000,
                    help="ping-pong round trips (default %(default)s)")
    ap.add_argument("--rate", type=float, default=0.0, help="bottleneck rate in Mbit/s each way "
                                                             "(tc tbf; default 0: none)")
    ap.add_argument("--json", action="store_true",
                    help="print the results as JSON on stdout instead of the table")
    ap.add_argument("--out", metavar="DIR",
                    help=f"write {RESULT_FILE} and meta.json into this folder (default a new "
                         f"folder results/perf/<time>-<rev>/)")
    ap.add_argument("--loc", action="store_true", help="print the transport's lines-of-code "
                                                         "table and exit")
    ap.add_argument("--mininet", action="store_true", help="run between two Mininet hosts "
                    "(a ConcastNet on userspace OVS) instead of two bare namespaces")
    ap.add_argument("--suite", choices=["bench"], help="run the benchmark suite (make bench): "
                    "lossless, loss 1-10%%, parallel flows on a 100 Mbit/s bottleneck, streaming")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="concast perf", description=DESCRIPTION)
    add_arguments(ap)
    return run(ap.parse_args(argv))


def collect(ns: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """Run every case the options ask for; returns (rows, raw runs)."""
    def split(v: str) -> list[str]:
        return [x.strip() for x in v.split(",") if x.strip()]
    modes = split(ns.mode)
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise ValueError(f"unknown mode {bad[0]!r}: use {', '.join(MODES)}")
    ccs = CC_NAMES if ns.cc == "all" else split(ns.cc)
    runs = []
    for loss in [float(x) / 100 for x in split(ns.loss)]:
        path_cls = MininetPath if getattr(ns, "mininet", False) else Path
        with path_cls(loss=loss, rate_mbit=ns.rate) as path:
            for flows in [int(x) for x in split(ns.flows)]:
                blaster = 0.9 * ns.rate if ns.rate else 500.0  # below the bottleneck
                for case in cases(modes, split(ns.composite), ccs, split(ns.tcp_cc), blaster):
                    if flows > 1 and case["mode"] != "bulk":
                        continue
                    print(f"concast perf: {case['mode']} {case['proto']} {case.get('composite', '')} "
                          f"{case.get('cc') or ''} loss {loss:.0%} flows {flows}", file=sys.stderr, flush=True)
                    run = run_case(path, case, ns.duration, ns.count, flows)
                    run["rate_mbit"] = ns.rate
                    runs.append(run)
    rows = [summarize(r) for r in runs]
    for r, raw in zip(rows, runs):
        r["rate_mbit"] = raw["rate_mbit"]
    add_ratios(rows)
    return rows, runs


# The benchmark suite: option sets for `collect`, each measured with its peers.
SUITE = [
    {"mode": "bulk,pingpong", "composite": "Minimal,Bulk", "cc": "all", "loss": "0"},
    {"mode": "bulk", "composite": "Bulk", "cc": "all", "loss": "1,5,10"},
    {"mode": "bulk", "composite": "Bulk", "cc": "newreno", "tcp_cc": "reno", "loss": "0",
     "flows": "1,2,4,8,16,64", "rate": 100.0},
    {"mode": "stream", "composite": "Bulk,Audio", "loss": "0,5,10", "duration": 10.0},
]


def run(ns: argparse.Namespace) -> int:
    if ns.loc:
        from concast import transportloc
        return transportloc.main()
    lossy = ns.suite or any(x.strip() not in ("", "0") for x in ns.loss.split(","))
    why = missing(("ip", "nft", "ethtool") if lossy else ("ip",))
    if why:
        return prereq.report("concast perf", why)
    params = {k: v for k, v in vars(ns).items() if k not in ("func", "json", "out", "loc")}
    meta = provenance.start(params, seed="none: loss is nftables numgen random (kernel PRNG)",
                            binaries=("concast-perf",))
    try:
        if ns.suite:
            rows, runs = [], []
            for opts in SUITE:
                part = argparse.Namespace(**{**vars(ns), **opts})
                r, raw = collect(part)
                rows += r
                runs += raw
        else:
            rows, runs = collect(ns)
    except PathError as e:
        return prereq.report("concast perf", str(e))
    except ValueError as e:
        print(f"concast perf: {e}", file=sys.stderr)
        return 2
    folder = FsPath(ns.out) if ns.out else provenance.run_folder(RESULTS / "perf")
    meta = provenance.public(provenance.finish(meta))
    result = {"rows": rows, "runs": runs, "meta": meta}
    out = folder / RESULT_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    provenance.write(folder, meta)
    if ns.json:
        print(json.dumps(result))
    else:
        print(table(rows))
        print(f"results: {out}")
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
