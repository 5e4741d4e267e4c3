"""Names and numbers of p4src/concast.p4 (and its p4src/include/ files), and the table entries of one router.

Nothing here talks to a switch: entries are plain `Entry` values that `P4Router` writes
over P4Runtime, so they can be unit-tested without BMv2.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network

from concast import ROOT, tools

P4_SOURCE = ROOT / "p4src" / "concast.p4"
P4_INCLUDES = sorted((ROOT / "p4src" / "include").glob("*.p4"))
BUILD_DIR = tools.BUILD / "p4"
JSON_PATH = BUILD_DIR / "concast.json"
P4INFO_PATH = BUILD_DIR / "concast.p4info.txt"

CPU_PORT = 255          # CPU_PORT_NUM in headers.p4 (v1model ports are 9 bits, 511 = drop)
PROTO_CSP = 253

# Fully qualified names, as p4c writes them into the P4Info: a table or action is named
# after the control instance that holds it (ingress.p4), the counters after ConcastIngress.
T_ARP_ANSWER = "ConcastIngress.arp.arp_answer"
A_ARP_REPLY = "ConcastIngress.arp.arp_reply"
T_DIVERT_STATIC = "ConcastIngress.divert.divert_static"
T_CONCAST_FLOWS = "ConcastIngress.divert.concast_flows"
A_DIVERT = "ConcastIngress.divert.divert_to_cpu"
T_IPV4_LPM = "ConcastIngress.forward.ipv4_lpm"
A_SET_NHOP = "ConcastIngress.forward.set_nhop"
A_LOCAL_DROP = "ConcastIngress.forward.local_drop"

C_MALFORMED = "ConcastIngress.malformed"
C_DIVERTED = "ConcastIngress.diverted"
C_REINJECTED = "ConcastIngress.reinjected"
C_FORWARDED = "ConcastIngress.forwarded"
C_DROPPED = "ConcastIngress.dropped"
C_ARP = "ConcastIngress.arp_answered"
C_RECEIVED = "ConcastIngress.received"     # index: the ingress port; N_PORTS in headers.p4
N_PORTS = 256

# Index -> name of the indexed counters (ERR_*, DIV_*, DROP_* in headers.p4).
MALFORMED_KINDS = (
    None, "truncated", "bad_version", "bad_ihl", "header_overflow", "bad_total_length",
    "option_truncated", "option_bad_length", "option_overflow",
    "concast_option_bad_length", "concast_option_duplicate",
)
MALFORMED_INDEX = {name: i for i, name in enumerate(MALFORMED_KINDS) if name}
DIVERT_OWN_ADDRESS, DIVERT_CSP, DIVERT_CONCAST = 0, 1, 2
DIVERT_REASONS = ("own_address", "csp", "concast")
DROP_REASONS = ("not_ipv4", "ttl", "no_route", "local", "bad_checksum")

# Priorities of divert_static (ternary): own addresses above CSP, as in the OVS table 0.
PRIO_OWN_ADDRESS = 500
PRIO_CSP = 400


@dataclass(frozen=True)
class Match:
    """One match field: kind is exact, lpm or ternary; value an int; arg the prefix
    length (lpm) or mask (ternary)."""
    name: str
    kind: str
    value: int
    arg: int | None = None


@dataclass(frozen=True)
class Entry:
    table: str
    matches: tuple[Match, ...]
    action: str
    params: tuple[tuple[str, int], ...] = ()
    priority: int = 0                    # ternary tables only
    default: bool = field(default=False)  # set the table's default action instead


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def ip_int(addr) -> int:
    return int(IPv4Address(addr))


def lpm_entry(prefix: IPv4Network, port: int | None, next_hop_mac: str | None,
              router_mac: str) -> Entry:
    """An ipv4_lpm entry: a route out of `port`, or (port None) an own address."""
    m = (Match("dst", "lpm", int(prefix.network_address), prefix.prefixlen),)
    if port is None:
        return Entry(T_IPV4_LPM, m, A_LOCAL_DROP)
    return Entry(T_IPV4_LPM, m, A_SET_NHOP,
                 (("dmac", mac_int(next_hop_mac)), ("smac", mac_int(router_mac)),
                  ("port", port)))


def csp_divert_entry() -> Entry:
    return Entry(T_DIVERT_STATIC,
                 (Match("protocol", "ternary", PROTO_CSP, 0xFF),),
                 A_DIVERT, (("reason", DIVERT_CSP),), priority=PRIO_CSP)


def own_address_divert_entry(addr) -> Entry:
    return Entry(T_DIVERT_STATIC,
                 (Match("dst", "ternary", ip_int(addr), 0xFFFFFFFF),),
                 A_DIVERT, (("reason", DIVERT_OWN_ADDRESS),), priority=PRIO_OWN_ADDRESS)


def concast_flow_entry(receiver, group: int) -> Entry:
    """The concast_flows entry that diverts the flow (R, G) to routerd."""
    if not 0 <= group < 1 << 32:
        raise ValueError(f"group {group} is not a 32-bit number")
    return Entry(T_CONCAST_FLOWS,
                 (Match("R", "exact", ip_int(receiver)),
                  Match("G", "exact", group)),
                 A_DIVERT, (("reason", DIVERT_CONCAST),))


def arp_entry(port: int, addr, mac: str) -> Entry:
    return Entry(T_ARP_ANSWER,
                 (Match("ingress_port", "exact", port), Match("tpa", "exact", ip_int(addr))),
                 A_ARP_REPLY, (("mac", mac_int(mac)),))


def base_entries(router, routes) -> list[Entry]:
    """Every router: ARP answers for its port addresses, one ipv4_lpm entry per route.
    `router` is a concast.netmodel.addressing.RouterPlan, `routes` concast.controller.routes."""
    out = [arp_entry(p.ofport, p.address, router.mac) for p in router.ports]
    out += [lpm_entry(r.prefix, r.ofport, r.next_hop_mac, router.mac) for r in routes]
    return out


def diversion_entries(router) -> list[Entry]:
    """Concast-capable routers: CSP and own addresses to the CPU port."""
    if not router.capable:
        return []
    return [csp_divert_entry()] + [own_address_divert_entry(a) for a in router.own_addresses()]
