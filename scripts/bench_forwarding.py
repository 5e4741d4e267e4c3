#!/usr/bin/env python3
"""Plain forwarding through userspace OVS routers (no diversion, no routerd): the peer
every concast figure is compared with. Prints one table; all traffic stays inside the
Mininet host namespaces.

    sudo .venv/bin/python scripts/bench_forwarding.py [--seconds 5] [--json out.json]

Rows: a direct veth between two hosts (the kernel alone, no switch), then s1 - r1 - rx
and s1 - r1 - r2 - rx on OVS. Columns:
  udp offered / delivered   iperf3 UDP, 64-byte payload (106-byte frames), unlimited rate
  udp @<=1% loss            highest offered rate delivered with at most 1% loss (bisection)
  tcp                       iperf3 TCP, one stream, Mbit/s and retransmissions
  rtt p50                   median ping round trip, 200 pings 5 ms apart
  ovs us/pkt                ovs-vswitchd CPU time per delivered packet in the unlimited UDP
                            run: a figure that holds even when other work shares the cores
                            (1e6 / it = packets per second one core of OVS would forward)
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from concast.topologies import line

PAYLOAD = 64
PORT = 5201


class DirectPair:
    """Two Mininet hosts on one veth: what the kernel alone does."""

    def __init__(self) -> None:
        from mininet.link import TCLink
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        setLogLevel("error")
        self.mn = Mininet(topo=None, build=False, controller=None)
        s1 = self.mn.addHost("s1", ip="10.9.0.1/24")
        rx = self.mn.addHost("rx", ip="10.9.0.2/24")
        self.mn.addLink(s1, rx, cls=TCLink, txo=False, rxo=False)
        self.mn.build()
        self.mn.start()

    def __getitem__(self, name):
        return self.mn[name]

    def ip(self, name: str) -> str:
        return self.mn[name].IP()

    def stop(self) -> None:
        self.mn.stop()


@contextmanager
def network(kind: str):
    net = DirectPair() if kind == "direct" else line(int(kind), senders=1).start()
    try:
        yield net
    finally:
        net.stop()


@contextmanager
def iperf_server(net):
    srv = net["rx"].popen(["iperf3", "-s", "-p", str(PORT)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if f":{PORT} " in net["rx"].cmd("ss -tlnH"):
                break
            time.sleep(0.05)
        yield
    finally:
        srv.kill()
        srv.wait()


def iperf(net, args: str, seconds: float) -> dict:
    out = net["s1"].cmd(f"timeout {seconds + 15} iperf3 -c {net.ip('rx')} -p {PORT} "
                        f"-t {seconds} -J {args}")
    return json.loads(out)


def ovs_cpu_seconds() -> float:
    """User + system CPU time ovs-vswitchd has used so far."""
    pid = Path("/var/run/openvswitch/ovs-vswitchd.pid").read_text().strip()
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def udp(net, seconds: float, pps: int | None) -> tuple[float, float, float, float]:
    """(offered pps, delivered pps, loss %, OVS CPU us per delivered packet) at `pps`
    (None: as fast as iperf3 can)."""
    rate = 0 if pps is None else pps * PAYLOAD * 8
    cpu0 = ovs_cpu_seconds()
    end = iperf(net, f"-u -l {PAYLOAD} -b {rate}", seconds)["end"]
    cpu = ovs_cpu_seconds() - cpu0
    sent, recv = end["sum_sent"], end["sum_received"]
    delivered = recv["packets"] - recv["lost_packets"]
    loss = 100.0 * recv["lost_packets"] / max(recv["packets"], 1)
    per_pkt = 1e6 * cpu / max(delivered, 1)
    return sent["packets"] / sent["seconds"], delivered / recv["seconds"], loss, per_pkt


def udp_no_loss(net, ceiling: float, trial: float) -> float:
    """Highest rate with <= 1% loss, by bisection between 0 and the unlimited rate."""
    lo, hi = 0.0, ceiling
    for _ in range(6):
        mid = (lo + hi) / 2
        _, delivered, loss, _ = udp(net, trial, int(mid))
        if loss <= 1.0:
            lo = max(lo, delivered)
        else:
            hi = mid
    return lo


def tcp(net, seconds: float) -> tuple[float, int]:
    end = iperf(net, "", seconds)["end"]
    return end["sum_received"]["bits_per_second"] / 1e6, end["sum_sent"].get("retransmits", 0)


def rtt_p50_us(net) -> float:
    out = net["s1"].cmd(f"ping -n -q -c 1 {net.ip('rx')}; ping -n -c 200 -i 0.005 {net.ip('rx')}")
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
    return statistics.median(rtts) * 1000 if rtts else float("nan")


def measure(kind: str, seconds: float, search: bool) -> dict:
    with network(kind) as net, iperf_server(net):
        rtt = rtt_p50_us(net)
        offered, delivered, loss, per_pkt = udp(net, seconds, None)
        no_loss = udp_no_loss(net, offered, min(seconds, 2.0)) if search else float("nan")
        mbps, retrans = tcp(net, seconds)
    return {"path": kind, "udp_offered_pps": offered, "udp_delivered_pps": delivered,
            "udp_loss_pct": loss, "udp_1pct_loss_pps": no_loss, "tcp_mbps": mbps,
            "tcp_retransmits": retrans, "rtt_p50_us": rtt,
            "ovs_us_per_pkt": per_pkt if kind != "direct" else float("nan")}


LABELS = {"direct": "direct veth (no switch)", "1": "1 OVS router", "2": "2 OVS routers"}


def fmt(x: float) -> str:
    return "-" if x != x else f"{x:.1f}"                     # NaN: not measured


def table(rows: list[dict]) -> str:
    head = (f"{'path':<24} {'udp offered':>12} {'delivered':>10} {'loss':>6} "
            f"{'@<=1% loss':>11} {'tcp Mbit/s':>11} {'retx':>6} {'rtt p50':>9} {'ovs us/pkt':>10}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{LABELS.get(r['path'], r['path']):<24} {r['udp_offered_pps'] / 1e3:>9.1f} kpps"
            f" {r['udp_delivered_pps'] / 1e3:>5.1f} kpps {r['udp_loss_pct']:>5.1f}%"
            f" {fmt(r['udp_1pct_loss_pps'] / 1e3):>6} kpps {r['tcp_mbps']:>11.0f}"
            f" {r['tcp_retransmits']:>6} {r['rtt_p50_us']:>6.0f} us {fmt(r['ovs_us_per_pkt']):>10}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5, help="per UDP and TCP run (default 5)")
    p.add_argument("--paths", nargs="+", default=["direct", "1", "2"],
                   help="direct and/or numbers of routers (default: direct 1 2)")
    p.add_argument("--no-search", action="store_true", help="skip the 1%%-loss bisection")
    p.add_argument("--json", help="also write the figures here")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("bench_forwarding: needs root (Mininet)", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    rows = [measure(kind, a.seconds, not a.no_search) for kind in a.paths]
    print(table(rows))
    print(f"(64-byte UDP payload; load average at start {load:.2f} on {os.cpu_count()} cores)")
    if a.json:
        Path(a.json).write_text(json.dumps({"load": load, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    from concast import provenance
    sys.exit(provenance.main_in_run("bench-forwarding", main))
