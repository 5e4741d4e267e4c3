"""`concast exp ctp --tables ccc2`: UDT/CCC's Table 2 (Gu and Grossman, §4.2) on a long fat
path: 1, 2, 4, ... parallel flows of our CCC TCP ("CTCP-HS 1p": the Bulk composite with NewReno,
a paced initial slow start and HyStart++, every flow in one process) and of kernel Reno and
CUBIC, over a
concast-linkemu link with the paper's 110 ms RTT at `rate_mbit` (one bandwidth-delay product
of drop-tail queue), with aggregate throughput,
Jain's fairness, UDT's stability index and the senders' CPU per flow (`concast.perfrun.
summarize`). Both namespaces' TCP buffers may grow to 64 MB (`net.ipv4.tcp_rmem`/`wmem`), so
kernel TCP is not held below the path's 13.75 MB BDP by Linux's default 4-6 MB.
"""
from __future__ import annotations

import os
import statistics
import subprocess
from dataclasses import dataclass, field

from concast import netns

from .ccc_table2 import PAPER

RTT_MS = 110.0
TCP_BUF = "4096 131072 67108864"
# CTCP's window: the receive memory kernel TCP may use here (TCP_BUF's 64 MB) at the 2,560
# bytes of socket buffer concast's UDP driver counts a datagram (`udp.rs`, TRUESIZE): 26,214
# segments, above two BDPs (18,164 frames), so Reno's sawtooth is not cut off. concast-perf's
# default 8,192 (6,553 before session 13's driver fix) held one flow near 600 Mbit/s (issue #23).
CTCP_WINDOW_SEGS = int(TCP_BUF.split()[-1]) // 2560
_CTCP = {"proto": "ctp", "composite": "Bulk", "size": 65536, "args": ["--window-segs", str(CTCP_WINDOW_SEGS)]}
# The table's CTCP is CTCP with a paced initial slow start that HyStart++ ends (`ctcp_hs`),
# every flow in one sender process driven by one loop (concast-perf --parallel), as UDT/CCC's
# CTCP ran its parallel flows in one application (§4.2, footnote 4). Each step won ten 60 s
# runs at 8 and 16 flows by more than the difference's standard error, by a rule set before
# they ran: `ctcp_hs` over `ctcp` (session 18), one process over one per flow (session 19;
# issue #23, docs/experiments.md).
SENDERS = {
    "TCP reno": {"proto": "tcp", "cc": "reno", "size": 65536},
    "TCP cubic": {"proto": "tcp", "cc": "cubic", "size": 65536},
    "CTCP-HS 1p": {**_CTCP, "cc": "ctcp_hs", "one_process": True},
}
# Run only when named (--ccc-senders): the table's earlier CTCPs, a sender process per flow:
# without HyStart++ or pacing (to session 17), and with them (session 18)
OPTIONAL_SENDERS = {
    "CTCP": {**_CTCP, "cc": "ctcp"},
    "CTCP-HS": {**_CTCP, "cc": "ctcp_hs"},
}


@dataclass
class CccSettings:
    flows: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    senders: list[str] = field(default_factory=lambda: list(SENDERS))
    rate_mbit: float = 1000.0
    secs: float = 15.0
    runs: int = 1
    seed: int = 1
    # the TAPs' txqueuelen ahead of the emulator (None: EmuPath's, 250 ms at the rate);
    # frames put into a full TAP queue are lost outside the link's model (rows' tap_drops_*)
    tap_queue: int | None = None
    # more senders by name (the RTO study's variants), beside SENDERS
    extra_senders: dict = field(default_factory=dict)


def _path(s: CccSettings, tag: str):
    from .emupath import EmuPath
    bdp = int(s.rate_mbit * 1e6 / 8 * RTT_MS / 1e3 / 1514)
    return EmuPath(delay_ms=RTT_MS / 2, rate_mbit=s.rate_mbit, queue_pkts=max(bdp, 100), seed=s.seed, tag=tag,
                   tap_queue=s.tap_queue)


