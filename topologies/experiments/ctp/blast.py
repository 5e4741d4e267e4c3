"""`concast exp ctp --tables blast`: UDT/CCC §4's two further checks on an emulated path (the
ccc2 path: concast-linkemu, 110 ms RTT): UDP Blast (`cc/blaster.rs`, the fixed-rate sender)
reaching its configured rate, and the streaming merge, where the receiver sets its senders'
rate with a rate message (concast-perf server --set-rate): `merge_flows` blasters start at
`merge_start_mbit` each, and `merge_after` s after the first delivery the receiver asks for
`merge_total_mbit` in all. Rates are the receiver's: bytes per 0.5 s sample (concast-perf's
`samples`), the first and last (partial) samples left out, averaged (a sample counts whole
64 KB messages, so a median would be quantised to 1.05 Mbit/s steps).
"""
from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field

SAMPLE_S = 0.5


@dataclass
class BlastSettings:
    rates_mbit: list[float] = field(default_factory=lambda: [10, 100, 300, 600])
    secs: float = 8.0
    runs: int = 3
    merge_flows: int = 2
    merge_start_mbit: float = 200.0
    merge_total_mbit: float = 100.0
    merge_after: float = 4.0
    merge_secs: float = 10.0
    rate_mbit: float = 1000.0      # the emulated link
    rtt_ms: float = 110.0
    seed: int = 1


def _mbps(samples: list[int]) -> list[float]:
    return [b * 8 / SAMPLE_S / 1e6 for b in samples[1:-1]]


def run(s: BlastSettings, say=print) -> list[dict]:
    from concast import perfrun as perf

    from .ccc_long import send_path
    from .emupath import EmuPath
    bdp = int(s.rate_mbit * 1e6 / 8 * s.rtt_ms / 1e3 / 1514)
    rows = []
    with EmuPath(delay_ms=s.rtt_ms / 2, rate_mbit=s.rate_mbit, queue_pkts=max(bdp, 100), seed=s.seed,
                 tag=f"bl{os.getpid()}") as p:
        for want in s.rates_mbit:
            for r in range(s.runs):
                st0, load0 = p.stats(), os.getloadavg()[0]
                rec = perf.run_case(p, {"mode": "bulk", "proto": "ctp", "composite": "Bulk", "cc": "blaster",
                                        "size": 65536, "rate": want * 1e6}, s.secs, 1)
                st = p.stats()
                srv = [x for x in rec["server"] if x.get("role") == "server"]
                xs = _mbps(srv[0]["samples"]) if srv else []
                got = statistics.fmean(xs) if xs else None
                cl = [c for c in rec["client"] if c.get("role") == "client"]
                rows.append({"check": "blast", "run": r, "configured_mbit": want, "received_mbit": got,
                             "ratio": got / want if got else None,
                             "received_median_mbit": statistics.median(xs) if xs else None,
                             "samples_mbit": [round(x, 2) for x in xs],
                             # where a shortfall is: the sender's CPU and late wake-ups, or loss
                             "sender_cpu_share": cl[0]["cpu_secs"] / s.secs if cl and "cpu_secs" in cl[0] else None,
                             **send_path(rec["client"]),
                             "emu_queue_drops": st["ab"]["dropped_queue"] - st0["ab"]["dropped_queue"],
                             "tap_drops_a": st["a"]["tx_dropped"] - st0["a"]["tx_dropped"],
                             "load1_before": load0, "load1_after": os.getloadavg()[0],
                             "errors": "; ".join(rec["errors"])[:300]})
                say(f"blast {want} Mbit/s run {r}: {got}")
        for r in range(s.runs):
            rec = perf.run_case(p, {"mode": "bulk", "proto": "ctp", "composite": "Bulk", "cc": "blaster", "size": 65536,
                                    "rate": s.merge_start_mbit * 1e6,
                                    "server_args": ["--set-rate", str(s.merge_total_mbit * 1e6),
                                                    "--rate-after", str(s.merge_after)]},
                                s.merge_secs, 1, s.merge_flows)
            srv = [x for x in rec["server"] if x.get("role") == "server"]
            # per flow: the first sample is partial; the request goes out merge_after s after the
            # first delivery, so samples well before and one RTT + a sample after it are clean
            n_before = int(s.merge_after / SAMPLE_S)
            settle = n_before + 1 + int((s.rtt_ms / 1e3 + SAMPLE_S) / SAMPLE_S)
            per = [[b * 8 / SAMPLE_S / 1e6 for b in x["samples"]] for x in srv]
            before = sum(statistics.fmean(f[1:n_before]) for f in per if len(f) > n_before)
            after = sum(statistics.fmean(f[settle:-1]) for f in per if len(f) > settle + 1)
            rows.append({"check": "merge", "run": r, "flows": len(srv), "start_mbit_each": s.merge_start_mbit,
                         "asked_total_mbit": s.merge_total_mbit, "before_total_mbit": before,
                         "after_total_mbit": after, "ratio": after / s.merge_total_mbit if after else None,
                         "samples_mbit": [[round(v, 2) for v in f] for f in per],
                         "errors": "; ".join(rec["errors"])[:300]})
            say(f"merge run {r}: {before:.1f} -> {after:.1f} Mbit/s (asked {s.merge_total_mbit})")
    return rows


