"""What `concast router stats` and `concast router table` read from a running BMv2 router:
its P4 counters and its table entries, over a read-only P4Runtime connection.

The reader opens no stream channel and sends no arbitration (P4Runtime lets any client Read),
so it has no election id: it can never be primary nor displace the control plane's connection
(election id 1) or routerd's writes (`python -m concast.controller.p4`, its own id). With
`--election-id N` it arbitrates as a backup with N instead (for switches that want every client
arbitrated) and still only reads.

The switch's address and the program's P4Info come from the config the control plane wrote
beside routerd's socket (<run>/routers/<router>.json: p4_switch, dataplane_cmd's --p4info).
"""
from __future__ import annotations

import json
import shlex
from ipaddress import IPv4Address
from pathlib import Path

from concast.controller.p4 import pipeline as P


def router_config(routerd_socket: Path) -> dict | None:
    """The routerd config beside its socket, or None."""
    try:
        return json.loads(Path(routerd_socket).with_suffix(".json").read_text())
    except (OSError, ValueError):
        return None


def p4info_of(cfg: dict) -> Path:
    """The P4Info of the program on the router's switch: dataplane_cmd's --p4info (a
    `net up --p4` program's own), else p4src/concast.p4's."""
    words = shlex.split(cfg.get("dataplane_cmd") or "")
    for i, w in enumerate(words[:-1]):
        if w == "--p4info":
            return Path(words[i + 1])
    return P.P4INFO_PATH


def connect(cfg: dict, election_id: int | None = None):
    """A read-only P4RuntimeClient to the router's switch, its P4Info loaded."""
    from concast.controller.p4.p4rt import P4RuntimeClient
    client = P4RuntimeClient(cfg["p4_switch"], 0, election_id, timeout=5, backup=True,
                             reader=election_id is None)
    client.use_p4info(p4info_of(cfg))
    return client


def stats(cfg: dict, counters: dict) -> dict:
    """The `dataplane` part of `concast router stats` on BMv2: where, and the P4 counters
    (P4Router.counters(): malformed, diverted, reinjected, forwarded, dropped, arp_answered)
    with the sums a reader wants first."""
    return {"p4_switch": cfg.get("p4_switch"), "p4info": str(p4info_of(cfg)),
            "p4_counters": counters,
            "diverted_total": sum(counters.get("diverted", {}).values()),
            "dropped_total": sum(counters.get("dropped", {}).values()),
            "malformed_total": sum(counters.get("malformed", {}).values())}


def read_stats(cfg: dict, election_id: int | None = None) -> dict:
    from concast.controller.p4.router import P4Router
    client = connect(cfg, election_id)
    try:
        return stats(cfg, P4Router(client).counters())
    finally:
        client.close()


# --- table entries -----------------------------------------------------------------------
def resolve_tables(names: list[str] | None, known: list[str]) -> list[str]:
    """Full table names for NAMEs given by their full or last dotted part (concast_flows);
    every table without NAMEs. ValueError names what is unknown or ambiguous."""
    if not names:
        return sorted(known)
    out = []
    for n in names:
        hits = [k for k in known if k == n or k.rsplit(".", 1)[-1] == n]
        if len(hits) != 1:
            raise ValueError(f"table {n!r} is {'ambiguous' if hits else 'unknown'}; tables: "
                             f"{', '.join(sorted(k.rsplit('.', 1)[-1] for k in known))}")
        out.append(hits[0])
    return out


# 32-bit fields shown as IPv4 addresses (the rest, e.g. the group G, as numbers)
ADDRESS_FIELDS = {"R", "dst", "src", "tpa", "spa", "addr"}


def _value(raw: bytes, bitwidth: int, name: str = "addr") -> str:
    v = int.from_bytes(raw, "big")
    if bitwidth == 32 and name in ADDRESS_FIELDS:
        return str(IPv4Address(v))
    if bitwidth == 48:
        return ":".join(f"{b:02x}" for b in v.to_bytes(6, "big"))
    return str(v)


def entry_row(te, p4info) -> dict:
    """One TableEntry as names and readable values (addresses dotted, MACs with colons)."""
    table = next(t for t in p4info.tables.values() if t.preamble.id == te.table_id)
    fields = {f.id: f for f in table.match_fields}
    match = {}
    for m in te.match:
        f = fields[m.field_id]
        kind = m.WhichOneof("field_match_type")
        if kind == "exact":
            match[f.name] = _value(m.exact.value, f.bitwidth, f.name)
        elif kind == "lpm":
            match[f.name] = f"{_value(m.lpm.value, f.bitwidth, f.name)}/{m.lpm.prefix_len}"
        elif kind == "ternary":
            match[f.name] = (f"{_value(m.ternary.value, f.bitwidth, f.name)}&&&"
                             f"0x{int.from_bytes(m.ternary.mask, 'big'):x}")
        else:
            match[f.name] = kind
    row = {"table": table.preamble.name, "match": match, "action": None, "params": {}}
    if te.priority:
        row["priority"] = te.priority
    if te.HasField("action") and te.action.HasField("action"):
        a = te.action.action
        action = next(x for x in p4info.actions.values() if x.preamble.id == a.action_id)
        names = {p.id: p for p in action.params}
        row["action"] = action.preamble.name
        row["params"] = {names[p.param_id].name: _value(p.value, names[p.param_id].bitwidth,
                                                       names[p.param_id].name)
                         for p in a.params}
    return row


def short(name: str | None) -> str:
    return (name or "-").rsplit(".", 1)[-1]


def format_rows(rows: list[dict]) -> str:
    """One line per entry: table, match, action(params), priority; a count per table."""
    lines = []
    for r in rows:
        match = " ".join(f"{k}={v}" for k, v in r["match"].items()) or "(default)"
        params = ",".join(f"{k}={v}" for k, v in r["params"].items())
        prio = f"  prio {r['priority']}" if r.get("priority") else ""
        lines.append(f"{short(r['table']):16} {match:40} -> {short(r['action'])}({params}){prio}")
    counts = {}
    for r in rows:
        counts[short(r["table"])] = counts.get(short(r["table"]), 0) + 1
    lines.append(f"{len(rows)} entries" + (": " + ", ".join(f"{k} {v}" for k, v in counts.items())
                                           if counts else ""))
    return "\n".join(lines)


def read_tables(cfg: dict, names: list[str] | None = None,
                election_id: int | None = None) -> list[dict]:
    client = connect(cfg, election_id)
    try:
        tables = resolve_tables(names, list(client.p4info.tables))
        return [entry_row(te, client.p4info) for t in tables for te in client.read_table(t)]
    finally:
        client.close()
