"""The table, CSV, plot and JSON of `concast exp mplex`."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from .settings import LINK_TITLES, LINKS, Phase, Settings


def rows(on: Phase | None, off: Phase | None) -> list[tuple[str, str, str]]:
    """(metric, with multiplexing, without) for the table and the CSV."""
    def both(fn, fmt="{}"):
        return tuple(fmt.format(fn(p)) if p else "" for p in (on, off))

    out = [("downloads intact (sha256)", *both(lambda p: f"{p.intact}/{p.n_downloads}")),
           ("ACKs sent by the clients' kernels", *both(lambda p: p.acks_sent)),
           ("ACKs reaching sv's TCP", *both(lambda p: p.acks_arrived)),
           ("ACKs combined (reached sv bundled with others, %)",
            *both(lambda p: f"{p.combined_pct():.1f}" if p.links["r2-sv"].mplex else "–"))]
    for k in LINKS:
        out.append((f"packets toward sv, {LINK_TITLES[k]}", *both(lambda p, k=k: p.links[k].packets)))
    for k in ("r1-r2", "r2-sv"):
        def saved(p, k=k):
            c = p.links[k]
            s = c.acks - c.mplex - c.plain_acks
            return f"{s} ({100.0 * s / c.acks:.1f}% of {c.acks} ACKs)" if c.mplex else "–"
        out.append((f"packets saved on {LINK_TITLES[k]} (ACKs carried − packets)", *both(saved)))
        out.append((f"mean bundle on {LINK_TITLES[k]} (records per MplexPkt)",
                    *both(lambda p, k=k: f"{p.links[k].mean_bundle:.2f}" if p.links[k].mplex else "–")))
    for r in ("r1", "r2"):
        out.append((f"routerd {r}: datagrams merged in → out",
                    *both(lambda p, r=r: f"{p.routers[r]['merged_in']} → {p.routers[r]['merged_out']}")))
    out += [("ACKs lost between the clients and sv's interface",
             *both(lambda p: p.accounting["lost_in_network"])),
            ("records dropped by the TTL rule", *both(lambda p: p.expired())),
            ("transfer time, mean / slowest of a run (s)",
             *both(lambda p: f"{p.mean_time:.3f} / {p.makespan:.3f}")),
            ("throughput, all clients (Mbit/s)", *both(lambda p: f"{p.throughput_mbps():.1f}"))]
    return out


def table(rs) -> str:
    w0 = max(len(r[0]) for r in rs)
    w1 = max(len("multiplexing on"), *(len(r[1]) for r in rs))
    w2 = max(len("multiplexing off"), *(len(r[2]) for r in rs))
    lines = [f"{'':{w0}}  {'multiplexing on':>{w1}}  {'multiplexing off':>{w2}}",
             f"{'-' * w0}  {'-' * w1}  {'-' * w2}"]
    lines += [f"{a:{w0}}  {b:>{w1}}  {c:>{w2}}" for a, b, c in rs]
    return "\n".join(lines)


def write_csv(path: Path, rs) -> None:
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["metric", "multiplexing_on", "multiplexing_off"])
        w.writerows(rs)


def plot(path: Path, on: Phase | None, off: Phase | None, s: Settings) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4.6))
    runs = len((on or off).runs)
    fig.suptitle(f"ACK multiplexing, {s.clients} clients × {s.size / 1e6:g} MB"
                 + (f", {runs} runs of each" if runs > 1 else "") + " "
                 f"(MaxLocalDelay {s.max_local_delay_ms} ms, MaxTotalDelay {s.max_total_delay_ms} ms)")
    x = range(len(LINKS))
    for i, (p, label, color) in enumerate(((off, "off", "#999999"), (on, "on", "#1f77b4"))):
        if p:
            vals = [p.links[k].packets for k in LINKS]
            bars = a.bar([j + (i - 0.5) * 0.4 for j in x], vals, 0.4, label=f"multiplexing {label}",
                         color=color)
            texts = [str(v) for v in vals]
            if p is on and off and on.acks_sent and off.acks_sent:
                # The runs' TCPs send different numbers of ACKs: compare packets per ACK.
                texts = [f"{v}\n{100 * (v / on.acks_sent) / (o / off.acks_sent) - 100:+.0f}% per ACK"
                         for v, o in zip(vals, (off.links[k].packets for k in LINKS))]
            a.bar_label(bars, labels=texts, fontsize=8)
    a.margins(y=0.28)
    a.set_xticks(list(x), [LINK_TITLES[k].replace(" (all access links)", "\n(8 access links)") for k in LINKS])
    a.set_ylabel("datagrams toward sv")
    a.set_title("packets in the ACK direction, per link")
    a.legend(loc="upper center", ncol=2, fontsize=8)
    if on:
        width = 0.4
        for i, k in enumerate(("r1-r2", "r2-sv")):
            sizes = on.links[k].sizes or {}
            ks = sorted(sizes)
            b.bar([v + (i - 0.5) * width for v in ks], [sizes[v] for v in ks], width,
                  label=f"{LINK_TITLES[k]} (mean {on.links[k].mean_bundle:.2f})")
        b.set_xlabel("records (ACKs) per MplexPkt")
        b.set_ylabel("MplexPkts")
        b.set_title("bundle sizes after each router")
        b.legend()
    hosts = sorted((on or off).downloads, key=lambda h: int(h[1:]))
    for i, (p, label, color) in enumerate(((off, "off", "#999999"), (on, "on", "#1f77b4"))):
        if p:
            c.bar([j + (i - 0.5) * 0.4 for j in range(len(hosts))],
                  [p.client_time(h) for h in hosts], 0.4, label=f"multiplexing {label}",
                  color=color)
    c.set_xticks(range(len(hosts)), hosts)
    c.set_ylabel("seconds")
    c.set_title("download time per client" + (f" (mean of {len((on or off).runs)} runs)"
                                                 if len((on or off).runs) > 1 else ""))
    c.margins(y=0.2)
    c.legend(loc="upper center", ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def phase_json(p: Phase) -> dict:
    return {"mode": p.mode, "intact": p.intact, "acks_sent": p.acks_sent,
            "acks_arrived": p.acks_arrived,
            "accounting": {k: v for k, v in p.accounting.items() if not k.endswith("_keys")},
            "runs": [{h: vars(d) for h, d in r.items()} for r in p.runs],
            "expired_ttl": p.expired_ttl, "capture_drops": p.capture_drops,
            "links": {k: {**{f: getattr(v, f) for f in ("packets", "plain_acks", "mplex", "records", "other")},
                          "sizes": v.sizes} for k, v in p.links.items()},
            "routers": p.routers, "hostd_mplex": p.hostd}


def save(out: Path, s: Settings, phases: dict[str, Phase]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    on, off = phases.get("on"), phases.get("off")
    rs = rows(on, off)
    write_csv(out / "mplex.csv", rs)
    plot(out / "mplex.png", on, off, s)
    (out / "mplex.json").write_text(json.dumps(
        {"settings": vars(s), "phases": {m: phase_json(p) for m, p in phases.items()}},
        indent=1, default=str) + "\n")
    dest = out / "mplex"
    if dest.exists():
        shutil.rmtree(dest)
    for p in phases.values():
        for paths in p.pcaps.values():
            for path in paths:
                if path.exists():          # <run>/pcap/<mode>-<n>/<link>.pcap -> mplex/<mode>-<n>/
                    (dest / path.parent.name).mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, dest / path.parent.name / path.name)
    return [out / "mplex.csv", out / "mplex.png", out / "mplex.json", out / "mplex"]
