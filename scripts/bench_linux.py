#!/usr/bin/env python3
"""The Linux data plane against Open vSwitch: plain forwarding through a path of N routers
(no routerd, no diversion), both data planes in the same run, and the time to start and
stop a 220-router transit-stub network on Linux routers.

    sudo .venv/bin/python scripts/bench_linux.py [--routers 8] [--seconds 5] [--json out.json]
                                                  [--no-startup] [--startup-ovs]

Forwarding columns (iperf3 in the host namespaces, as scripts/bench_forwarding.py):
UDP with 64-byte payloads at an unlimited rate (offered, delivered, loss), one TCP stream,
and the median ping round trip. Start-up: seconds from ConcastNet.start() to a network
whose routers are programmed, then until every client has pinged the server once, then
to stop(); the transit-stub's link shaping (HTB) included; with --routerd, until routerd answers on
every router, and the memory they hold.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import bench_forwarding as bf      # beside this script: on sys.path when it runs

from concast.topologies import line


def udp_try(net, seconds: float, pps: int | None) -> tuple[float, float, float]:
    """(offered pps, delivered pps, loss %); a run iperf3 could not finish (its control
    connection starved by the flood) counts as everything lost."""
    try:
        offered, delivered, loss, _ = bf.udp(net, seconds, pps)
        return offered, delivered, loss
    except (KeyError, ValueError):
        return float(pps or 0), 0.0, 100.0


def udp_no_loss(net, ceiling: float, trial: float) -> float:
    """Highest rate delivered with <= 1% loss, by bisection below the unlimited rate."""
    lo, hi = 0.0, ceiling
    for _ in range(6):
        mid = (lo + hi) / 2
        _, delivered, loss = udp_try(net, trial, int(mid))
        if loss <= 1.0:
            lo = max(lo, delivered)
        else:
            hi = mid
    return lo


def forwarding(dataplane: str, routers: int, seconds: float, search: bool) -> dict:
    net = line(routers, senders=1, dataplane=dataplane).start()
    try:
        with bf.iperf_server(net):
            rtt = bf.rtt_p50_us(net)
            offered, delivered, loss = udp_try(net, seconds, None)
            # An unlimited sender can push userspace OVS into dropping nearly everything:
            # the highest rate delivered with at most 1% loss is the fairer figure.
            no_loss = udp_no_loss(net, offered, min(seconds, 2.0)) if search else float("nan")
            mbps, retrans = bf.tcp(net, seconds)
    finally:
        net.stop()
    return {"dataplane": dataplane, "routers": routers, "udp_offered_pps": offered,
            "udp_delivered_pps": delivered, "udp_loss_pct": loss, "udp_1pct_loss_pps": no_loss,
            "tcp_mbps": mbps,
            "tcp_retransmits": retrans, "rtt_p50_us": rtt}


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def startup(dataplane: str, with_routerd: bool) -> dict:
    from concast.controller import dataplanes
    from concast.topologies.transitstub import transit_stub
    desc = transit_stub(dataplane=dataplane)
    plan = desc.plan()
    # How much of the start is programming the routers (the rest is Mininet's nodes and links).
    cls = dataplanes.backend(dataplane)
    configure, timing = cls.configure, {}

    def timed(self, *args):
        t = time.monotonic()
        try:
            return configure(self, *args)
        finally:
            timing["configure_s"] = time.monotonic() - t
    cls.configure = timed
    t0 = time.monotonic()
    try:
        net = desc.start()
    finally:
        cls.configure = configure
    try:
        started = time.monotonic() - t0
        rd = {}
        if with_routerd:
            t = time.monotonic()
            # routerd's own default hold; no hostd. Raises if one does not answer.
            daemons, _ = net.start_concast(hold=30, hosts=(), timeout=120)
            # The routerd process itself (ip netns exec execs it: same PID).
            rd = {"routerd_s": time.monotonic() - t, "routerd_up": len(daemons),
                  "routerd_rss_mb": rss_mb([d.pid for d in daemons.values()])}
        sv = net.ip("sv")
        clients = [h for h in plan.hosts if h != "sv"]
        t1 = time.monotonic()
        # Every client at once (background pings), then count the answers.
        for c in clients:
            net[c].cmd(f"ping -n -c 1 -W 5 {sv} > /tmp/.ccping-{net.tag}-{c} 2>&1 &")
        ok = 0
        deadline = time.monotonic() + 60
        pending = set(clients)
        while pending and time.monotonic() < deadline:
            for c in list(pending):
                out = Path(f"/tmp/.ccping-{net.tag}-{c}").read_text(errors="replace")
                if "packets transmitted" in out:
                    pending.discard(c)
                    ok += " 0% packet loss" in out
            time.sleep(0.2)
        reached = time.monotonic() - t1
    finally:
        t2 = time.monotonic()
        net.stop()
        stopped = time.monotonic() - t2
        for c in plan.hosts:
            Path(f"/tmp/.ccping-{net.tag}-{c}").unlink(missing_ok=True)
    return {"dataplane": dataplane, "routers": len(plan.routers), "hosts": len(plan.hosts),
            "links": len(plan.links), "start_s": started, **timing, **rd,
            "all_pinged_s": reached, "clients_ok": ok, "clients": len(clients), "stop_s": stopped}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--routers", type=int, default=8, help="routers on the path (default 8)")
    p.add_argument("--seconds", type=float, default=5, help="per UDP and TCP run (default 5)")
    p.add_argument("--no-startup", action="store_true", help="skip the 220-router start-up")
    p.add_argument("--no-search", action="store_true", help="skip the 1%%-loss bisection")
    p.add_argument("--startup-ovs", action="store_true", help="also start it on OVS (slow)")
    p.add_argument("--routerd", action="store_true",
                   help="start routerd on all 220 routers too (seconds until all answer, memory)")
    p.add_argument("--json", help="also write the figures here")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("bench_linux: needs root (Mininet)", file=sys.stderr)
        return 2
    if not 1 <= a.routers <= 50:
        p.error("--routers must be 1..50")
    load = os.getloadavg()[0]
    rows = [forwarding(dp, a.routers, a.seconds, not a.no_search) for dp in ("ovs", "linux")]
    print(f"{'path':<22} {'udp offered':>12} {'delivered':>10} {'loss':>6} {'@<=1% loss':>11}"
          f" {'tcp Mbit/s':>11}"
          f" {'retx':>6} {'rtt p50':>9}")
    for r in rows:
        print(f"{r['routers']} {r['dataplane']} routers{'':<{12 - len(r['dataplane'])}}"
              f" {r['udp_offered_pps'] / 1e3:>7.1f} kpps {r['udp_delivered_pps'] / 1e3:>5.1f} kpps"
              f" {r['udp_loss_pct']:>5.1f}% {bf.fmt(r['udp_1pct_loss_pps'] / 1e3):>6} kpps"
              f" {r['tcp_mbps']:>11.0f} {r['tcp_retransmits']:>6}"
              f" {r['rtt_p50_us']:>6.0f} us")
    ups = []
    if not a.no_startup:
        for dp in (["linux", "ovs"] if a.startup_ovs else ["linux"]):
            u = startup(dp, a.routerd)
            ups.append(u)
            print(f"start-up on {dp}: {u['routers']} routers, {u['hosts']} hosts, {u['links']}"
                  f" links: started in {u['start_s']:.1f} s (programming the routers"
                  f" {u['configure_s']:.1f} s)")
            if "routerd_s" in u:
                print(f"  routerd: {u['routerd_up']} answering after {u['routerd_s']:.1f} s,"
                      f" {u['routerd_rss_mb']:.0f} MB resident in all")
            print(f"  {u['clients_ok']}/{u['clients']}"
                  f" clients pinged the server within {u['all_pinged_s']:.1f} s,"
                  f" stopped in {u['stop_s']:.1f} s")
    print(f"(64-byte UDP payload; load average at start {load:.2f} on {os.cpu_count()} cores)")
    if a.json:
        Path(a.json).write_text(json.dumps({"load": load, "forwarding": rows, "startup": ups},
                                           indent=1))
    return 0


if __name__ == "__main__":
    from concast import provenance
    sys.exit(provenance.main_in_run("bench-linux", main))
