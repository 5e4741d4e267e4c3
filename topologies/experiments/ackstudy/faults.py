"""A crash inside the ACK study's runs (`--kill-routerd N@T`, #28 item 4): T seconds after a
run's page fetches start, routerd on N routers that carry the multiplex flow (chosen by a
seeded generator) gets SIGKILL. The control plane's part is played as in
docs/reliability.md's fault tests: the dead router's diversion rules are removed at once
(it then forwards like an oblivious router), and after the run routerd is started again on
it with its diversion back, so every run starts whole.

What the kill costs is booked under a cause of its own, `acks_lost_routerd_kill`: the ACK
records neither R nor a link accounts for in a run with a kill. They are not counted one by
one (the dead router's CPU port is not captured), so the attribution is checked against an
upper bound measured at the victims: frames diverted to their CPU ports between the last
look before the kill and the bypass, plus the bundles their engines held open then, each
at most as large as the largest bundle R received in the run. A residual outside [0, bound]
stays `acks_unaccounted`, and the run fails its check as before.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from concast.netmodel.naming import CPU_OFPORT

FIELDS = ["routerd_killed", "kill_routers", "kill_at_s", "kill_bypass_ms",
          "kill_frames_to_dead_port", "kill_open_bundles", "kill_bound_records",
          "acks_lost_routerd_kill"]


@dataclass(frozen=True)
class KillPlan:
    routers: int
    at_s: float


def parse_plan(text: str) -> KillPlan:
    """`N@T`: N routers, T seconds into each run's fetches (argparse type)."""
    try:
        n, t = text.split("@")
        plan = KillPlan(int(n), float(t))
    except ValueError:
        raise argparse.ArgumentTypeError(f"want N@T (routers@seconds), e.g. 2@0.5; got {text!r}")
    if plan.routers < 1 or plan.at_s < 0:
        raise argparse.ArgumentTypeError(f"N must be 1 or more and T 0 or more; got {text!r}")
    return plan


