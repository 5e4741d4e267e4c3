"""A `concast.perfpath.Path` whose link is emulated by concast-linkemu: two network
namespaces, one TAP in each, joined by the emulator with a one-way delay, a rate, a drop-tail
queue and seeded random loss in both directions (docs/linkemu.md, "The model"). This kernel has
no netem, so this is how the CTP and UDT/CCC experiments get the papers' long round trips.

Everything it creates carries the prefix `cemu-<tag>-` (namespaces, TAP names, the emulator's
state file `/dev/shm/concast-linkemu-cemu<tag>`), so runs of other helpers and other scenarios
cannot collide with it; `close()` stops the emulator it started (by PID) and deletes exactly
its namespaces.
"""
from __future__ import annotations

import os
import tempfile

from concast.netns import ip
from concast.perfpath import Path, PathError

# The emulator's drop-tail queue when none is asked for: large enough that it is not the
# bottleneck's limit at the papers' bandwidth-delay products (100 Mbit/s x 413 ms is about
# 3,500 frames of 1,500 bytes; 1 Gbit/s x 110 ms about 9,200).
DEFAULT_QUEUE = 10000

class EmuPath(Path):
    """`with EmuPath(delay_ms=206.5, rate_mbit=100, loss=0.05, seed=1) as p:` — hosts "a" and
    "b", `delay_ms` each way (RTT = 2 x delay_ms), loss in [0, 1) per direction."""

    def __init__(self, delay_ms: float, rate_mbit: float = 0.0, loss: float = 0.0,
                 queue_pkts: int | None = None, seed: int = 1, tag: str | None = None,
                 tap_queue: int | None = None):
        """`tap_queue`: the TAPs' txqueuelen in frames (default: the emulator's, a quarter
        second at the rate; `tap_queue` then reads what it set)."""
        super().__init__(loss=loss, tag=tag, rate_mbit=rate_mbit)
        if tap_queue is not None and tap_queue < 1:
            raise ValueError(f"tap_queue must be >= 1 frame, got {tap_queue}")
        self.tap_queue = tap_queue
        if delay_ms < 0:
            raise ValueError(f"delay must be >= 0 ms, got {delay_ms}")
        self.delay_ms, self.seed = delay_ms, seed
        self.queue_pkts = queue_pkts or DEFAULT_QUEUE
        t = tag or str(os.getpid())
        self.prefix = f"cemu-{t}-"
        self.ns = {"a": self.prefix + "a", "b": self.prefix + "b"}
        self.link_id = f"cemu{t}"
        self.emu = None
        self._tag = t

    def __enter__(self) -> "EmuPath":
        from concast.perfpath import unavailable
        why = unavailable(("ip",))
        if why:
            raise PathError(why)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def params(self) -> dict:
        p = {"delay": f"{self.delay_ms}ms", "max_queue_size": self.queue_pkts}
        if self.rate_mbit:
            p["bw"] = self.rate_mbit
        if self.loss:
            p["loss"] = self.loss * 100
        return p

    def _build(self) -> None:
        from concast.topologies.links import LinkEmulator
        for h in ("a", "b"):
            self.scratch.add(self.ns[h])
        self.emu = LinkEmulator(tempfile.mkdtemp(prefix=self.prefix), f"cemu{self._tag}").start()
        dev = {h: f"ce{self._tag}{h}"[:15] for h in ("a", "b")}
        mac = {"a": "02:ce:00:00:00:01", "b": "02:ce:00:00:00:02"}
        self.emu.add(self.link_id, {"netns": self.ns["a"], "name": dev["a"], "mac": mac["a"]},
                     {"netns": self.ns["b"], "name": dev["b"], "mac": mac["b"]},
                     params=self.params(), seed=self.seed, tap_queue=self.tap_queue)
        self.tap_queue = self.stats()["a"]["tap_queue"]
        self.dev = dev
        for h, other in (("a", "b"), ("b", "a")):
            ip("-n", self.ns[h], "addr", "add", f"{self.addr[h]}/24", "dev", dev[h])
            ip("-n", self.ns[h], "link", "set", dev[h], "up")
            # no ARP across a 200 ms link before every first packet, and no IPv6 chatter
            ip("-n", self.ns[h], "neigh", "replace", self.addr[other], "lladdr", mac[other],
               "dev", dev[h], "nud", "permanent")

    def stats(self) -> dict:
        """The emulator's counters of this link (both directions)."""
        return self.emu.stats(self.link_id)

    def dropped(self, host: str) -> int:
        """Frames the emulator's random loss dropped on their way into `host`."""
        if self.emu is None:
            return 0
        d = self.stats()["ab" if host == "b" else "ba"]
        return int(d.get("dropped_loss", 0))

    def dropped_queue(self) -> int:
        s = self.stats()
        return int(s["ab"].get("dropped_queue", 0)) + int(s["ba"].get("dropped_queue", 0))

    def close(self) -> None:
        if self.emu is not None:
            emu, self.emu = self.emu, None
            emu.stop()
        self.scratch.close()
