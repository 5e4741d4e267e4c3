"""Was a run faithful? After Mininet-HiFi (Handigol et al., CoNEXT 2012): an emulation is
trusted only while it keeps the invariants a real network would keep, so every run measures
them and a run that broke one is flagged, not silently averaged in.

The invariants and bounds (docs/experiments.md, "Fidelity"):
- link timing: at most LATE_SHARE_MAX_PCT of the frames the link emulator wrote left later
  than its bound (`concast-linkemu --late-bound-us`, 500 µs: 5 % of the study's 10 ms link
  delay and half of its smallest MaxLocalDelay step, 1 ms, so a frame within it cannot change
  which bundle it joins by more than one step);
- hold time: no ACK record reached R with DelayedSoFar above MaxTotalDelay (`late_records`).
CPU idle and steal over the run are recorded beside them, as the likely cause when a bound
breaks, but are not themselves invariants.
"""
from __future__ import annotations

LATE_SHARE_MAX_PCT = 1.0

FIELDS = ["late_bound_us", "emu_late_p50_us", "emu_late_p99_us", "emu_late_max_us",
          "emu_write_p99_us", "emu_write_max_us", "emu_wake_late_p99_us", "emu_busy_p99_us",
          "emu_busy_max_us", "emu_late_share_pct", "emu_late_share_access_pct", "emu_late_share_core_pct",
          "cpu_idle_pct", "cpu_steal_pct", "faithful", "unfaithful_why"]


def cpu_times(stat_text: str) -> dict[str, int]:
    """The machine-wide `cpu` line of /proc/stat as named jiffy counters."""
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    for line in stat_text.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:1 + len(names)]]
            return dict(zip(names, values + [0] * (len(names) - len(values))))
    raise ValueError("no 'cpu' line in /proc/stat")


def read_cpu_times() -> dict[str, int]:
    with open("/proc/stat") as f:
        return cpu_times(f.read())


def cpu_shares(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """Idle (idle + iowait) and steal as percentages of all CPU time between two readings."""
    d = {k: after[k] - before[k] for k in before}
    total = sum(d.values())
    if total <= 0:
        return {"cpu_idle_pct": 0.0, "cpu_steal_pct": 0.0}
    return {"cpu_idle_pct": 100.0 * (d["idle"] + d["iowait"]) / total,
            "cpu_steal_pct": 100.0 * d["steal"] / total}


def link_class(link: dict, hosts: set[str]) -> str:
    """`access` when one end is a host's interface (`h1-eth0`), `core` between routers."""
    ends = (link.get("a", {}).get("name", ""), link.get("b", {}).get("name", ""))
    return "access" if any(e.rsplit("-", 1)[0] in hosts for e in ends) else "core"


def lateness_by_class(links: list[dict], hosts: set[str]) -> dict[str, dict[str, int]]:
    """Frames written and frames over the bound, summed per link class (both directions)."""
    out = {c: {"frames": 0, "over": 0} for c in ("access", "core")}
    for link in links:
        c = out[link_class(link, hosts)]
        for way in ("ab", "ba"):
            d = link.get(way, {})
            c["frames"] += d.get("late_frames", 0)
            c["over"] += d.get("late_over_bound", 0)
    return out


def _share(over: int, frames: int) -> float:
    return 100.0 * over / frames if frames else 0.0


def measure(emu_stats: dict, before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
            cpu: dict[str, float]) -> dict:
    """A run's fidelity columns from the emulator's daemon-wide stats (lateness since the
    run's reset), the per-class lateness books before and after, and the CPU shares."""
    grew = {c: {k: after[c][k] - before[c][k] for k in after[c]} for c in after}
    frames = sum(g["frames"] for g in grew.values())
    over = sum(g["over"] for g in grew.values())
    return {
        "late_bound_us": emu_stats.get("late_bound_us"),
        "emu_late_p50_us": emu_stats.get("late_p50_us"),
        "emu_late_p99_us": emu_stats.get("late_p99_us"),
        "emu_late_max_us": emu_stats.get("late_max_us"),
        "emu_write_p99_us": emu_stats.get("write_p99_us"),
        "emu_write_max_us": emu_stats.get("write_max_us"),
        "emu_wake_late_p99_us": emu_stats.get("wake_late_p99_us"),
        "emu_busy_p99_us": emu_stats.get("busy_p99_us"),
        "emu_busy_max_us": emu_stats.get("busy_max_us"),
        "emu_late_share_pct": _share(over, frames),
        "emu_late_share_access_pct": _share(grew["access"]["over"], grew["access"]["frames"]),
        "emu_late_share_core_pct": _share(grew["core"]["over"], grew["core"]["frames"]),
        **cpu,
    }


def verdict(row: dict) -> dict:
    """`faithful` and, when not, which invariant broke."""
    why = []
    if (row.get("emu_late_share_pct") or 0.0) > LATE_SHARE_MAX_PCT:
        why.append(f"{row['emu_late_share_pct']:.2f}% of frames later than "
                   f"{row.get('late_bound_us')} us (bound {LATE_SHARE_MAX_PCT}%)")
    if int(row.get("late_records") or 0) > 0:
        why.append(f"{row['late_records']} records over MaxTotalDelay at R")
    return {"faithful": not why, "unfaithful_why": "; ".join(why)}
