"""The OVS data plane's own counters for `concast router stats`: what each port of a
router's bridge received and sent, and how much of what came in the bridge neither
forwarded nor diverted. Userspace OVS counts a port's rx in the kernel (the veth), so a
frame the kernel took but ovs-vswitchd never read (its socket was full under a flood)
shows up only as that difference; OVS's own drop columns stay 0."""
from __future__ import annotations

import json
from pathlib import Path

from concast.controller.ovs import counters, ofctl


def bridge_of(routerd_socket: Path) -> str | None:
    """The router's bridge, from the config the control plane wrote next to its socket."""
    cfg = routerd_socket.with_suffix(".json")
    try:
        return json.loads(cfg.read_text()).get("bridge")
    except (OSError, ValueError):
        return None


def dataplane_stats(bridge: str, routerd_counters: dict | None = None) -> dict:
    """Per-port rx/tx packets and drops, their sums, and `not_forwarded`: frames received
    that left through no port. routerd's direct egress (`egress_sent`) is subtracted, as
    routerd, not OVS, sent those out of the ports. Counters run from the bridge's start."""
    ports = counters.parse_ports(ofctl.ofctl("dump-ports", bridge))
    keep = ("rx_pkts", "rx_drop", "rx_errs", "tx_pkts", "tx_drop", "tx_errs")
    table = {p: {k: v.get(k, 0) if isinstance(v.get(k, 0), int) else 0 for k in keep}
             for p, v in ports.items()}
    rx = sum(p["rx_pkts"] for p in table.values())
    tx = sum(p["tx_pkts"] for p in table.values())
    by_routerd = int((routerd_counters or {}).get("egress_sent", 0))
    return {"bridge": bridge, "ports": table, "rx_pkts": rx, "tx_pkts": tx,
            "drops": sum(p["rx_drop"] + p["tx_drop"] for p in table.values()),
            "not_forwarded": max(0, rx - (tx - by_routerd))}
