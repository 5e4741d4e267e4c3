"""Flow selectors (docs/protocol.md 2.2) as OpenFlow 1.3 rules, and the cookie scheme.

A selector (R, P, D) diverts every IPv4 datagram to R with protocol P (0 = any) and,
for TCP and UDP, destination port D (0 = any) to the CPU port. Its cookie is the
selector itself, so installing is idempotent and removing needs no bookkeeping:

    cookie = 0xce | R (32 bits) | P (8 bits) | D (16 bits)

Two concast flows (R, G1), (R, G2) may ask for the same selector; OpenFlow keeps one
entry per (match, priority), so routerd counts users per selector and removes it when
the last flow using it is gone.

The rule's owner is routerd (controller/routerd/src/dataplane.rs), which installs selectors at
run time; this module writes the same strings, held to them by tests/unit/test_ovs_selectors.py
against `concast-routerd --print-selector` (docs/dataplane-ovs.md, "Flow selectors").
"""
from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address

from concast.netmodel.naming import CPU_OFPORT

OFCTL = ("ovs-ofctl", "-O", "OpenFlow13")

# Cookie classes: the top byte says which part of the pipeline installed a rule.
CLASS_MASK = 0xFF00_0000_0000_0000
BASE_COOKIE = 0xCC00_0000_0000_0000        # bypass, default, ARP, table-1 routes
DIVERSION_COOKIE = 0xCD00_0000_0000_0000   # CSP (proto 253) and own addresses -> CPU
SELECTOR_CLASS = 0xCE00_0000_0000_0000     # run-time selectors, cookie below

# Table-0 priorities.
PRIO_CPU_BYPASS = 1000
PRIO_ARP = 900
PRIO_OWN_ADDRESS = 500
PRIO_CSP = 400
PRIO_SELECTOR = 300
PRIO_DEFAULT = 0

CSP_PROTO = 253
PORTED = (6, 17)                           # protocols whose selector may name a port


@dataclass(frozen=True)
class Selector:
    receiver: IPv4Address
    proto: int = 0
    dport: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "receiver", IPv4Address(self.receiver))
        if not 0 <= self.proto <= 255 or not 0 <= self.dport <= 65535:
            raise ValueError(f"bad selector {self}")
        if self.proto not in PORTED and self.dport:
            raise ValueError("a destination port only selects TCP (6) or UDP (17)")

    @property
    def cookie(self) -> int:
        return SELECTOR_CLASS | int(self.receiver) << 24 | self.proto << 16 | self.dport

    @classmethod
    def from_cookie(cls, cookie: int) -> "Selector":
        if cookie & CLASS_MASK != SELECTOR_CLASS:
            raise ValueError(f"cookie {cookie:#x} is not a selector's")
        return cls(IPv4Address(cookie >> 24 & 0xFFFF_FFFF), cookie >> 16 & 0xFF, cookie & 0xFFFF)

    def match(self) -> str:
        m = f"ip,nw_dst={self.receiver}"
        if self.proto:
            m += f",nw_proto={self.proto}"
        if self.dport:
            m += f",tp_dst={self.dport}"
        return m

    def flow(self, cpu_ofport: int = CPU_OFPORT) -> str:
        """The add-flow(s) line."""
        return (f"cookie={self.cookie:#018x},table=0,priority={PRIO_SELECTOR},"
                f"{self.match()},actions=output:{cpu_ofport}")

    def install_argv(self, bridge: str, cpu_ofport: int = CPU_OFPORT) -> list[str]:
        return [*OFCTL, "add-flow", bridge, self.flow(cpu_ofport)]

    def remove_argv(self, bridge: str) -> list[str]:
        return [*OFCTL, "del-flows", bridge, f"cookie={self.cookie:#018x}/-1,table=0"]


def remove_all_argv(bridge: str) -> list[str]:
    """Removes every selector of a router (routerd's start-up and shutdown)."""
    return [*OFCTL, "del-flows", bridge, f"cookie={SELECTOR_CLASS:#018x}/{CLASS_MASK:#018x}"]