SEND_PATH_FIELDS = ("send_full", "send_wait_ms", "send_wait_max_ms", "poll_late_max_ms", "polls_late_10ms",
                    "poll_late_mean_us",
                    "turn_gap_max_ms", "turn_gap_max_run_delay_ms", "run_delay_per_flow_s", "turn_gap_median_ms")


def send_path(clients: list[dict]) -> dict:
    """The CTCP senders' send-path waits (concast-perf's `io`: sends refused for a full socket
    buffer and the time datagrams waited for room), how late their polls returned (the CPU
    not running a ready sender) and the longest gap between two turns of a sender's loop;
    None for kernel TCP, which reports none of them."""
    io = [c["io"] for c in clients if "send_full" in (c.get("io") or {})]
    if not io:
        return dict.fromkeys(SEND_PATH_FIELDS)
    turned = [c for c in clients if "max_turn_gap_us" in c]
    gaps = [c["max_turn_gap_us"] for c in turned]
    longest = max(turned, key=lambda c: c["max_turn_gap_us"], default=None)
    delays = [c["run_delay_s"] for c in clients if c.get("run_delay_s") is not None]
    return {"send_full": sum(i["send_full"] for i in io),
            "send_wait_ms": sum(i["send_wait_us"] for i in io) / 1e3,
            "send_wait_max_ms": max(i["send_wait_max_us"] for i in io) / 1e3,
            "poll_late_max_ms": max(i.get("poll_late_max_us", 0) for i in io) / 1e3,
            "polls_late_10ms": sum(i.get("polls_late_10ms", 0) for i in io),
            # (binaries before session 17 count no polls: None)
            "poll_late_mean_us": (sum(i.get("poll_late_mean_us", 0) * i["polls"] for i in io) /
                                  max(1, sum(i["polls"] for i in io))) if all("polls" in i for i in io) else None,
            "turn_gap_max_ms": max(gaps) / 1e3 if gaps else None,
            # of the longest turn, how long its sender was runnable but not run (schedstat)
            "turn_gap_max_run_delay_ms": (longest.get("max_turn_gap_run_delay_us", 0) / 1e3
                                          if longest else None),
            "run_delay_per_flow_s": statistics.fmean(delays) if delays else None,
            "turn_gap_median_ms": statistics.median(gaps) / 1e3 if gaps else None}


def recovery(kernel: dict | None, ctp_stats: list[dict]) -> dict:
    """A cell's timeouts, spurious timeouts and retransmissions: kernel TCP's from its sender
    namespace's counters (`netns.tcp_recovery`; its fast retransmits and tail-loss probes
    beside them), CTCP's from concast-perf's session stats; None where a sender has none."""
    if kernel is not None:
        return {"timeouts": kernel["timeouts"], "spurious_timeouts": kernel["spurious_rtos"],
                "retransmits": kernel["retrans_segs"], "tcp_fast_retrans": kernel["fast_retrans"],
                "tcp_loss_probes": kernel["loss_probes"]}
    has = bool(ctp_stats and ctp_stats[0])
    return {k: sum(c.get(k, 0) for c in ctp_stats) if has else None
            for k in ("timeouts", "spurious_timeouts", "retransmits")} | {"tcp_fast_retrans": None,
                                                                         "tcp_loss_probes": None}


