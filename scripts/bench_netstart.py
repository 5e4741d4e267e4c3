"""Start-up, tear-down, memory and forwarding rate of a big transit-stub network.

    .venv/bin/python scripts/bench_netstart.py                 # 220 routers, 201 hosts, OVS
    .venv/bin/python scripts/bench_netstart.py --daemons       # + routerd/hostd everywhere
    .venv/bin/python scripts/bench_netstart.py --link-params   # the paper's 10 ms links (linkemu)

Prints one line per phase and, with --pairs N, the UDP rate iperf3 gets through paths of
--hops routers, for one pair alone and N pairs at once (needs root, OVS, iperf3).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from concast.controller.routes import router_hops
from concast.topologies import transit_stub


def mem_used_mb() -> float:
    info = dict(line.split(":", 1) for line in open("/proc/meminfo"))
    kb = lambda k: int(info[k].split()[0])  # noqa: E731
    return (kb("MemTotal") - kb("MemAvailable")) / 1024


def pick_pairs(plan, hops: int, n: int) -> list[tuple[str, str]]:
    """Disjoint client pairs whose path crosses exactly `hops` routers."""
    clients = [h for h in plan.hosts if h != "sv"]
    used, pairs = set(), []
    for a in clients:
        for b in clients:
            if len(pairs) == n:
                return pairs
            if a == b or a in used or b in used:
                continue
            if router_hops(plan, a, b) == hops:
                pairs.append((a, b))
                used |= {a, b}
    return pairs


def udp(net, pairs, seconds: float, length: int) -> list[dict]:
    """Each pair's sender as fast as it can; the rate is what the receiving iperf3 counted."""
    servers = [net[b].popen(["iperf3", "-s", "-1", "-p", str(5201 + i), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for i, (_, b) in enumerate(pairs)]
    time.sleep(0.5)
    clients = [net[a].popen(["iperf3", "-c", net.ip(b), "-p", str(5201 + i), "-u", "-b", "0",
                             "-l", str(length), "-t", str(seconds)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for i, (a, b) in enumerate(pairs)]
    for c in clients:
        c.wait(timeout=seconds + 60)
    out = []
    for s in servers:
        try:
            text, _ = s.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            s.kill()
            text, _ = s.communicate()
        end = json.loads(text)["end"]["sum"]
        got = end["packets"] - end["lost_packets"]
        out.append({"mbps": end["bits_per_second"] / 1e6, "lost_pct": end["lost_percent"],
                    "pps": got / end["seconds"]})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dataplane", default="ovs")
    p.add_argument("--capable", action="store_true", help="concast-capable routers")
    p.add_argument("--daemons", action="store_true", help="start routerd + hostd (implies --capable)")
    p.add_argument("--link-params", action="store_true",
                   help="the paper's 10 ms / 100 and 10 Mbit/s / 20-packet links")
    p.add_argument("--stubs-per-transit", type=int, default=6)
    p.add_argument("--stub-nodes", type=int, default=9)
    p.add_argument("--clients", type=int, default=200)
    p.add_argument("--pairs", type=int, default=4, help="iperf3 pairs (0: none)")
    p.add_argument("--hops", type=int, default=8, help="routers on each pair's path")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--length", type=int, default=1200, help="UDP payload bytes")
    ns = p.parse_args()
    if os.geteuid() != 0:
        print("needs root", file=sys.stderr)
        return 2
    kw = {} if ns.link_params else {"core": {}, "edge": {}}
    net = transit_stub(seed=ns.seed, capable=ns.capable or ns.daemons, dataplane=ns.dataplane,
                       stubs_per_transit=ns.stubs_per_transit, stub_nodes=ns.stub_nodes,
                       clients=ns.clients, **kw)
    print(f"{net}; link params: {'paper' if ns.link_params else 'none'}", flush=True)
    before = mem_used_mb()
    t0 = time.monotonic()
    n = net.start()
    try:
        t1 = time.monotonic()
        print(f"start {t1 - t0:.1f} s; memory used +{mem_used_mb() - before:.0f} MB", flush=True)
        if ns.daemons:
            n.start_concast()
            t2 = time.monotonic()
            print(f"routerd x{sum(r.capable for r in n.routers.values())} + hostd "
                  f"x{len(n.plan.hosts)} answering after {t2 - t1:.1f} s; memory used "
                  f"+{mem_used_mb() - before:.0f} MB", flush=True)
        ok = sum(n.ping(c, "sv", timeout=3).ok for c in ("c1", "c50", "c100", "c200"))
        print(f"ping to sv: {ok}/4 answered", flush=True)
        if ns.pairs:
            pairs = pick_pairs(n.plan, ns.hops, ns.pairs)
            print(f"pairs {ns.hops} routers apart: {pairs}", flush=True)
            one = udp(n, pairs[:1], ns.seconds, ns.length)[0]
            print(f"1 pair: {one['mbps']:.1f} Mbit/s, {one['pps']:.0f} pkt/s delivered, "
                  f"loss {one['lost_pct']:.1f} %", flush=True)
            many = udp(n, pairs, ns.seconds, ns.length)
            print(f"{len(pairs)} pairs at once: {sum(r['mbps'] for r in many):.1f} Mbit/s, "
                  f"{sum(r['pps'] for r in many):.0f} pkt/s delivered in total, per pair "
                  f"{[round(r['mbps'], 1) for r in many]} Mbit/s, loss "
                  f"{[round(r['lost_pct'], 1) for r in many]} %", flush=True)
    finally:
        t3 = time.monotonic()
        n.stop()
        print(f"stop {time.monotonic() - t3:.1f} s; memory used +{mem_used_mb() - before:.0f} MB "
              "after", flush=True)
    return 0


if __name__ == "__main__":
    from concast import provenance
    sys.exit(provenance.main_in_run("bench-netstart", main))
