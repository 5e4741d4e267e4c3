#!/usr/bin/env python3
"""Added latency of one concast hop with a zero-delay merge spec, over plain forwarding
(design-brief target: <= 50 us median). Root only; about half a minute.

Network: `line(n_routers=1, senders=1)`, i.e. s1 - r1 - rx on userspace OVS, with routerd on
r1 started from the run's `--config` plus a preinstalled flow
`--flow <rx>,7,build/mergespecs/sum.wasm,17,<port> --flow-params fanin=1`: the `sum` spec
forwards a round as soon as one datagram merged, so a diverted datagram goes through the
whole merge path (get_tag, new_state, merge, done, build, emit in Wasm; a new datagram from
r1) without waiting. routerd installs the flow's OVS selector itself.

A UDP client in s1's namespace sends 56-byte aggregate contributions (a 32-byte UDP payload,
mergespecs/README.md) carrying the Concast ID option (set with the IP_OPTIONS socket option),
one at a time, to a UDP echo in rx's namespace that answers s1 directly (a merged datagram's
source is r1), and times each round trip. Six paths, measured in alternating blocks so drift
and background load hit them alike:

  plain     selector removed: OVS forwards s1 -> rx itself (one OVS pass)
  reflect   selector installed, but a tc filter on the switch end of the CPU port sends every
            frame OVS diverts straight back into OVS (u32 + mirred ingress redirect): the data
            plane's CPU-port round trip alone, without routerd (which never sees the frame)
  pass-cpu  selector installed, group 8: OVS diverts to routerd, which has no flow (8) and
            writes the datagram back unchanged through the CPU port (a second OVS pass)
  merge-cpu selector installed, group 7: diverted, merged by the zero-delay spec, written back
            through the CPU port
  pass      as pass-cpu, but routerd sends straight out of r1's port toward rx (its default
            on OVS, `--egress ports`; switched per block with the management command
            `egress ports|cpu`)
  merge     as merge-cpu, out of the port: the concast hop as routerd runs by default
  pass-bp   with --busy-poll-us N: as pass, with routerd busy-polling N us after each turn
  merge-bp  the same for merge (routerd's window switched per block with `busy-poll N|0`)
  pass-ad   with --adaptive: as pass, with routerd's adaptive wait (`routerd --wait adaptive`:
            it sleeps until just before the next expected frame and spins through its window)
  merge-ad  the same for merge (switched per block with `wait adaptive|sleep`)

The concast hop's added latency is merge - plain (what the target names) = pass - plain
(diversion, routerd's AF_PACKET read and write) + merge - pass (the merge engine). Through the
CPU port it is merge-cpu - plain = reflect - plain (OVS's second pass: the data plane's share)
+ pass-cpu - reflect (routerd's I/O) + merge-cpu - pass-cpu (the engine).
With --busy-poll-us the -bp paths run beside the others in the same rounds, and routerd's
wake-up (`cpu_port_read_delay`: kernel's ring write to routerd's read) is shown per path.
Replies are never diverted (the selector matches only datagrams to rx). routerd's counters are
read per block to check that each block took the path it names.

Usage: python3 scripts/bench_latency.py [--samples 2000] [--block 100] [--busy-poll-us N] [--adaptive]
       [--paths plain,pass,merge,...] [--csv FILE] [--samples-csv FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from concast import procs, tools
from concast.controller import routerdmgmt as routerd
from concast.topologies import line

ROUTERD = tools.binary_or_build_path("concast-routerd")
SUM = tools.spec_or_build_path("sum")
PORT = 7007
GROUP_MERGE = 7
GROUP_PASS = 8
HOP_GOAL_US = 20  # issue #26 item 4: the OVS hop with direct egress (the design brief's target is 50)
GROUP_PLAIN = 9     # BMv2: no concast_flows entry, so forwarded by the P4 program alone
# Measured in this order (reversed every other round); -cpu: routerd writes through the CPU port.
PATHS = ("plain", "reflect", "pass-cpu", "merge-cpu", "pass", "merge")
BP_PATHS = ("pass-bp", "merge-bp")  # with --busy-poll-us
AD_PATHS = ("pass-ad", "merge-ad")  # with --adaptive

# Runs in rx's namespace: echo every contribution straight back to the sender (argv[2]),
# whatever the source (a merged datagram comes from the router), marking merged ones.
ECHO = r"""
import socket, sys
port, peer = int(sys.argv[1]), sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", port))
while True:
    data, (src, sport) = s.recvfrom(2048)
    if src != peer and len(data) >= 4:
        data = data[:3] + b"\x01" + data[4:]      # the spec's reserved byte: "came merged"
    s.sendto(data, (peer, sport))
