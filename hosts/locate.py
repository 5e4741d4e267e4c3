"""Which socket belongs to a node: a host's hostd or a router's routerd in a running
concast network, found through the run records (/run/concast/nets/<tag>.json), so the
`concast` command line can be given node names instead of paths.

A NODE argument is a socket path (anything containing "/"), or a node name. `concast
send`/`recv` run inside a host's namespace (Mininet's host.cmd, `ip netns exec`) need no
node at all: the namespace they run in says which host they are.
"""
from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOSTD = Path("/run/concast/hostd.sock")     # a hostd started by hand, outside a run


class NotFound(LookupError):
    """No socket for that node: the message says what was looked at."""


def _runs(tag: str | None) -> list[dict]:
    from concast import registry
    out = []
    for rec in registry.load_all():
        if (tag is None or rec.tag == tag) and rec.owner_alive():
            out.append(rec.data)
    return out


def _one(found: list[Path], what: str) -> Path:
    if not found:
        raise NotFound(f"no running concast network has {what} (is it started? give a socket path)")
    if len(found) > 1:
        raise NotFound(f"several running networks have {what}: {', '.join(map(str, found))}; "
                       "give the socket path or --run TAG")
    return found[0]


def _ns_id(path: str | Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def own_host(tag: str | None = None) -> tuple[str, dict] | None:
    """(host, run record) if this process runs in the namespace of a host whose hostd is
    running. Compared through the hostd's /proc/PID/ns/net: the /run/netns names are bind
    mounts that a Mininet host's own mount namespace does not see."""
    from concast import procs
    me = _ns_id("/proc/self/ns/net")
    for data in _runs(tag):
        for d in data.get("daemons", []):
            if d.get("name") == "hostd" and procs.alive(d["pid"], d.get("start")) \
                    and _ns_id(f"/proc/{d['pid']}/ns/net") == me:
                return d["router"], data
    return None


def hostd_socket(node: str | None = None, tag: str | None = None) -> Path:
    if node and "/" in node:
        return Path(node)
    if node:
        found = [Path(d["run_dir"]) / "hosts" / f"{node}.sock" for d in _runs(tag)
                 if f"cc{d['tag']}-{node}" in d.get("netns", [])]
        return _one(found, f"a host named {node!r}")
    mine = own_host(tag)
    if mine:
        host, data = mine
        return Path(data["run_dir"]) / "hosts" / f"{host}.sock"
    if DEFAULT_HOSTD.exists():
        return DEFAULT_HOSTD
    raise NotFound("which hostd? give --node HOST or --socket PATH (this process runs in no "
                   "host namespace of a running network, and there is no "
                   f"{DEFAULT_HOSTD})")


def routerd_socket(node: str, tag: str | None = None) -> Path:
    if "/" in node:
        return Path(node)
    found = [Path(d["run_dir"]) / "routers" / f"{node}.sock" for d in _runs(tag)
             if (Path(d["run_dir"]) / "routers" / f"{node}.json").exists()]
    return _one(found, f"a router named {node!r}")