def run(s: CccSettings, say=print) -> list[dict]:
    from concast import perfrun as perf
    rows = []
    with _path(s, f"cc{os.getpid()}") as p:
        for h in ("a", "b"):
            subprocess.run(["ip", "netns", "exec", p.ns[h], "sysctl", "-qw", f"net.ipv4.tcp_rmem={TCP_BUF}",
                            f"net.ipv4.tcp_wmem={TCP_BUF}"], check=True)
        # runs interleaved (every sender once, then again): a load change hits every sender alike
        for n in s.flows:
            for r in range(s.runs):
                for name in s.senders:
                    spec = {**SENDERS, **OPTIONAL_SENDERS, **s.extra_senders}[name]
                    kernel = spec["proto"] == "tcp"
                    net0 = {h: netns.net_counters(p.ns[h]) for h in ("a", "b")}
                    st0 = p.stats()
                    load0 = os.getloadavg()[0]
                    rec = perf.run_case(p, dict(spec, mode="bulk"), s.secs, 1, n)
                    sm = perf.summarize(rec)
                    st = p.stats()
                    net = {h: netns.net_counters(p.ns[h]) for h in ("a", "b")}
                    tcp = netns.tcp_recovery(net0["a"], net["a"]) if kernel else None
                    paper = PAPER.get(n)
                    j = 0 if kernel else 1
                    cst = [c.get("stats") or {} for c in rec["client"]]
                    rows.append({"flows": n, "sender": name, "run": r, "mbps": sm.get("mbps"),
                                 "fairness": sm.get("fairness", 1.0 if n == 1 else None),
                                 "fairness_late": sm.get("fairness_late"),
                                 "flow_mbps": " ".join(f"{f['mbps']:.0f}" for f in rec["server"]),
                                 "stability": sm.get("stability"), "cpu_per_flow": sm.get("cpu_per_flow"),
                                 "flows_reported": len(rec["server"]),
                                 **recovery(tcp, cst),
                                 # by detector, and of those acknowledged within the minimum RTT
                                 # of the resend (the original had arrived): concast-perf's audit
                                 **{f"rtx_{k}": (" ".join(str(sum((c.get(f"rtx_{k}") or {}).get(d, 0) for c in cst))
                                                          for d in ("dupack", "rack", "rack_timer", "timeout"))
                                                 if cst and cst[0] else None)
                                    for k in ("by_cause", "early")},
                                 **send_path(rec["client"]),
                                 "emu_queue_drops": st["ab"]["dropped_queue"] - st0["ab"]["dropped_queue"],
                                 "tap_queue": p.tap_queue,
                                 # datagrams the receiver's sockets had no room for (CTCP's data
                                 # there; lost outside the path's model, as TAP drops are)
                                 "udp_rcvbuf_drops_b": (net["b"].get("Udp.RcvbufErrors", 0) -
                                                        net0["b"].get("Udp.RcvbufErrors", 0)),
                                 # data (a) and ACKs (b) lost in a full TAP queue, unread
                                 **{f"tap_drops_{h}": st[h]["tx_dropped"] - st0[h]["tx_dropped"]
                                    for h in ("a", "b")},
                                 "paper_mbps": paper[0][j] if paper else None,
                                 "paper_fairness": paper[1][j] if paper else None,
                                 "paper_stability": paper[2][j] if paper else None,
                                 "load1_before": load0, "load1_after": os.getloadavg()[0],
                                 "errors": "; ".join(rec["errors"])[:300]})
                    say(f"ccc2 {n} flows {name} run {r}: {sm.get('mbps')} Mbit/s fair {sm.get('fairness')} "
                        f"stab {sm.get('stability')}")
        rows_emu = p.emu.call("stats")
    for r in rows:
        r["emu_late_p99_us"] = rows_emu.get("late_p99_us")
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for n, name in dict.fromkeys((r["flows"], r["sender"]) for r in rows):
        rs = [r for r in rows if (r["flows"], r["sender"]) == (n, name)]

        def m(k):
            xs = [r[k] for r in rs if r[k] is not None]
            return statistics.fmean(xs) if xs else None
        mb = [r["mbps"] for r in rs if r["mbps"]]
        out.append({"flows": n, "sender": name, "runs": len(rs), "mbps": m("mbps"),
                    "mbps_sd": statistics.stdev(mb) if len(mb) > 1 else 0.0, "fairness": m("fairness"),
                    "fairness_late": m("fairness_late"),
                    "stability": m("stability"), "cpu_per_flow": m("cpu_per_flow"),
                    "tap_drops_a": m("tap_drops_a"), "tap_drops_b": m("tap_drops_b"),
                    "timeouts": m("timeouts"), "retransmits": m("retransmits"),
                    "emu_queue_drops": m("emu_queue_drops"), "udp_rcvbuf_drops_b": m("udp_rcvbuf_drops_b"),
                    **{k: rs[0][k] for k in ("paper_mbps", "paper_fairness", "paper_stability")}})
    for r in out:
        reno = next((x for x in out if x["flows"] == r["flows"] and x["sender"] == "TCP reno"), None)
        r["vs_reno"] = r["mbps"] / reno["mbps"] if reno and reno["mbps"] and r["mbps"] else None
    return out


