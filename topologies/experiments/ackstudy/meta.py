"""What makes a run repeatable and comparable: git revision, machine, kernel settings,
parameters; and the peak memory the study used, sampled while it runs."""
from __future__ import annotations

import threading
import time

from concast import provenance


def git() -> dict:
    """{"rev", "dirty"}: the one provenance writer's (concast.provenance)."""
    return provenance.git()


def machine() -> dict:
    """host, kernel, cpus, cpu_model, mem_total_mib, loadavg_at_start, python."""
    return provenance.machine()


def _meminfo() -> dict[str, int]:
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0])
    return out


def used_mib() -> int:
    m = _meminfo()
    return (m["MemTotal"] - m["MemAvailable"]) // 1024


class PeakMemory:
    """Samples the machine's used memory every `period` seconds; `peak - baseline` is what
    the study added (everything else on a shared machine counts too: say so)."""

    def __init__(self, period: float = 1.0) -> None:
        self.baseline = used_mib()
        self.peak = self.baseline
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, args=(period,), daemon=True)

    def __enter__(self) -> "PeakMemory":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()

    def _loop(self, period: float) -> None:
        while not self._stop.wait(period):
            self.peak = max(self.peak, used_mib())

    def as_dict(self) -> dict:
        return {"baseline_mib": self.baseline, "peak_mib": self.peak,
                "added_mib": self.peak - self.baseline}


def stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")
