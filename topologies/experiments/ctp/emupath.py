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

from concast.netns import ip, link_counters
from concast.perfpath import Path, PathError

# The emulator's drop-tail queue when none is asked for: large enough that it is not the
# bottleneck's limit at the papers' bandwidth-delay products (100 Mbit/s x 413 ms is about
# 3,500 frames of 1,500 bytes; 1 Gbit/s x 110 ms about 9,200).
DEFAULT_QUEUE = 10000

# The TAPs' own queue (txqueuelen) ahead of the emulator holds what a host sends while the
# emulator is off the CPU; past it the kernel drops, outside the link's model. The kernel's
# 1,000 frames last 12 ms at 1 Gbit/s, and on a loaded 2-core machine ccc2 lost thousands of
# frames a run there (kernel reno's data and ACKs too; issue #23, docs/experiments.md
# "Session 16"). So a path's TAPs hold STALL_ABSORBED_S of frames at its rate, at least 1,000.
STALL_ABSORBED_S = 0.25
KERNEL_TAP_QUEUE = 1000


def tap_queue_for(rate_mbit: float) -> int:
    """The TAP queue (frames of 1,514 bytes) that absorbs an emulator stall of
    STALL_ABSORBED_S at `rate_mbit`; the kernel's 1,000 for unlimited or slow links."""
    frames = int(rate_mbit * 1e6 / 8 * STALL_ABSORBED_S / 1514) if rate_mbit else 0
    return max(frames, KERNEL_TAP_QUEUE)


class EmuPath(Path):
    """`with EmuPath(delay_ms=206.5, rate_mbit=100, loss=0.05, seed=1) as p:` — hosts "a" and
    "b", `delay_ms` each way (RTT = 2 x delay_ms), loss in [0, 1) per direction."""

    def __init__(self, delay_ms: float, rate_mbit: float = 0.0, loss: float = 0.0,
                 queue_pkts: int | None = None, seed: int = 1, tag: str | None = None,
                 tap_queue: int | None = None):
        """`tap_queue`: the TAPs' txqueuelen in frames (default `tap_queue_for(rate_mbit)`)."""
        super().__init__(loss=loss, tag=tag, rate_mbit=rate_mbit)
        if tap_queue is not None and tap_queue < 1:
            raise ValueError(f"tap_queue must be >= 1 frame, got {tap_queue}")
        self.tap_queue = tap_queue or tap_queue_for(rate_mbit)
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
                     params=self.params(), seed=self.seed)
        self.dev = dev
        for h, other in (("a", "b"), ("b", "a")):
            ip("-n", self.ns[h], "addr", "add", f"{self.addr[h]}/24", "dev", dev[h])
            ip("-n", self.ns[h], "link", "set", dev[h], "txqueuelen", str(self.tap_queue))
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

    def tap_counters(self, host: str) -> dict[str, int]:
        """The kernel's counters of `host`'s TAP; its tx_dropped are frames `host` sent that
        the emulator never read (its TAP queue was full): loss outside the link's model."""
        return link_counters(self.ns[host], self.dev[host])

    def dropped_queue(self) -> int:
        s = self.stats()
        return int(s["ab"].get("dropped_queue", 0)) + int(s["ba"].get("dropped_queue", 0))

    def close(self) -> None:
        if self.emu is not None:
            emu, self.emu = self.emu, None
            emu.stop()
        self.scratch.close()
