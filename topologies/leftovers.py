"""Remove what concast networks left behind, and only that.

Never `mn -c`: it kills processes machine-wide by name. This looks only at run
records (scripts/concast/registry.py) and at OVS bridges that carry our external_ids,
and removes a network only when the process that started it is gone.

    python -m concast.topologies.leftovers            # leftovers of dead runs
    python -m concast.topologies.leftovers --dry-run  # say what would go
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from concast import procs, registry


def _run(argv: list[str]) -> None:
    subprocess.run(argv, capture_output=True, timeout=30)


def remove_run(data: dict, dry_run: bool = False) -> list[str]:
    """Stop and delete everything one run record lists. Idempotent."""
    done = []
    for d in data.get("daemons", []):
        if procs.alive(d["pid"], d.get("start")):
            done.append(f"process {d['pid']} ({d.get('name', '?')})")
            if not dry_run:
                procs.terminate(d["pid"], d.get("start"), group=True)
    paths = {ns: f"/run/netns/{ns}" for ns in data.get("netns", [])
             if os.path.exists(f"/run/netns/{ns}")}
    found = procs.pids_by_netns(list(paths.values()))
    for ns, path in paths.items():
        pids = found.get(path, [])
        done.append(f"netns {ns}" + (f" and its processes {pids}" if pids else ""))
    if paths and not dry_run:
        # One scan of /proc, one kill round and one `ip -batch` for all namespaces.
        procs.kill_pids([pid for pids in found.values() for pid in pids])
        subprocess.run(["ip", "-force", "-batch", "-"], capture_output=True, timeout=120,
                       input="".join(f"netns delete {ns}\n" for ns in paths), text=True)
    existing = set(_list_bridges())
    bridges = [b for b in data.get("bridges", []) if b in existing]
    if bridges:
        done += [f"bridge {b}" for b in bridges]
        if not dry_run:
            argv = ["ovs-vsctl", "--timeout=20"]
            for b in bridges:
                argv += ["--", "--if-exists", "del-br", b]
            _run(argv)
    for path in data.get("files", []):         # e.g. the link emulator's state file
        if os.path.exists(path):
            is_dir = os.path.isdir(path)       # listed after its files: empty by then
            done.append(f"{'directory' if is_dir else 'file'} {path}")
            if not dry_run:
                try:
                    os.rmdir(path) if is_dir else os.unlink(path)
                except OSError as e:
                    done.append(f"(not removed: {e})")
    for iface in data.get("ifaces", []) + data.get("bridges", []):
        if os.path.exists(f"/sys/class/net/{iface}"):
            done.append(f"interface {iface}")
            if not dry_run:
                _run(["ip", "link", "del", iface])
    return done


def _list_bridges() -> list[str]:
    try:
        out = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return out.split()


def _orphan_bridges(known: set[str]) -> list[dict]:
    """Bridges tagged by a concast run whose owner is dead and whose record is lost."""
    out = []
    for br in _list_bridges():
        if br in known:
            continue
        ids = subprocess.run(["ovs-vsctl", "--timeout=5", "get", "bridge", br, "external_ids"],
                             capture_output=True, text=True, timeout=10).stdout
        fields = dict(kv.split("=", 1) for kv in ids.strip("{}\n ").replace('"', "").split(", ")
                      if "=" in kv)
        if "concast-run" not in fields:
            continue
        pid, start = int(fields.get("concast-owner", 0)), fields.get("concast-owner-start")
        if procs.alive(pid, int(start) if start else None):
            continue
        ports = subprocess.run(["ovs-vsctl", "--timeout=5", "list-ports", br],
                               capture_output=True, text=True, timeout=10).stdout.split()
        peers = [p[:-len("-cpu")] + "-rd" for p in ports if p.endswith("-cpu")]
        out.append({"bridges": [br], "ifaces": ports + peers})
    return out


def cleanup(dry_run: bool = False, tag: str | None = None, force: bool = False) -> list[str]:
    """Remove the leftovers of every run whose owner process is gone (or, with `tag`
    and `force`, of that run even if its owner still lives)."""
    done: list[str] = []
    known: set[str] = set()
    for rec in registry.load_all():
        known.update(rec.data.get("bridges", []))
        if tag and rec.tag != tag:
            continue
        if rec.owner_alive() and not (tag and force):
            continue
        done += remove_run(rec.data, dry_run)
        if not dry_run:
            rec.remove()
    if tag is None:
        for data in _orphan_bridges(known):
            done += remove_run(data, dry_run)
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="concast net cleanup", description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.add_argument("--tag", help="only the run with this two-character tag")
    p.add_argument("--force", action="store_true", help="with --tag: even if its owner lives")
    ns = p.parse_args(argv)
    if os.geteuid() != 0:
        print("concast net cleanup: needs root", file=sys.stderr)
        return 2
    done = cleanup(ns.dry_run, ns.tag, ns.force)
    verb = "would remove" if ns.dry_run else "removed"
    for item in done:
        print(f"{verb} {item}")
    if not done:
        print("nothing to clean up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
