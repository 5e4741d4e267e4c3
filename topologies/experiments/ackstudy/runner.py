"""The sweep: for each environment (its cross traffic running), each MaxLocalDelay and each
seed, one run with multiplexing on and one without, interleaved so that the slow drifts of
a shared machine hit both modes alike. Each run is measured by counters only (hostd's
multiplex counters at the clients and at the server, the fetcher's per-client times): at
200 clients, per-packet captures would cost more than the network."""
from __future__ import annotations

import sys
import time

from concast.topologies.experiments.ackstudy.settings import Settings


class Progress:
    """One line per run, with the share done and the time left (a plain, loggable bar)."""

    def __init__(self, total: int, stream=sys.stdout) -> None:
        self.total = total
        self.done = 0
        self.t0 = time.monotonic()
        self.stream = stream

    def step(self, text: str) -> None:
        self.done += 1
        spent = time.monotonic() - self.t0
        left = spent / self.done * (self.total - self.done)
        width = 20
        filled = int(width * self.done / self.total)
        bar = "#" * filled + "." * (width - filled)
        print(f"[ack-study] [{bar}] {self.done}/{self.total} {text}  "
              f"({spent / 60:.1f} min, ~{left / 60:.1f} min left)", file=self.stream, flush=True)


    def note(self, text: str) -> None:
        print(f"[ack-study]   {text}", file=self.stream, flush=True)


def combined(sizes_before: dict, sizes_after: dict) -> tuple[int, int, int]:
    """(records, records in bundles of two or more, MplexPkts) that arrived at R between two
    snapshots of the receiver's bundle-size histogram ({records per MplexPkt: packets})."""
    records = bundled = pkts = 0
    for k, n_after in sizes_after.items():
        n = n_after - sizes_before.get(k, 0)
        size = int(k)
        pkts += n
        records += size * n
        if size >= 2:
            bundled += size * n
    return records, bundled, pkts


def sweep(bed, s: Settings, progress: Progress, rows: list[dict]) -> list[dict]:
    """Runs everything `s` asks for on a started testbed; appends one row per run."""
    for env in s.envs:
        for seed in s.seeds:
            bed.cross_start(env, seed)
            block = []
            try:
                for delay in s.delays_ms:
                    for mode in s.modes:
                        for attempt in range(1 + s.retry_unfaithful):
                            t0 = time.monotonic()
                            row = bed.run(mode, delay)
                            row.update(env=env, seed=seed, delay_ms=delay, mode=mode,
                                       attempt=attempt, wall_s=time.monotonic() - t0)
                            rows.append(row)
                            block.append(row)
                            if row.get("faithful", True):
                                break
                            if attempt < s.retry_unfaithful:
                                progress.note(f"unfaithful ({row['unfaithful_why']}): rerun")
                        progress.step(_describe(row))
            finally:
                cross = bed.cross_stop()
                # Cross traffic runs for the whole block: its figures belong to every run in it.
                for row in block:
                    row["cross_udp_loss_pct"] = (cross.get("udp") or {}).get("loss_pct")
                    row["cross_tcp_mbps"] = (cross.get("tcp") or {}).get("goodput_mbps")
    return rows


def _describe(r: dict) -> str:
    text = (f"{r['env']} seed {r['seed']} {r['delay_ms']:g} ms {r['mode']:>3}: "
            f"{r['completed']}/{r['clients']} pages")
    if r["mode"] == "on":
        text += f", {r['combined_pct']:.0f}% of ACKs combined (bundle {r['mean_bundle']:.2f})"
    text += f", session {r['session_tput_mbps']:.2f} Mbit/s"
    if not r.get("faithful", True):
        text += f" [UNFAITHFUL: {r['unfaithful_why']}]"
    return text
