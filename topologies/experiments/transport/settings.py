"""Settings of `concast exp transport` and the dissertation's figures it is compared with."""
from __future__ import annotations

from dataclasses import dataclass, field

from concast.progress import sayer

MTP_PORT, TCP_PORT, BULK_PORT = 7710, 7711, 7712
#: kernel TCP is named with its sender's congestion control: the namespace default on this
#: machine is BBR, which reads random loss as no signal; the dissertation's TCP (and the
#: ratio the goal is stated in) is a loss-based one, so `tcp-cubic` is the reference
TCP_CCS = ("cubic", "bbr", "reno")
PROTOCOLS = ("mtp", "tcp-cubic", "tcp-bbr", "bulk")
KNOWN_PROTOCOLS = ("mtp", "bulk") + tuple(f"tcp-{cc}" for cc in TCP_CCS)
REFERENCE_TCP = "tcp-cubic"

#: What the issue quotes from Noble's dissertation (about 3 % loss); the link settings of
#: that measurement could not be looked up from this machine.
DISSERTATION = {"loss_pct": 3.0, "mtp_kbytes_per_s": 242.6, "tcp_kbytes_per_s": 17.96}
#: The design's goal (the design brief): MTP at least 5x kernel TCP at 3 % loss.
GOAL_RATIO = 5.0


say = sayer("transport")


@dataclass
class Settings:
    #: bottleneck rates, Mbit/s each way (HTB)
    rates: list[float] = field(default_factory=lambda: [10.0])
    #: random loss, percent, at both hosts' input (nftables numgen)
    losses: list[float] = field(default_factory=lambda: [0.0, 1.0, 3.0, 5.0, 10.0])
    protocols: tuple[str, ...] = PROTOCOLS
    #: object sizes, bytes (each a sweep of its own: small objects are bound by round trips,
    #: large ones by each protocol's steady-state loss response), and how many objects each
    #: protocol fetches per cell
    sizes: list[int] = field(default_factory=lambda: [256_000, 4_000_000])
    count: int = 8
    #: a cell stops after this many seconds (what was fetched by then counts)
    limit_s: float = 60.0
    #: the bottleneck's queue, in milliseconds of its rate (ours: 20 ms)
    queue_ms: float = 20.0
    #: one-way propagation delay, ms (ours: 50, a 100 ms round trip across the Internet;
    #: the dissertation's path is not known here). 0: a plain veth, no emulator.
    delay_ms: float = 50.0
    #: third-party test: seconds MTP and TCP share the link (0: skip it)
    third_party_s: float = 20.0
    third_party_loss: float = 0.0
    #: the competing TCP's congestion control in the third-party test
    third_party_cc: str = "cubic"
    #: MTP's window algorithm (`mtping get --cc`): "mtp", "mtp-halve", or a crate algorithm
    mtp_cc: str = "mtp"
    seed: int = 1
