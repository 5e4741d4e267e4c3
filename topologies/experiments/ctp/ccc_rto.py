"""The RTO-rule study behind CTCP's RTO policy (issue #23): CTCP (Bulk + NewReno) at 4, 8
and 16 flows over ccc2's emulated 110 ms path, once per RTO rule, with its retransmission
timeouts and how many Eifel found spurious. A rule is (margin G over SRTT, minimum RTO) in
ms, RTO = max(min, SRTT + max(G, 4 RTTVAR)) (RFC 6298 §2.3-2.4), set through concast-perf's
--rto-g-ms/--min-rto-ms.

    sudo flock /tmp/concast-systest.lock .venv/bin/python -m \
        concast.topologies.experiments.ctp.ccc_rto OUT [--flows 4,8,16] [--rules 20/20,20/200,200/200] [--secs 15]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def rule_name(g: float, m: float) -> str:
    return f"CTCP G={g:g} min={m:g}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="ccc_rto")
    ap.add_argument("out", type=Path)
    ap.add_argument("--flows", default="4,8,16")
    ap.add_argument("--rules", default="20/20,20/200,200/200", help="G/min in ms, comma-separated")
    ap.add_argument("--secs", type=float, default=15.0)
    ap.add_argument("--rate", type=float, default=1000.0, help="emulated rate, Mbit/s")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--with-reno", action="store_true", help="kernel reno cells too")
    a = ap.parse_args(argv)
    try:
        flows = [int(x) for x in a.flows.split(",")]
        rules = [tuple(float(v) for v in r.split("/")) for r in a.rules.split(",")]
        if any(len(r) != 2 or min(r) <= 0 for r in rules) or min(flows) < 1:
            raise ValueError
    except ValueError:
        print(f"ccc_rto: --flows is N,N,... and --rules is G/MIN,... in ms (> 0): {a.flows!r} {a.rules!r}",
              file=sys.stderr)
        return 2
    from concast import perfrun
    from concast import provenance
    from .ccc_long import CccSettings, run, summary
    extra = {rule_name(g, m): {"proto": "ctp", "composite": "Bulk", "cc": "newreno", "size": 65536,
                               "args": ["--rto-g-ms", f"{g:g}", "--min-rto-ms", f"{m:g}"]} for g, m in rules}
    why = perfrun.missing(("ip",))
    if why:
        print(f"ccc_rto: {why}", file=sys.stderr)
        return 2
    s = CccSettings(flows=flows, senders=(["TCP reno"] if a.with_reno else []) + list(extra), secs=a.secs,
                    rate_mbit=a.rate, runs=a.runs, extra_senders=extra)
    t0, load0 = time.time(), os.getloadavg()[0]
    rows = run(s, say=lambda m: print(m, flush=True))
    for r in rows:
        print(f"{r['flows']:3} {r['sender']:24} run {r['run']} {r['mbps'] or 0:7.1f} Mbit/s fair {r['fairness'] or 0:.2f} "
              f"timeouts {r['timeouts']} spurious {r['spurious_timeouts']} rtx {r['retransmits']} "
              f"load {r['load1_before']:.1f}-{r['load1_after']:.1f}")
    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"settings": {"flows": flows, "rules_ms": rules, "secs": a.secs, "rate_mbit": a.rate, "runs": a.runs}, "wall_s": time.time() - t0,
            "load1_start": load0, "load1_end": os.getloadavg()[0]}
    meta.update({"git": provenance.git(), "machine": provenance.machine()})
    (a.out / "ccc-rto.json").write_text(json.dumps({"rows": rows, "summary": summary(rows), "meta": meta},
                                                    indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