def text(rows: list[dict]) -> str:
    out = ["| configured Mbit/s | received (mean of 0.5 s samples; mean ± sd over runs) | ratio | sender CPU share | "
           "poll late, mean µs | drops emulator / TAP |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]

    def mean(rs, k, fmt):
        vs = [r[k] for r in rs if r.get(k) is not None]
        return fmt.format(statistics.fmean(vs)) if vs else "—"
    for want in dict.fromkeys(r["configured_mbit"] for r in rows if r["check"] == "blast"):
        rs = [r for r in rows if r["check"] == "blast" and r["configured_mbit"] == want and r["received_mbit"]]
        xs = [r["received_mbit"] for r in rs]
        if xs:
            m, sd = statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)
            out.append(f"| {want:g} | {m:.2f} ± {sd:.2f} | {m / want:.3f} | {mean(rs, 'sender_cpu_share', '{:.2f}')} | "
                       f"{mean(rs, 'poll_late_mean_us', '{:.0f}')} | {mean(rs, 'emu_queue_drops', '{:.0f}')} / "
                       f"{mean(rs, 'tap_drops_a', '{:.0f}')} |")
    out += ["", "| merge run | flows | before, all flows Mbit/s | asked | after | after / asked |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if r["check"] == "merge":
            out.append(f"| {r['run']} | {r['flows']} | {r['before_total_mbit']:.1f} | {r['asked_total_mbit']:g} | "
                       f"{r['after_total_mbit']:.1f} | {r['ratio']:.3f} |")
    return "\n".join(out)


def save(rows: list[dict], meta: dict, out) -> list:
    import csv
    import json
    out.mkdir(parents=True, exist_ok=True)
    cols = sorted({k for r in rows for k in r}, key=lambda k: (k != "check", k))
    with open(out / "blast.csv", "w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        w.writerows(rows)
    (out / "blast.json").write_text(json.dumps({"rows": rows, "meta": meta}, indent=1, default=str))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    bl = [r for r in rows if r["check"] == "blast" and r["received_mbit"]]
    ax = axes[0]
    ax.plot([r["configured_mbit"] for r in bl], [r["received_mbit"] for r in bl], "o", label="received, each run")
    top = max([r["configured_mbit"] for r in bl] or [1])
    ax.plot([0, top], [0, top], "--", color="#999999", label="configured (the paper's check: equal)")
    ax.set_xlabel("blaster's configured rate (Mbit/s)")
    ax.set_ylabel("receiver's rate (Mbit/s)")
    ax.set_title("UDP Blast on the emulated path", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    s = meta["settings"]
    for r in (x for x in rows if x["check"] == "merge"):
        tot = [sum(v) for v in zip(*r["samples_mbit"])]
        ax.plot([SAMPLE_S * (i + 0.5) for i in range(len(tot))], tot, marker=".", label=f"all flows, run {r['run']}")
    ax.axhline(s["merge_total_mbit"], ls="--", color="#999999", label="asked by the receiver")
    ax.axvline(s["merge_after"], ls=":", color="#d62728", label="rate message sent")
    ax.set_xlabel("s since the first delivery")
    ax.set_ylabel("receiver's rate, all senders (Mbit/s)")
    ax.set_title(f"streaming merge: {s['merge_flows']} blasters at {s['merge_start_mbit']:g} each", fontsize=9)
    ax.legend(fontsize=7)
    fig.suptitle(f"UDT/CCC §4 checks on concast-linkemu, {s['rate_mbit']:g} Mbit/s, {s['rtt_ms']:g} ms RTT — "
                 f"{meta['git']['rev'][:10]}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "blast.png", dpi=110)
    plt.close(fig)
    return [out / "blast.csv", out / "blast.json", out / "blast.png"]
