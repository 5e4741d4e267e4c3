#!/usr/bin/env python3
"""How the workload generators scale: N clients fetch a page at the same instant from
ONE fetcher process; prints Mininet start time, fetch times and the fetcher's CPU.
Needs root and Open vSwitch.

    .venv/bin/python scripts/bench_workload.py --clients 200 --rounds 3 [--udp-mbps 2]

Topology "hub" (default): the server on router r1, clients dealt to edge routers
e1..eK (at most --per-router each) linked to r1. A plain star of more than about 45
clients does not start: Mininet adds all ports of a bridge in one ovs-vsctl command
typed into a pty, whose line limit (4095 bytes) cuts it off.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from concast.topologies import ConcastNet, dumbbell, star, transit_stub
from concast.topologies.workload import cross, pairs, web
from concast.topologies.workload.tcpsettings import TcpSettings


def fetch_once(net, clients: list[str], port: int, size: int, out: Path, extra: list[str]):
    """The fetch CLI as its own process; returns (result, that process's CPU seconds)."""
    args = [sys.executable, "-m", web.MODULE, "fetch", "--server", net.ip("sv"),
            "--port", str(port), "--size", str(size), "--out", str(out), *extra]
    for c in clients:
        args += ["--client", f"{c}={net.netns(c)}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 3):
        raise SystemExit(f"fetch failed: {p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.read_text()), cpu, wall


def hub(clients: int, per_router: int, dataplane: str) -> ConcastNet:
    net = ConcastNet(dataplane).router("r1").host("sv", router="r1")
    edges = [f"e{i + 1}" for i in range(-(-clients // per_router))]
    for e in edges:
        net.router(e).link("r1", e)
    for i in range(clients):
        net.host(f"c{i + 1}", router=edges[i // per_router])
    return net


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--topo", choices=("hub", "star", "dumbbell", "transit-stub"),
                    default="hub", help="transit-stub: the ACK study's network (seed 1), "
                    "emulated links")
    ap.add_argument("--dataplane", default="ovs", choices=("ovs", "linux"))
    ap.add_argument("--per-router", type=int, default=25, help="hub: clients per edge router")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--udp-mbps", type=float, default=0.0,
                    help="UDP cross traffic per flow during the fetches (4 flows)")
    ap.add_argument("--tcp-flows", type=int, default=0,
                    help="long-lived TCP cross flows between client pairs during the fetches")
    ap.add_argument("--cc", help="congestion control of the clients and the server")
    ap.add_argument("--json", help="write all figures here")
    a = ap.parse_args()
    t = time.monotonic()
    if a.topo == "hub":
        desc = hub(a.clients, a.per_router, a.dataplane)
    elif a.topo == "transit-stub":
        desc = transit_stub(a.dataplane, seed=1, clients=a.clients)
    else:
        desc = (star if a.topo == "star" else dumbbell)(clients=a.clients,
                                                        dataplane=a.dataplane)
    net = desc.start()
    start_s = time.monotonic() - t
    figures = {"topo": a.topo, "dataplane": a.dataplane, "clients": a.clients, "mininet_start_s": start_s, "rounds": []}
    print(f"{a.topo} ({a.dataplane}) with {a.clients} clients started in {start_s:.1f} s",
          flush=True)
    ct = None
    try:
        clients = [h for h in net.plan.hosts if h != "sv"]
        srv = web.PageServer(net.netns("sv"), port=8000, size=a.size,
                             tcp=TcpSettings(cc=a.cc) if a.cc else None)
        extra = ["--cc", a.cc] if a.cc else []
        fl = []
        if a.udp_mbps:
            fl += cross.flows_between(net, pairs.choose_pairs(net, 4, seed=1, exclude=["sv"],
                                                              min_hops=0),
                                      "udp", rate_mbps=a.udp_mbps, size=1000)
        if a.tcp_flows:
            fl += cross.flows_between(net, pairs.choose_pairs(net, a.tcp_flows, seed=2,
                                                              exclude=["sv"], min_hops=2),
                                      "tcp", base_port=9500, first_id=len(fl))
        if fl:
            ct = cross.CrossTraffic(fl).start()
            time.sleep(1)                       # let the TCP flows get going
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(a.rounds):
                r, proc_cpu, proc_wall = fetch_once(net, clients, srv.port, a.size,
                                                    Path(tmp) / f"r{i}.json", extra)
                s, c = r["summary"], r["cpu"]
                row = {"completed": s["completed"], "failed": s["failed"],
                       "release_ms": s["release_ms"], "session_ms": s["session_ms"],
                       "median_ms": s["completion_ms"]["median"],
                       "p95_ms": s["completion_ms"]["p95"], "max_ms": s["completion_ms"]["max"],
                       "aggregate_mbps": s["aggregate_mbps"], "loop_cpu_s": c["cpu_s"],
                       "loop_wall_s": c["wall_s"], "setup_s": c["setup_s"],
                       "process_cpu_s": proc_cpu, "process_wall_s": proc_wall,
                       "cc": r["settings"]["clients_tcp"]["cc"] if r["settings"]["clients_tcp"]
                       else None}
                figures["rounds"].append(row)
                print(json.dumps(row), flush=True)
        figures["server"] = srv.stop()
        print(json.dumps({"server": figures["server"]}), flush=True)
        if ct:
            rep = ct.stop()
            figures["cross"] = {k: rep[k] for k in ("udp", "tcp", "cpu_s")}
            print(json.dumps(figures["cross"]), flush=True)
            ct = None
    finally:
        if ct:
            ct.stop()
        net.stop()
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    from concast import provenance
    sys.exit(provenance.main_in_run("bench-workload", main))