@dataclass
class Killer:
    """One run's kill: armed before the fetches, fired from a timer thread."""
    net: object
    plan: KillPlan
    candidates: list[str]
    rng: random.Random
    victims: list[str] = field(default_factory=list)
    fired_at: float | None = None
    bypass_s: float = 0.0
    frames_to_dead_port: int = 0
    open_bundles: int = 0
    _timer: threading.Timer | None = None
    _t0: float = 0.0

    def arm(self) -> "Killer":
        self._t0 = time.monotonic()
        self._timer = threading.Timer(self.plan.at_s, self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def _fire(self) -> None:
        pool = sorted(self.candidates)
        self.victims = self.rng.sample(pool, min(self.plan.routers, len(pool)))
        t = time.monotonic()
        # Each victim's look, crash and bypass on its own thread, as each router's own
        # control plane would act; done one after another, 20 bypasses took 2.1-3.7 s
        # (docs/reliability.md).
        with ThreadPoolExecutor(max_workers=len(self.victims) or 1) as crews:
            done = list(crews.map(self._kill_and_bypass, self.victims))
        self.fired_at = t - self._t0
        self.bypass_s = max((outage for outage, _, _ in done), default=0.0)
        self.open_bundles = sum(open_states for _, _, open_states in done)
        self.frames_to_dead_port = sum(_cpu_tx(self.net, r) - tx_before
                                       for r, (_, tx_before, _) in zip(self.victims, done))

    def _kill_and_bypass(self, r: str) -> tuple[float, int, int]:
        """A last look at r (frames out of its CPU port, bundles its engine holds open),
        SIGKILL to its routerd (a crash: no clean-up of its rules), then r's diversion
        removed; returns the seconds r diverted to a dead port and the two looks."""
        from concast.controller import routerdmgmt as routerd
        tx_before, open_states = _cpu_tx(self.net, r), 0
        try:
            for f in routerd.query(self.net.routerd_socket(r), "flows")["flows"]:
                open_states += (f.get("engine") or {}).get("open_states", 0)
        except (OSError, ValueError, KeyError):
            pass
        t = time.monotonic()
        for d in self.net.daemons.of(r):
            if d.name == "routerd" and d.alive():
                os.kill(d.pid, signal.SIGKILL)
                d.popen.wait(timeout=5)
        self.net[r].disable_diversion()
        return time.monotonic() - t, tx_before, open_states

    def repair(self) -> None:
        """After the run: the timer cancelled if it never fired; routerd started again on
        every victim (soft state is rebuilt by the next JOIN/REFRESH) and diversion back."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join(timeout=30)
        for d in [d for r in self.victims for d in self.net.daemons.of(r) if d.name == "routerd"]:
            self.net.daemons.stop(d)                     # the dead one's record
        if self.victims:
            self.net.start_concast(hold=30, routers=self.victims, hosts=(), timeout=120)
            for r in self.victims:
                self.net[r].enable_diversion()


def _cpu_tx(net, r: str) -> int:
    """Frames the data plane has put out of the router's CPU port so far."""
    try:
        return int(net[r].ports()[str(CPU_OFPORT)]["tx_pkts"])
    except (KeyError, RuntimeError, OSError, ValueError):
        return 0


def arm(bed, engines_before: dict) -> Killer | None:
    """Arms this run's kill (None without --kill-routerd): candidates are the routers whose
    engine holds the multiplex flow; the generator is seeded by the topology seed and the
    run's number, so a rerun of the study kills the same routers at the same points."""
    plan = bed.s.kill_routerd
    if plan is None:
        return None
    bed.kill_runs = getattr(bed, "kill_runs", 0) + 1
    candidates = [r for r, c in engines_before.items() if "open_states" in c]
    rng = random.Random(f"{bed.s.topo_seed}:{bed.kill_runs}")
    return Killer(bed.net, plan, candidates, rng).arm()


def settle(killer: Killer | None, row: dict, mode: str, r_before: dict, r_after: dict) -> dict:
    """Repairs the victims and books the kill's losses (see the module's docstring);
    `r_before`/`r_after`: R's `mplex status` before and after the run."""
    if killer is None:
        return {}
    from concast.topologies.experiments.ackstudy import mplexctl
    killer.repair()
    largest = max_bundle(mplexctl.receiver_counters(r_before).get("bundle_sizes", {}),
                         mplexctl.receiver_counters(r_after).get("bundle_sizes", {}))
    bound = (killer.frames_to_dead_port + killer.open_bundles) * max(1, largest)
    out = {"routerd_killed": len(killer.victims), "kill_routers": " ".join(killer.victims),
           "kill_at_s": None if killer.fired_at is None else round(killer.fired_at, 3),
           "kill_bypass_ms": round(killer.bypass_s * 1000, 1),
           "kill_frames_to_dead_port": killer.frames_to_dead_port,
           "kill_open_bundles": killer.open_bundles, "kill_bound_records": bound,
           "acks_lost_routerd_kill": 0}
    residual = row.get("acks_unaccounted", 0)
    if killer.victims and mode == "on" and 0 <= residual <= bound:
        out["acks_lost_routerd_kill"] = residual
        out["acks_unaccounted"] = 0
    return out


def max_bundle(sizes_before: dict, sizes_after: dict) -> int:
    """The largest bundle (records per MplexPkt) R received between two snapshots."""
    grown = [int(k) for k, n in sizes_after.items() if n - sizes_before.get(k, 0) > 0]
    return max(grown, default=0)


def summary(rows: list[dict]) -> str | None:
    """One line for the study's summary: the kills and what they cost (None without)."""
    killed = [r for r in rows if r.get("routerd_killed")]
    if not killed:
        return None
    lost = sum(r.get("acks_lost_routerd_kill", 0) for r in killed)
    bypass = max(r.get("kill_bypass_ms", 0) for r in killed)
    return (f"routerd killed in {len(killed)} runs ({sum(r['routerd_killed'] for r in killed)} "
            f"kills, bypassed within {bypass:.0f} ms): {lost} ACKs lost to the kills "
            f"(acks_lost_routerd_kill: booked only within the bound its dead routers allow; "
            f"anything beyond stays unaccounted and fails the run)")
