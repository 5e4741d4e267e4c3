"""One transaction on the emulated path, as the dissertation's tclient made one (section 7.2):
a fast ping runs beside it and measures the loss it met; MTP through `mtping get`, TCP through
the loss study's one-connection-per-object fetcher with the namespace's TCP profile set first.
Throughput is in the dissertation's KB/s (1024 bytes): bytes that arrived in order (a
transaction stopped at the limit counts its contiguous prefix, as tclient counted the data
received by its sixty seconds) over the transaction's time."""
from __future__ import annotations

import sys

from concast import tools
from concast.netns import tcp_recovery
from concast.topologies.experiments.transport.settings import MTP_PORT, TCP_PORT

from .path import EmulatedPath

#: protocol name -> (kernel congestion control, TCP profile); "mtp" is MTP.
TCP_PROTOCOLS = {"reno-1999": ("reno", "1999"), "reno-1999-8k": ("reno", "1999-8k"), "cubic": ("cubic", "linux"),
                 "reno": ("reno", "linux")}
PROTOCOLS = ("mtp", *TCP_PROTOCOLS)
KB = 1024


def mtp_argv(path: EmulatedPath, name: str, count: int, parallel: int, limit: float, cc: str,
             repeat_floor_ms: int) -> list[str]:
    return [str(tools.rust_binary("mtping")), "get", f"{path.server_ip}:{MTP_PORT}", "--name", name,
            "--count", str(count), "--parallel", str(parallel), "--limit", str(limit),
            # the limit governs: no transaction may expire before it
            "--expire", str(limit + 30), "--cc", cc, "--repeat-floor-ms", str(repeat_floor_ms)]


def tcp_argv(path: EmulatedPath, name: str, count: int, limit: float, cc: str) -> list[str]:
    return [sys.executable, "-m", "concast.topologies.experiments.transport.tcpobj", "get",
            "--host", path.server_ip, "--port", str(TCP_PORT), "--name", name, "--count", str(count),
            "--limit", str(limit), "--cc", cc]


def transaction(path: EmulatedPath, proto: str, name: str, size: int, limit: float,
                mtp_cc: str = "mtp", repeat_floor_ms: int = 500, rto_min_ms: int = 1000) -> dict:
    """One object fetched with `proto`, a fast ping beside it; one row."""
    if proto != "mtp" and proto not in TCP_PROTOCOLS:
        raise ValueError(f"protocol {proto!r}: one of {PROTOCOLS}")
    row: dict = {"proto": proto, "size": size}
    if proto == "mtp":
        argv = mtp_argv(path, name, 1, 1, limit, mtp_cc, repeat_floor_ms)
        row["mtp_cc"] = mtp_cc
    else:
        cc, profile = TCP_PROTOCOLS[proto]
        path.tcp_profile(profile, rto_min_ms)
        argv = tcp_argv(path, name, 1, limit, cc)
        row["tcp_profile"] = profile
    before = path.tcp_counters()
    ping = path.ping_start()
    try:
        r = path.run_json(path.client, argv, limit + 30)
    finally:
        sent, answered = path.ping_stop(ping)
    row.update({"ping_sent": sent, "ping_answered": answered,
                "ping_loss_pct": 100 * (sent - answered) / sent if sent else None})
    if r is None:
        return {**row, "bytes": 0, "secs": limit, "complete": False, "hash_ok": False, "kBps": 0.0}
    got = r["bytes"] + r.get("partial_bytes", 0)
    row.update({"bytes": got, "secs": r["secs"], "complete": bool(r["complete"]),
                "hash_ok": r["objects"] == 0 or (r["sha256"] == path.sha256[name] and r["all_same"]),
                "kBps": got / KB / max(r["secs"], 1e-9)})
    if proto == "mtp":
        st = r.get("stats", {})
        row.update({"mean_window": r.get("mean_window"), "datagram_size": r.get("datagram_size"),
                    "repeats": st.get("repeats"), "requests": st.get("requests"),
                    "window_cuts": st.get("window_cuts"), "window_grows": st.get("window_grows"),
                    "mtp_loss_pct": 100 * st["repeats"] / st["requests"] if st.get("requests") else None})
    else:
        row.update(tcp_recovery(before, path.tcp_counters()))
    return row
