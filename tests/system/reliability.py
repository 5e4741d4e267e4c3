"""Helpers for the reliability tests (docs/reliability.md): concast traffic that keeps
flowing while something goes wrong, a receiver that tallies it as it arrives, merge rates
read from routers, and the tables the tests write for the document."""
from __future__ import annotations

import collections
import json
import os
import threading
import time
from pathlib import Path

from hostdtools import Senders, router_flow

from concast import ROOT
from concast.hosts import Client, aggregate

# Where the tests write what they measured (the tables of docs/reliability.md; results/ is
# not committed).
RESULTS = Path(os.environ.get("CONCAST_RELIABILITY_RESULTS", ROOT / "results" / "reliability"))


class Feeder:
    """`hosts` join `group` and send one round every `period` seconds from a thread: every
    key in `keys` once per sender, value = the sender's index + 1. So each key of each
    round is worth count len(hosts) and sum len(hosts)*(len(hosts)+1)/2."""

    def __init__(self, net, hosts: list[str], group: int, dport: int,
                 keys: list[int], period: float = 0.05) -> None:
        self.senders = Senders(net, hosts, group, dport=dport)
        self.hosts, self.keys, self.period = hosts, keys, period
        self.rounds = 0
        self._stop = threading.Event()
        # `concast send` prints a line per datagram: read them, or its pipe fills and it stops.
        self._drains = [threading.Thread(target=self._drain, args=(h, p), daemon=True)
                        for h, p in self.senders.procs.items()]
        for t in self._drains:
            t.start()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _drain(self, host: str, proc) -> None:
        for line in proc.stdout:
            self.senders.output[host].append(line.rstrip())

    def _run(self) -> None:
        lines = {h: " ".join(f"{k}={i + 1}" for k in self.keys) for i, h in enumerate(self.hosts)}
        while not self._stop.is_set():
            try:
                self.senders.send(lines)
            except (BrokenPipeError, ValueError, OSError):
                return          # a sender process went away (the test kills things)
            self.rounds += 1
            self._stop.wait(self.period)

    def stop(self) -> int:
        """Stops sending; returns the number of rounds sent."""
        self._stop.set()
        self._thread.join(timeout=5)
        return self.rounds

    def want(self) -> tuple[dict[int, int], dict[int, int]]:
        """(sum per key, count per key) the receiver must end up with."""
        n = len(self.hosts)
        return ({k: self.rounds * n * (n + 1) // 2 for k in self.keys},
                {k: self.rounds * n for k in self.keys})

    def finish(self) -> dict[str, list[str]]:
        """Stops sending, lets every sender leave and exit; returns their output."""
        self.stop()
        for p in self.senders.procs.values():
            p.stdin.close()
        for t in self._drains:
            t.join(timeout=30)
        for h, p in self.senders.procs.items():
            assert p.wait(timeout=30) == 0, f"concast send in {h} failed: {self.senders.output[h]}"
        return self.senders.output

    def kill(self) -> None:
        self.stop()
        self.senders.kill()


class Tally:
    """A client of rx's hostd subscribed to `group` that adds up, in a thread, every
    datagram event (aggregate payloads) and keeps every other event of the group."""

    def __init__(self, net, group: int, spec: Path | None = None,
                 port: int | None = None) -> None:
        self.client = Client(net.hostd_socket("rx"))
        self.group = group
        if spec is not None:
            self.client.install_spec(group, spec)
        self.client.subscribe(group, port=port)     # port: plain UDP (fallback) counts too
        self.sums: dict[int, int] = collections.Counter()
        self.counts: dict[int, int] = collections.Counter()
        self.kinds: dict[str, int] = collections.Counter()
        self.arrived: dict[int, float] = {}      # key -> when its last datagram arrived
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ev = self.client.next_event(0.2)
            except (OSError, ValueError):
                return          # hostd went away (a test killed it)
            if ev is None or ev.get("group") != self.group:
                continue
            with self._lock:
                if ev.get("event") == "datagram":
                    c = aggregate.decode(bytes.fromhex(ev["payload"]))
                    if c is not None:
                        self.sums[c.key] += c.value
                        self.counts[c.key] += c.count
                        self.arrived[c.key] = time.monotonic()
                    self.kinds[ev.get("kind", "?")] += 1
                else:
                    self.events.append(ev)

    def named(self, name: str) -> list[dict]:
        with self._lock:
            return [e for e in self.events if e.get("event") == name]

    def wait_total(self, counts: dict[int, int], timeout: float = 15.0, settle: float = 0.5):
        """Waits until the counts reach `counts` (then `settle` s more, so a duplicate would
        show); returns (sums, counts) as they stand."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(self.counts.get(k, 0) >= n for k, n in counts.items()):
                    break
            time.sleep(0.05)
        time.sleep(settle)
        with self._lock:
            return dict(self.sums), dict(self.counts)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.client.close()
        except OSError:
            pass


def merged_count(net, router: str, group: int) -> int:
    """Datagrams the router's engine folded into merge states for the group so far (0
    while the flow has no engine flow there)."""
    f = router_flow(net, router, group)
    engine = (f or {}).get("engine") or {}
    return int(engine.get("counters", {}).get("merged", 0))


class RateProbe:
    """Samples a counter and gives its rate per second over [t0, t1] windows."""

    def __init__(self, read) -> None:
        self.read = read
        self.samples: list[tuple[float, int]] = []

    def sample(self) -> None:
        self.samples.append((time.monotonic(), self.read()))

    def rate(self, t0: float, t1: float) -> float:
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if len(inside) < 2 or inside[-1][0] == inside[0][0]:
            return 0.0
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    def run_for(self, seconds: float, every: float = 0.1, until=None) -> float:
        """Samples for `seconds` (or until `until()` is true, at most `seconds`); returns
        the time it stopped."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.sample()
            if until is not None and until():
                break
            time.sleep(every)
        self.sample()
        return time.monotonic()


