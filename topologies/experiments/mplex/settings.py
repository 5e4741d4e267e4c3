"""Settings of `concast exp mplex`, what one phase measured, and how phases add up."""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path

from concast.progress import sayer
from concast.topologies.experiments import pcapread

FETCH = Path(__file__).parent.parent / "fetch.py"
NFLOG_GROUP = 17
HTTP_PORT = 8000
HOLD_S = "5"
LINKS = ("access", "r1-r2", "r2-sv")
LINK_TITLES = {"access": "c→r1 (all access links)", "r1-r2": "r1→r2", "r2-sv": "r2→sv"}


say = sayer("mplex")


@dataclass
class Settings:
    clients: int = 8
    size: int = 2_000_000
    max_local_delay_ms: float = 2.0
    max_total_delay_ms: float = 10.0
    size_threshold: int = 128
    group: int = 1
    dataplane: str = "ovs"


@dataclass
class Download:
    bytes: int
    sha256: str
    seconds: float


@dataclass
class Phase:
    """What the downloads of one mode measured: one run, or several added up (`combine`)."""
    mode: str
    runs: list[dict[str, Download]]
    intact: int
    pcaps: dict[str, list[Path]]
    links: dict[str, pcapread.LinkCount]
    acks_sent: int
    acks_arrived: int
    accounting: dict
    routers: dict[str, dict]
    #: hostd's multiplex counters at the end of the (last) run, per host
    hostd: dict[str, dict] = field(default_factory=dict)
    expired_ttl: int = 0
    #: packets tcpdump itself lost, per capture file (its "dropped by kernel" count)
    capture_drops: dict[str, int] = field(default_factory=dict)

    @property
    def downloads(self) -> dict[str, Download]:
        """The last run's downloads."""
        return self.runs[-1]

    @property
    def n_downloads(self) -> int:
        return sum(len(r) for r in self.runs)

    @property
    def makespan(self) -> float:
        """The slowest download of a run, averaged over runs."""
        return sum(max(d.seconds for d in r.values()) for r in self.runs) / len(self.runs)

    @property
    def mean_time(self) -> float:
        return sum(d.seconds for r in self.runs for d in r.values()) / self.n_downloads

    def client_time(self, host: str) -> float:
        return sum(r[host].seconds for r in self.runs) / len(self.runs)

    def throughput_mbps(self) -> float:
        """All bytes of all clients over the time until the slowest finished, per run."""
        total = sum(d.bytes for r in self.runs for d in r.values())
        return total * 8 / (self.makespan * len(self.runs)) / 1e6

    def combined_pct(self) -> float:
        """Share of the ACKs sent that reached sv sharing a packet with another ACK."""
        sizes = self.links["r2-sv"].sizes or {}
        bundled = sum(k * v for k, v in sizes.items() if k >= 2)
        return 100.0 * bundled / self.acks_sent if self.acks_sent else 0.0

    def expired(self) -> int:
        return self.expired_ttl


def combine(phases: list[Phase]) -> Phase:
    """Several runs of one mode as one: counts added, runs kept for the times."""
    if len(phases) == 1:
        return phases[0]
    links = {}
    for k in phases[0].links:
        c = pcapread.LinkCount(sizes={})
        for p in phases:
            x = p.links[k]
            for f in ("packets", "plain_acks", "mplex", "records", "other"):
                setattr(c, f, getattr(c, f) + getattr(x, f))
            for size, n in (x.sizes or {}).items():
                c.sizes[size] = c.sizes.get(size, 0) + n
        links[k] = c

    def add(dicts: list[dict]) -> dict:
        out: dict = {}
        for d in dicts:
            for key, v in d.items():
                if isinstance(v, dict):
                    out[key] = add([out.get(key, {}), v])
                elif isinstance(v, (int, float)):
                    out[key] = out.get(key, 0) + v
        return out

    pcaps: dict[str, list[Path]] = collections.defaultdict(list)
    for p in phases:
        for k, v in p.pcaps.items():
            pcaps[k] += v
    return Phase(phases[0].mode, [r for p in phases for r in p.runs], sum(p.intact for p in phases),
                 dict(pcaps), links, sum(p.acks_sent for p in phases),
                 sum(p.acks_arrived for p in phases), add([p.accounting for p in phases]),
                 add([p.routers for p in phases]), phases[-1].hostd,
                 sum(p.expired_ttl for p in phases),
                 add([p.capture_drops for p in phases]))