"""

# Runs in s1's namespace. stdin: "GROUP N" per block; stdout: one JSON line per block with
# the round trips in microseconds (null = lost) and how many replies came back merged.
CLIENT = r"""
import json, socket, struct, sys, time
dst, port, gap = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
socks = {}
def sock(group):
    if group not in socks:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # Concast ID option 9E 06 G, then EOL padding to 8 bytes (IHL 7).
        s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, b"\x9e\x06" + struct.pack("!I", group) + b"\x00\x00")
        s.connect((dst, port))
        s.settimeout(0.25)
        socks[group] = s
    return socks[group]
seq = 0
ns = time.perf_counter_ns
for line in sys.stdin:
    group, n = (int(x) for x in line.split())
    s = sock(group)
    rtts, merged = [], 0
    for _ in range(n):
        seq = (seq + 1) & 0xFFFFFFFF
        msg = b"CA\x01\x00" + struct.pack("!IIIq", seq, 1, 0, seq)
        t0 = ns()
        s.send(msg)
        rtt = None
        try:
            while True:
                data = s.recv(2048)
                if len(data) >= 8 and struct.unpack("!I", data[4:8])[0] == seq:
                    rtt = (ns() - t0) / 1000.0
                    merged += data[3] == 1
                    break
        except socket.timeout:
            pass
        rtts.append(rtt)
        time.sleep(gap)
    print(json.dumps({"group": group, "rtts": rtts, "merged": merged}), flush=True)