def write_table(name: str, header: list[str], rows: list[list], note: str = "") -> Path:
    """Writes `rows` as results/reliability/<name>.md (a markdown table) and .json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    text = "\n".join(lines) + "\n" + (f"\n{note}\n" if note else "")
    (RESULTS / f"{name}.md").write_text(text)
    (RESULTS / f"{name}.json").write_text(json.dumps({"header": header, "rows": rows,
                                                      "note": note}, indent=1))
    print(f"\n{name}:\n{text}")
    return RESULTS / f"{name}.md"


class RoundFeeder:
    """Like Feeder, but round r uses its own key (`base + r`), so the receiver can tell
    rounds apart: which arrived whole, which came short (and by how much), and that none
    came twice. A sender whose `concast send` dies is dropped from later rounds."""

    def __init__(self, net, hosts: list[str], group: int, dport: int, base: int,
                 period: float = 0.05) -> None:
        self.senders = Senders(net, hosts, group, dport=dport)
        self.hosts, self.base, self.period = hosts, base, period
        self.sent: list[tuple[float, tuple[str, ...]]] = []    # (time, hosts that sent)
        self._dropped: set[str] = set()
        self._stop = threading.Event()
        self._drains = [threading.Thread(target=self._drain, args=(h, p), daemon=True)
                        for h, p in self.senders.procs.items()]
        for t in self._drains:
            t.start()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _drain(self, host: str, proc) -> None:
        for line in proc.stdout:
            self.senders.output[host].append(line.rstrip())

    def drop(self, host: str) -> None:
        """Later rounds leave `host` out (its hostd is gone)."""
        self._dropped.add(host)

    def _run(self) -> None:
        alive = list(self.hosts)
        while not self._stop.is_set() and alive:
            key = self.base + len(self.sent)
            sent = []
            for i, h in enumerate(self.hosts):
                p = self.senders.procs[h]
                if h not in alive or h in self._dropped or p.poll() is not None:
                    continue
                try:
                    p.stdin.write(f"{key}={i + 1}\n")
                    p.stdin.flush()
                    sent.append(h)
                except (BrokenPipeError, ValueError, OSError):
                    alive.remove(h)
            self.sent.append((time.monotonic(), tuple(sent)))
            self._stop.wait(self.period)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def finish(self) -> None:
        """Stops sending; every live sender leaves and exits."""
        self.stop()
        for p in self.senders.procs.values():
            try:
                p.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        for t in self._drains:
            t.join(timeout=30)
        for p in self.senders.procs.values():
            try:
                p.wait(timeout=30)
            except Exception:
                p.kill()

    def kill(self) -> None:
        self.stop()
        self.senders.kill()

    def rounds(self) -> list[tuple[float, int, int, int]]:
        """(sent at, key, contributions, their sum) of every round sent."""
        index = {h: i + 1 for i, h in enumerate(self.hosts)}
        return [(t, self.base + r, len(hs), sum(index[h] for h in hs))
                for r, (t, hs) in enumerate(self.sent)]


def judge_rounds(rounds, sums: dict[int, int], counts: dict[int, int],
                 window: tuple[float, float]) -> dict:
    """Sorts rounds by when they were sent — before, inside or after the fault `window` —
    and by what arrived: whole (count and sum exact), short (some contributions missing,
    and the count says how many), or never. Anything above what was sent is a duplicate,
    which the service never allows."""
    out = {f"{p}_{w}": 0 for p in ("before", "during", "after") for w in ("whole", "short", "lost")}
    out.update(duplicated=0, lost_contributions=0, sent_contributions=0, sent_rounds_outside=0)
    for t, key, n, total in rounds:
        phase = "before" if t < window[0] else "during" if t <= window[1] else "after"
        out["sent_rounds_outside"] += phase != "during"
        got_n, got_sum = counts.get(key, 0), sums.get(key, 0)
        out["sent_contributions"] += n
        if got_n > n:
            out["duplicated"] += 1
        elif got_n == n and got_sum == total:
            out[f"{phase}_whole"] += 1
        elif got_n == 0:
            out[f"{phase}_lost"] += 1
            out["lost_contributions"] += n
        else:
            out[f"{phase}_short"] += 1
            out["lost_contributions"] += n - got_n
    return out


def routerd_answers(net, router: str) -> bool:
    """A routerd answers on the router's socket (a killed one may have left the file)."""
    from concast.controller import routerdmgmt as routerd
    try:
        routerd.query(net.routerd_socket(router), "status", timeout=1.0)
        return True
    except (OSError, ValueError):
        return False
