"""Start a prebuilt network and keep it up until Ctrl-C (or SIGTERM, or --seconds):
for poking at it by hand with `ip netns exec cc<tag>-<host> ...` and ovs-ofctl.

    python -m concast.topologies.up tree --levels 2 --senders 8
    python -m concast.topologies.up line --routers 3 \
        --routerd "target/release/routerd --iface {cpu_iface} --bridge {bridge}"
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading

from concast.topologies import prebuilt


def build(ns: argparse.Namespace):
    if ns.shape == "line":
        return prebuilt.line(ns.routers, ns.senders, not ns.oblivious)
    if ns.shape == "tree":
        return prebuilt.tree(ns.levels, ns.fanout, ns.senders, not ns.oblivious)
    if ns.shape == "mixed":
        return prebuilt.mixed(ns.levels, ns.fanout, ns.senders)
    if ns.shape == "star":
        return prebuilt.star(ns.clients, not ns.oblivious)
    return prebuilt.dumbbell(ns.clients, not ns.oblivious, ns.bw)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="concast net up", description=__doc__.splitlines()[0])
    p.add_argument("shape", choices=["line", "tree", "mixed", "star", "dumbbell"])
    p.add_argument("--routers", type=int, default=2, help="line: routers")
    p.add_argument("--levels", type=int, default=2, help="tree, mixed: router levels")
    p.add_argument("--fanout", type=int, default=2, help="tree, mixed: children per router")
    p.add_argument("--senders", type=int, default=8, help="line, tree, mixed: senders")
    p.add_argument("--clients", type=int, default=4, help="star, dumbbell: clients")
    p.add_argument("--bw", type=float, help="dumbbell: r1-r2 limit, Mbit/s")
    p.add_argument("--oblivious", action="store_true", help="every router concast-oblivious")
    p.add_argument("--routerd", help="command template started per capable router "
                   "({router} {bridge} {cpu_iface} {cpu_ofport} {router_id} {router_mac} "
                   "{cpu_mac} {run_dir} {tag} {config})")
    p.add_argument("--seconds", type=float, help="stop after this long")
    ns = p.parse_args(argv)
    if os.geteuid() != 0:
        print("concast net up: needs root", file=sys.stderr)
        return 2
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    with build(ns).start() as net:
        print(net.describe())
        print(f"\nrun tag {net.tag}; logs and captures in {net.run_dir}")
        for h in net.plan.hosts:
            print(f"  ip netns exec {net.netns(h)} ...   # {h}")
        for r in net.routers.values():
            cpu = (f", CPU port {r.cpu_switch_iface} <-> routerd end {r.cpu_iface}"
                   if r.capable else "")
            print(f"  ovs-ofctl -O OpenFlow13 dump-flows {r.bridge}   # {r.name}{cpu}")
        if ns.routerd:
            for r, d in net.start_routerd(shlex.split(ns.routerd)).items():
                print(f"  {r}: pid {d.pid}, log {d.log}")
        print("up; Ctrl-C stops it", flush=True)
        done.wait(ns.seconds)
    print("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