def _f(v, fmt="{:.2f}"):
    return "—" if v is None else fmt.format(v)


def text(rows: list[dict]) -> str:
    out = ["| flows | sender | Mbit/s | / reno | fairness | last third | stability | CPU/flow | timeouts | rtx / emulator drops | TAP drops data / ACK | receiver socket drops | paper Mbit/s | paper fair | paper stab |",
           "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in summary(rows):
        out.append(f"| {r['flows']} | {r['sender']} | {_f(r['mbps'], '{:.0f}')} ± {_f(r['mbps_sd'], '{:.0f}')} | "
                   f"{_f(r['vs_reno'], '{:.3f}')} | {_f(r['fairness'])} | {_f(r['fairness_late'])} | {_f(r['stability'])} | "
                   f"{_f(r['cpu_per_flow'], '{:.3f}')} | {_f(r['timeouts'], '{:.1f}')} | "
                   f"{_f(r['retransmits'], '{:.0f}')} / {_f(r['emu_queue_drops'], '{:.0f}')} | {_f(r['tap_drops_a'], '{:.0f}')} / {_f(r['tap_drops_b'], '{:.0f}')} | "
                   f"{_f(r['udp_rcvbuf_drops_b'], '{:.0f}')} | "
                   f"{_f(r['paper_mbps'], '{}')} | {_f(r['paper_fairness'], '{}')} | "
                   f"{_f(r['paper_stability'], '{}')} |")
    return "\n".join(out)


def save(rows: list[dict], meta: dict, out) -> list:
    import csv
    import json
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "ccc2.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (out / "ccc2.json").write_text(json.dumps({"rows": rows, "summary": summary(rows), "meta": meta}, indent=1,
                                              default=str))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sm = summary(rows)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    for ax, key, label in zip(axes, ("mbps", "fairness", "stability", "cpu_per_flow"),
                              ("aggregate Mbit/s", "Jain's fairness", "stability index", "sender CPU per flow (cores)")):
        for name in dict.fromkeys(r["sender"] for r in sm):
            xs = [r for r in sm if r["sender"] == name and r[key] is not None]
            ax.errorbar([r["flows"] for r in xs], [r[key] for r in xs],
                        yerr=[r["mbps_sd"] for r in xs] if key == "mbps" else None, marker="o", capsize=3,
                        label=f"{name}, here")
        if key != "cpu_per_flow":
            for j, name in enumerate(("TCP (Linux 2.4)", "CTCP")):
                ax.plot(list(PAPER), [PAPER[n][("mbps", "fairness", "stability").index(key)][j] for n in PAPER],
                        "--", marker="s", alpha=0.6, label=f"{name}, paper")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("parallel flows")
        ax.set_ylabel(label)
        ax.legend(fontsize=6)
    s = meta["settings"]
    fig.suptitle(f"UDT/CCC Table 2 on concast-linkemu, {s['rate_mbit']:g} Mbit/s, {RTT_MS:g} ms RTT, {s['secs']:g} s "
                 f"a cell, {s['runs']} run(s) — {meta['git']['rev'][:10]} (paper: 1 Gbit/s Chicago-Amsterdam, 110 ms)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "ccc2.png", dpi=110)
    plt.close(fig)
    return [out / "ccc2.csv", out / "ccc2.json", out / "ccc2.png"]
