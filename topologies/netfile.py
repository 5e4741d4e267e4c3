"""Saved networks: a ConcastNet as JSON, and back, so a run can be repeated exactly.

    {"format": "concast-net", "version": 1, "dataplane": "ovs",
     "generator": {"name": "transit-stub", "params": {...}, "seed": 1},   # or null
     "routers": [{"name": "t1", "capable": true}, ...],
     "hosts":   [{"name": "c1", "router": "s1", "params": {}}, ...],
     "links":   [{"a": "t1", "b": "t2", "cost": 1, "params": {"delay": "10ms", ...}}, ...],
     "order":   ["link 0", "host c1", ...],
     "meta":    {...}}

`order` is the declaration order of hosts and links, which fixes port numbers and
addresses (scripts/concast/netmodel/addressing.py); loading replays it, so a loaded network gets the
very same address plan as the saved one.
"""
from __future__ import annotations

import json
from pathlib import Path

FORMAT = "concast-net"
VERSION = 1


def to_dict(net) -> dict:
    t = net.topo
    order = [f"host {ref}" if kind == "host" else f"link {ref}" for kind, ref in t.attachments]
    return {
        "format": FORMAT, "version": VERSION, "dataplane": net.dataplane,
        "generator": net.generator,
        "routers": [{"name": r.name, "capable": r.capable} for r in t.routers.values()],
        "hosts": [{"name": h.name, "router": h.router, "params": h.params}
                  for h in t.hosts.values()],
        "links": [{"a": ln.a, "b": ln.b, "cost": ln.cost, "params": ln.params}
                  for ln in t.links],
        "order": order,
        "meta": net.meta,
    }


def save(net, path: Path | str) -> Path:
    path = Path(path)
    path.write_text(json.dumps(to_dict(net), indent=1) + "\n")
    return path


def _need(obj: dict, key: str, kind, where: str):
    if key not in obj:
        raise ValueError(f"{where}: missing {key!r}")
    if not isinstance(obj[key], kind):
        raise ValueError(f"{where}: {key!r} has the wrong type")
    return obj[key]


def from_dict(data: dict, make, dataplane: str | None = None):
    """The network `data` describes, built on `make(dataplane)` (ConcastNet, which calls
    this module: taking the class keeps the import one way)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a saved concast network (no \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise ValueError(f"saved network version {data.get('version')!r}; this concast "
                         f"reads version {VERSION}")
    net = make(dataplane or data.get("dataplane") or "ovs")
    for i, r in enumerate(_need(data, "routers", list, "network")):
        net.router(_need(r, "name", str, f"routers[{i}]"), bool(r.get("capable", True)))
    hosts = {h["name"]: h for h in _need(data, "hosts", list, "network")
             if isinstance(h, dict) and "name" in h}
    links = _need(data, "links", list, "network")
    order = data.get("order")
    if order is None:       # hand-written files may leave it out: links first, then hosts
        order = [f"link {i}" for i in range(len(links))] + [f"host {h}" for h in hosts]
    seen_hosts: set[str] = set()
    seen_links: set[int] = set()
    for item in order:
        kind, _, ref = str(item).partition(" ")
        if kind == "host" and ref in hosts and ref not in seen_hosts:
            h = hosts[ref]
            net.host(ref, _need(h, "router", str, f"host {ref}"), **h.get("params", {}))
            seen_hosts.add(ref)
        elif kind == "link" and ref.isdigit() and int(ref) < len(links) \
                and int(ref) not in seen_links:
            ln = links[int(ref)]
            where = f"links[{ref}]"
            net.link(_need(ln, "a", str, where), _need(ln, "b", str, where),
                     int(ln.get("cost", 1)), **ln.get("params", {}))
            seen_links.add(int(ref))
        else:
            raise ValueError(f"order: {item!r} is not an unused host name or link index")
    if seen_hosts != set(hosts) or len(seen_links) != len(links):
        raise ValueError("order must name every host and every link exactly once")
    net.generator = data.get("generator")
    net.meta = data.get("meta") or {}
    return net


def load(path: Path | str, make, dataplane: str | None = None):
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    try:
        return from_dict(data, make, dataplane)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
