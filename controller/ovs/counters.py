"""ovs-ofctl dump-flows / dump-ports text -> dicts."""
from __future__ import annotations

import re

_INT = re.compile(r"^-?\d+$")


def _value(v: str):
    if _INT.match(v):
        return int(v)
    if v.startswith("0x"):
        try:
            return int(v, 16)
        except ValueError:
            return v
    if v.endswith("s") and _INT.match(v[:-1].replace(".", "", 1)):
        return float(v[:-1])
    return v


def parse_flows(text: str) -> list[dict]:
    """One dict per rule: cookie, table, priority, n_packets, n_bytes, match (str),
    fields (the match as a dict; bare words like `ip` map to True), actions (str)."""
    flows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("cookie="):
            continue
        head, _, actions = line.partition(" actions=")
        parts = head.split(", ")
        flow: dict = {"actions": actions, "priority": 32768}
        for part in parts[:-1]:
            k, _, v = part.partition("=")
            flow[k] = _value(v)
        fields: dict = {}
        match_items = []
        for item in parts[-1].split(","):
            k, eq, v = item.partition("=")
            if k == "priority":
                flow["priority"] = int(v)
            elif k in ("cookie", "duration", "table", "n_packets", "n_bytes",
                       "idle_age", "hard_age", "idle_timeout", "hard_timeout"):
                flow[k] = _value(v)
            elif k:
                fields[k] = v if eq else True
                match_items.append(item)
        flow["fields"] = fields
        flow["match"] = ",".join(match_items)
        flows.append(flow)
    return flows


_PORT = re.compile(r"^\s*port\s+(\S+?):\s*(rx .*)$")
_KV = re.compile(r"(\w+)=([^,\s]+)")


def parse_ports(text: str) -> dict[str, dict]:
    """{port: {"rx_pkts": n, "rx_bytes": n, "rx_drop": n, ..., "tx_pkts": n, ...}}.
    Port keys are OpenFlow port numbers as strings, or "LOCAL"; "?" (unsupported)
    counters are left out."""
    ports: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        m = _PORT.match(line)
        if m:
            current = ports.setdefault(m.group(1).strip('"'), {})
            rest = m.group(2)
        elif current is not None and line.strip().startswith(("tx ", "duration=")):
            rest = line.strip()
        else:
            continue
        direction = rest.split(" ", 1)[0] if rest.startswith(("rx ", "tx ")) else ""
        for k, v in _KV.findall(rest):
            if v == "?":
                continue
            key = f"{direction}_{k}" if direction else k
            current[key] = _value(v)
    return ports
