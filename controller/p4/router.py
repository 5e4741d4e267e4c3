"""`P4Router`: one BMv2 router as the control plane and routerd see it.

    r = P4Router(client)                 # a P4RuntimeClient with the pipeline pushed
    r.install(router_plan, routes)       # ARP answers, ipv4_lpm, static diversion
    r.add_flow("10.1.1.2", 7)            # routerd: flow (R, G) became ACTIVE
    r.remove_flow("10.1.1.2", 7)         # routerd: flow gone
    r.disable_diversion()                # routerd gone: forward CSP like an oblivious router
    r.counters()                         # {"malformed": {...}, "diverted": {...}, ...}
    r.received()                         # {"1": frames parsed from port 1, ..., "255": CPU}
"""
from __future__ import annotations

from ipaddress import IPv4Address

from concast.controller.p4 import pipeline as P
from concast.controller.p4.p4rt import P4RuntimeClient


class P4Router:
    def __init__(self, client: P4RuntimeClient):
        self.client = client
        self.static_diversion: list[P.Entry] = []
        self.flows: set[tuple[int, int]] = set()

    def install(self, router, routes):
        """All entries of a router from its plan (RouterPlan) and routes (controller.routes)."""
        self.client.insert(P.base_entries(router, routes))
        self.static_diversion = P.diversion_entries(router)
        self.client.insert(self.static_diversion)

    # -- routerd ------------------------------------------------------------------------
    def add_flow(self, receiver, group: int):
        """Divert concast datagrams of (R, G) to routerd. Idempotent."""
        key = (P.ip_int(receiver), group)
        if key in self.flows:
            return
        self.client.insert([P.concast_flow_entry(receiver, group)])
        self.flows.add(key)

    def remove_flow(self, receiver, group: int):
        key = (P.ip_int(receiver), group)
        if key not in self.flows:
            return
        self.client.delete([P.concast_flow_entry(receiver, group)])
        self.flows.discard(key)

    def flows_on_switch(self) -> list[tuple[int, int]]:
        """(R, G) of every concast_flows entry on the switch, whoever wrote it (routerd's
        `--dataplane-cmd` writes from its own connection)."""
        out = []
        for te in self.client.read_table(P.T_CONCAST_FLOWS):
            f = {m.field_id: m.exact.value for m in te.match}
            r, g = (int.from_bytes(f[i], "big") for i in sorted(f))   # ids in order: R, G
            out.append((r, g))
        return sorted(out)

    def clear_flows(self):
        """Delete every concast_flows entry on the switch."""
        entries = [P.concast_flow_entry(str(IPv4Address(r)), g) for r, g in self.flows_on_switch()]
        if entries:
            self.client.delete(entries)
        self.flows.clear()

    def disable_diversion(self):
        """routerd is gone: remove static diversion and every flow entry."""
        self.client.delete(self.static_diversion)
        self.clear_flows()

    def enable_diversion(self):
        self.client.insert(self.static_diversion)

    # -- counters -----------------------------------------------------------------------
    def counters(self) -> dict:
        c = self.client.read_counter
        mal = c(P.C_MALFORMED)
        div = c(P.C_DIVERTED)
        drop = c(P.C_DROPPED)
        return {
            "malformed": {k: mal[i][0] for i, k in enumerate(P.MALFORMED_KINDS) if k},
            "diverted": {k: div[i][0] for i, k in enumerate(P.DIVERT_REASONS)},
            "reinjected": c(P.C_REINJECTED)[0][0],
            "forwarded": c(P.C_FORWARDED)[0][0],
            "dropped": {k: drop[i][0] for i, k in enumerate(P.DROP_REASONS)},
            "arp_answered": c(P.C_ARP)[0][0],
        }

    def received(self) -> dict[str, int]:
        """Frames the parser handed to ingress, by BMv2 port ("255": the CPU port); ports
        that received nothing are left out."""
        return {str(port): n for port, (n, _) in enumerate(self.client.read_counter(P.C_RECEIVED))
                if n}