"""


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
    return xs[k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=2000, help="round trips per path (default 2000)")
    ap.add_argument("--block", type=int, default=100, help="round trips per block (default 100)")
    ap.add_argument("--warmup", type=int, default=10, help="round trips thrown away after each switch")
    ap.add_argument("--gap-us", type=float, default=200, help="pause between round trips")
    ap.add_argument("--dataplane", choices=("ovs", "bmv2"), default="ovs",
                    help="r1's data plane (bmv2 needs p4c-bm2-ss and simple_switch_grpc on PATH; "
                         "it has no direct egress, so only the -cpu paths run)")
    ap.add_argument("--cpu-io", choices=("ring", "socket"), default="ring",
                    help="how routerd reads its CPU port (routerd --cpu-io; default ring)")
    ap.add_argument("--routerd-rt", type=int, default=0, metavar="PRIO",
                    help="run routerd under SCHED_FIFO at this priority (1-99; default 0 = normal): how much of "
                         "the hop is routerd waiting for a CPU")
    ap.add_argument("--busy-poll-us", type=int, default=0, metavar="N",
                    help="also measure pass-bp and merge-bp: routerd busy-polls N us after each turn "
                         "(routerd --busy-poll-us, switched per block; 1..10000; default 0 = not measured)")
    ap.add_argument("--adaptive", action="store_true",
                    help="also measure pass-ad and merge-ad: routerd's adaptive wait (routerd --wait adaptive, "
                         "switched per block); the other paths run with routerd's wait as started (sleep)")
    ap.add_argument("--paths", help="measure only these paths (comma-separated; plain is always measured)")
    ap.add_argument("--csv", type=Path, help="also write the summary CSV to this file")
    ap.add_argument("--samples-csv", type=Path, help="write every round trip (path,block,rtt_us)")
    args = ap.parse_args()
    if not routerd.busy_poll_in_range(args.busy_poll_us):
        print(f"bench_latency: --busy-poll-us must be 0..{routerd.BUSY_POLL_MAX_US}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("bench_latency: needs root (Mininet, OVS)", file=sys.stderr)
        return 2
    for p in (ROUTERD, SUM):
        if not p.exists():
            print(f"bench_latency: {p} missing (cargo build --release -p concast-routerd; "
                  "bash mergespecs/build.sh)", file=sys.stderr)
            return 2

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)

    load = open("/proc/loadavg").read().split()[:3]
    bmv2 = args.dataplane == "bmv2"
    paths = ("plain", "reflect", "pass-cpu", "merge-cpu") if bmv2 else PATHS
    if args.busy_poll_us and not bmv2:
        paths += BP_PATHS
    if args.adaptive and not bmv2:
        paths += AD_PATHS
    if args.paths:
        want = {"plain", *args.paths.split(",")}
        if want - set(paths):
            print(f"bench_latency: --paths: unknown or unavailable {sorted(want - set(paths))}; "
                  f"choose from {', '.join(paths)}", file=sys.stderr)
            return 2
        paths = tuple(p for p in paths if p in want)
    samples: dict[str, list[float]] = {p: [] for p in paths}
    lost = {k: 0 for k in samples}
    merged_replies = {k: 0 for k in samples}
    wrong_path = {k: 0 for k in samples}
    rows_raw: list[tuple[str, int, float]] = []
    block_p50: dict[str, list[float]] = {k: [] for k in samples}   # per round, same order
    read_delay: dict[str, dict[int, int]] = {k: {} for k in samples}  # routerd's wake-up, us bin -> frames
    # after the read, per turn: the router and engine (handle), sending what they wrote (send)
    turn_time: dict[str, dict[str, dict[int, int]]] = {part: {k: {} for k in samples} for part in ("handle", "send")}
    bp_hits = {k: 0 for k in samples}
    bp_spun_us = {k: 0 for k in samples}
    cpu_ns = {k: 0 for k in samples}  # routerd's threads on a CPU during the measured blocks
    ticker_ns = {k: 0 for k in samples}  # of which the engine's epoch ticker
    mine: list[subprocess.Popen] = []
    net = None
    t_start = time.monotonic()
    try:
        net = line(n_routers=1, senders=1, dataplane=args.dataplane).start()
        rx, s1 = net.ip("rx"), net.ip("s1")
        r1 = net["r1"]
        cpu_sw = r1.cpu_switch_iface
        subprocess.run(["tc", "qdisc", "add", "dev", cpu_sw, "clsact"], check=True, capture_output=True)
        reflect_on = ["tc", "filter", "add", "dev", cpu_sw, "egress", "pref", "10", "protocol", "ip", "u32",
                      "match", "u32", "0", "0", "action", "mirred", "ingress", "redirect", "dev", cpu_sw]
        reflect_off = ["tc", "filter", "del", "dev", cpu_sw, "egress", "pref", "10"]
        started, _ = net.start_concast(hold=30, hosts=(), routerd_args=(
            "--flow", f"{rx},{GROUP_MERGE},{SUM},17,{PORT}", "--flow-params", "fanin=1", "--cpu-io", args.cpu_io))
        if args.routerd_rt:
            # An experiment on where the hop's time goes: routerd (all its threads; a process this
            # script started) under SCHED_FIFO wakes without waiting behind other runnable tasks.
            subprocess.run(["chrt", "-a", "-f", "-p", str(args.routerd_rt), str(started["r1"].pid)], check=True)
        sock = net.routerd_socket("r1")
        tasks = Path(f"/proc/{started['r1'].pid}/task")

        def routerd_cpu_ns() -> dict[str, int]:
            """routerd's threads (its loop; the engine's epoch ticker, `concast-epoch`): ns on a
            CPU so far, by thread name."""
            total: dict[str, int] = {}
            for t in tasks.iterdir():
                try:
                    name = (t / "comm").read_text().strip()
                except OSError:
                    continue  # a thread that ended
                ns = procs.oncpu_ns(t)
                if ns is not None:
                    total[name] = total.get(name, 0) + ns
            return total
        if bmv2:
            # BMv2 diverts by (R, G) entry: group 8 diverted (routerd has no flow for it),
            # group 9 never; routerd installs group 7's entry itself (after clearing all).
            r1.add_flow(rx, GROUP_PASS)
        net.daemons.start("rx", [sys.executable, "-c", ECHO, str(PORT), s1], "echo", netns=net.netns("rx"))
        client = subprocess.Popen(["ip", "netns", "exec", net.netns("s1"), sys.executable, "-u", "-c", CLIENT,
                                   rx, str(PORT), str(args.gap_us / 1e6)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  start_new_session=True)
        mine.append(client)
        time.sleep(0.3)

        def block(group: int, n: int) -> dict:
            client.stdin.write(f"{group} {n}\n")
            client.stdin.flush()
            line_ = client.stdout.readline()
            if not line_:
                raise RuntimeError("the UDP client in s1 died")
            return json.loads(line_)

        def switch(command: str) -> None:
            """One of routerd's switches (egress, busy-poll, wait); its refusal ends the run."""
            answer = routerd.query(sock, command)
            if "error" in answer:
                raise RuntimeError(f"routerd: {answer['error']}")

        selector_on, reflecting, egress, busy, wait = True, False, "ports", 0, "sleep"
        rounds = -(-args.samples // args.block)
        for rnd in range(rounds):
            order = list(paths)
            if rnd % 2:
                order.reverse()
            for path in order:
                want_egress = "cpu" if path.endswith("-cpu") else "ports"
                if not bmv2 and want_egress != egress:
                    switch(f"egress {want_egress}")
                    egress = want_egress
                want_busy = args.busy_poll_us if path.endswith("-bp") else 0
                if want_busy != busy:
                    switch(routerd.busy_poll_command(want_busy))
                    busy = want_busy
                want_wait = "adaptive" if path.endswith("-ad") else "sleep"
                if not bmv2 and want_wait != wait:
                    switch(f"wait {want_wait}")
                    wait = want_wait
                want_on = path != "plain"
                if not bmv2 and want_on != selector_on:
                    if want_on:
                        r1.add_selector(rx, 17, PORT)
                    else:
                        r1.remove_selector(rx, 17, PORT)
                    selector_on = want_on
                if (path == "reflect") != reflecting:
                    subprocess.run(reflect_off if reflecting else reflect_on, check=True, capture_output=True)
                    reflecting = not reflecting
                group = GROUP_PASS if path.startswith("pass") else GROUP_MERGE
                if bmv2 and path == "plain":
                    group = GROUP_PLAIN
                block(group, args.warmup)
                c0, d0 = routerd.query(sock)["counters"], routerd.query(sock, "read-delay")
                t0 = routerd_cpu_ns()
                res = block(group, args.block)
                t1 = routerd_cpu_ns()
                cpu_ns[path] += sum(t1.values()) - sum(t0.values())
                ticker_ns[path] += t1.get("concast-epoch", 0) - t0.get("concast-epoch", 0)
                c1, d1 = routerd.query(sock)["counters"], routerd.query(sock, "read-delay")
                for into, b0, b1 in ((read_delay[path], d0, d1),
                                     *((turn_time[part][path], d0.get(part, {}), d1.get(part, {}))
                                       for part in ("handle", "send"))):
                    before = dict(b0.get("bins", []))
                    for us, k in b1.get("bins", []):
                        if k - before.get(us, 0):
                            into[us] = into.get(us, 0) + k - before.get(us, 0)
                for k in ("busy_poll", "adaptive"):  # only one of the two spins in a block
                    bp_hits[path] += c1.get(f"{k}_hits", 0) - c0.get(f"{k}_hits", 0)
                    bp_spun_us[path] += c1.get(f"{k}_spun_us", 0) - c0.get(f"{k}_spun_us", 0)
                got = [r for r in res["rtts"] if r is not None]
                samples[path] += got
                block_p50[path].append(statistics.median(got) if got else float("nan"))
                rows_raw += [(path, rnd, r) for r in got]
                lost[path] += len(res["rtts"]) - len(got)
                merged_replies[path] += res["merged"]
                d_in = c1["frames_in"] - c0["frames_in"]
                d_merged = c1["merged_in"] - c0["merged_in"]
                d_pass = c1["passed_through"] - c0["passed_through"]
                d_egress = c1.get("egress_sent", 0) - c0.get("egress_sent", 0)
                n = args.block
                expect = {"plain": (0, 0, 0, 0), "reflect": (0, 0, 0, 0),
                          "pass-cpu": (n, 0, n, 0), "merge-cpu": (n, n, 0, 0),
                          "pass": (n, 0, n, n), "merge": (n, n, 0, n),
                          "pass-bp": (n, 0, n, n), "merge-bp": (n, n, 0, n),
                          "pass-ad": (n, 0, n, n), "merge-ad": (n, n, 0, n)}[path]
                if (d_in, d_merged, d_pass, d_egress) != expect:
                    wrong_path[path] += 1
        stats_end = routerd.query(sock)
    finally:
        for p in mine:
            if p.poll() is None:
                p.kill()
            p.wait()
        if net is not None:
            net.stop()
    elapsed = time.monotonic() - t_start
    load_after = open("/proc/loadavg").read().split()[:3]

    summary = {}
    for path, xs in samples.items():
        summary[path] = {"n": len(xs), "p50": statistics.median(xs) if xs else float("nan"),
                         "p90": pct(xs, 90), "p99": pct(xs, 99), "mean": statistics.fmean(xs) if xs else float("nan"),
                         "lost": lost[path], "merged_replies": merged_replies[path],
                         "blocks_off_path": wrong_path[path]}
    where = "BMv2 (simple_switch_grpc)" if bmv2 else "userspace OVS"
    print(f"one concast hop (s1 - r1 - rx, {where}, routerd on r1), {args.block}-sample blocks "
          f"alternating, {args.gap_us:g} us between round trips, {elapsed:.0f} s")
    print(f"load average before {' '.join(load)}, after {' '.join(load_after)}")
    print(f"{'path':<9} {'n':>5} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8} {'mean us':>8} {'lost':>5} "
          f"{'merged':>6} {'off-path blocks':>15}")
    for path, s in summary.items():
        print(f"{path:<9} {s['n']:>5} {s['p50']:>8.1f} {s['p90']:>8.1f} {s['p99']:>8.1f} {s['mean']:>8.1f} "
              f"{s['lost']:>5} {s['merged_replies']:>6} {s['blocks_off_path']:>15}")
    med = {k: v["p50"] for k, v in summary.items()}

    def paired(a: str, b: str) -> float:
        """Median over rounds of (block median of a - block median of b): drift cancels."""
        return statistics.median(x - y for x, y in zip(block_p50[a], block_p50[b]))

    def diff(a: str, b: str) -> str:
        if a not in med or b not in med:
            return "n/a (not measured)"
        return f"{med[a] - med[b]:+.1f} us (paired {paired(a, b):+.1f})"
    hop = "merge-cpu" if bmv2 else "merge"
    verdict = "meets" if hop in med and med[hop] - med["plain"] <= 50 else "above"
    if not bmv2 and "merge" in med:
        print(f"concast hop, routerd's default direct egress (merge - plain): {diff('merge', 'plain')} "
              f"[target <= 50 us: {verdict}]")
        print(f"  = diversion and routerd I/O (pass - plain) {diff('pass', 'plain')}"
              f" + merge engine (merge - pass) {diff('merge', 'pass')}")
        hop = med["merge"] - med["plain"]
        print(f"issue #26 goal, concast hop with direct egress <= {HOP_GOAL_US} us over plain OVS "
              f"(routerd --cpu-io {args.cpu_io}{f', SCHED_FIFO {args.routerd_rt}' if args.routerd_rt else ''}): {hop:+.1f} us, {hop / HOP_GOAL_US:.2f} of the goal: "
              f"{'met' if hop <= HOP_GOAL_US else 'not met'}")
    if "merge-cpu" in med:
        print(f"concast hop, writing back through the CPU port (merge-cpu - plain): {diff('merge-cpu', 'plain')}"
              + (f" [target <= 50 us: {verdict}]" if bmv2 else ""))
        print(f"  = the data plane's second pass through the CPU port (reflect - plain) {diff('reflect', 'plain')}"
              f" + routerd I/O (pass-cpu - reflect) {diff('pass-cpu', 'reflect')}"
              f" + merge engine (merge-cpu - pass-cpu) {diff('merge-cpu', 'pass-cpu')}")
        if not bmv2:
            print(f"direct egress saves (merge-cpu - merge) {diff('merge-cpu', 'merge')}")
    print(f"routerd at the end: {json.dumps(stats_end['counters'])}")
    if args.busy_poll_us and not bmv2 and "merge-bp" in med:
        bp = med["merge-bp"] - med["plain"]
        print(f"issue #26 goal with busy-poll {args.busy_poll_us} us (merge-bp - plain): {diff('merge-bp', 'plain')}, "
              f"{bp / HOP_GOAL_US:.2f} of the goal: {'met' if bp <= HOP_GOAL_US else 'not met'}")
        print(f"  = diversion and routerd I/O (pass-bp - plain) {diff('pass-bp', 'plain')}"
              f" + merge engine (merge-bp - pass-bp) {diff('merge-bp', 'pass-bp')}")
        print(f"  busy-poll saves (merge - merge-bp) {diff('merge', 'merge-bp')}, (pass - pass-bp) {diff('pass', 'pass-bp')}")
    if args.adaptive and not bmv2 and "merge-ad" in med:
        ad = med["merge-ad"] - med["plain"]
        print(f"issue #26 goal with the adaptive wait (merge-ad - plain): {diff('merge-ad', 'plain')}, "
              f"{ad / HOP_GOAL_US:.2f} of the goal: {'met' if ad <= HOP_GOAL_US else 'not met'}")
        print(f"  = diversion and routerd I/O (pass-ad - plain) {diff('pass-ad', 'plain')}"
              f" + merge engine (merge-ad - pass-ad) {diff('merge-ad', 'pass-ad')}")
        print(f"  the adaptive wait saves (merge - merge-ad) {diff('merge', 'merge-ad')}, (pass - pass-ad) {diff('pass', 'pass-ad')}")
    print("routerd's wake-up per path (cpu_port_read_delay of the measured blocks' frames, 1 us bins), "
          "busy-poll or adaptive-wait turns that caught frames, time spent spinning and routerd's CPU time per round trip:")
    def quantile(bins: dict[int, int], p: float) -> int:
        """The 1 us bin holding quantile p (-1: no frame)."""
        rank, seen = max(1, -(-sum(bins.values()) * p // 1)), 0
        for us in sorted(bins):
            seen += bins[us]
            if seen >= rank:
                return us
        return -1

    for path, bins in read_delay.items():
        n = sum(bins.values())
        if not n:
            continue

        def q(p: float) -> int:
            return quantile(bins, p)
        rts = max(1, summary[path]["n"])
        summary[path].update(read_delay_p50_us=q(0.5), read_delay_p90_us=q(0.9), busy_poll_hits=bp_hits[path],
                             busy_poll_spun_us_per_rt=bp_spun_us[path] / rts)
        h, snd = turn_time["handle"][path], turn_time["send"][path]
        summary[path].update(handle_p50_us=quantile(h, 0.5), send_p50_us=quantile(snd, 0.5))
        print(f"  {path:<9} frames {n:>5}  p50 {q(0.5):>4} us  p90 {q(0.9):>4} us  hits {bp_hits[path]:>5}  "
              f"spun {bp_spun_us[path] / rts:.0f} us, CPU {cpu_ns[path] / 1000 / rts:.1f} us "
              f"(epoch ticker {ticker_ns[path] / 1000 / rts:.1f}) per round trip; after the read, per turn: "
              f"router+engine p50 {quantile(h, 0.5)} (p90 {quantile(h, 0.9)}) us, "
              f"send p50 {quantile(snd, 0.5)} (p90 {quantile(snd, 0.9)}) us")
    for path in summary:
        summary[path]["routerd_cpu_us_per_rt"] = cpu_ns[path] / 1000 / max(1, summary[path]["n"])
    if "cpu_port_read_delay" in stats_end:
        print(f"routerd's CPU port ({stats_end.get('cpu_io')}): kernel ring write to routerd's read, every diverted "
              f"frame of the run: {json.dumps(stats_end['cpu_port_read_delay'])}")
    lines = ["path,n,p50_us,p90_us,p99_us,mean_us,lost,merged_replies,blocks_off_path,p50_minus_plain_us,"
             "paired_minus_plain_us,busy_poll_us,read_delay_p50_us,read_delay_p90_us,busy_poll_hits,"
             "busy_poll_spun_us_per_rt,routerd_cpu_us_per_rt,handle_p50_us,send_p50_us"]
    for path, s in summary.items():
        lines.append(f"{path},{s['n']},{s['p50']:.1f},{s['p90']:.1f},{s['p99']:.1f},{s['mean']:.1f},"
                     f"{s['lost']},{s['merged_replies']},{s['blocks_off_path']},"
                     f"{s['p50'] - summary['plain']['p50']:.1f},{paired(path, 'plain'):.1f},"
                     f"{args.busy_poll_us if path.endswith('-bp') else 0},{s.get('read_delay_p50_us', '')},"
                     f"{s.get('read_delay_p90_us', '')},{s.get('busy_poll_hits', '')},"
                     f"{s.get('busy_poll_spun_us_per_rt', 0):.0f},{s['routerd_cpu_us_per_rt']:.1f},"
                     f"{s.get('handle_p50_us', '')},{s.get('send_p50_us', '')}")
    print("# csv")
    print("\n".join(lines))
    if args.csv:
        args.csv.write_text("\n".join(lines) + "\n")
    if args.samples_csv:
        args.samples_csv.write_text("path,block,rtt_us\n" + "".join(f"{p},{b},{r:.1f}\n" for p, b, r in rows_raw))
    ok = (all(summary[m]["merged_replies"] == summary[m]["n"] for m in paths if m.startswith("merge"))
          and all(s["blocks_off_path"] == 0 for s in summary.values()))
    if not ok:
        print("warning: some blocks did not take the path they name (see merged / off-path blocks)")
    return 0 if ok else 1


if __name__ == "__main__":
    from concast import provenance
    sys.exit(provenance.main_in_run("bench-latency", main))
