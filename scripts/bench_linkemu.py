#!/usr/bin/env python3
"""concast-linkemu's speed and accuracy, next to a plain veth pair measured in the same run
(design-brief target: delay within 5 %, loss within 1 point, rate within 5 %, jitter p99 <=
200 us). Root only; about a minute.

Everything happens in one namespace this script creates and deletes: emulated links join
TAPs a<i> and b<i>, the peer joins veth ends va<i> and vb<i>. `linkemu-bench` (built with the
emulator) sends raw Ethernet frames with AF_PACKET on the a-ends and receives on the b-ends.

  rate     64-byte frames as fast as one sender process can, round robin over 1 and 16 links
           with zero delay; frames/s delivered (the b-ends' rx_packets) over the sending time
  cpu      the emulator's CPU time per frame in those windows (its threads' schedstat run
           time over the frames delivered), and that of the TAPs' NAPI kernel threads
           (`napi/<tap>-<id>`, present with --rx-mode napi): the receiving stack's share
  jitter   one 100-byte timestamped frame per ms for 5 s over a link with 5 ms delay (and 0 ms);
           one-way latency minus the configured delay, p50 and p99
  accuracy delay (the probe's median), loss 5 % (probe frames lost), rate 10 Mbit/s
           (1000-byte frames offered at full speed; rx bytes over 3 s)

Usage: python3 scripts/bench_linkemu.py [--quick] [--csv FILE] [--rx-mode napi|inline] [--spin-us N]
                                       [--io uring|syscalls]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from concast import procs, tools
from concast.netns import Scratch
from concast.topologies.experiments.ackstudy.fidelity import read_cpu_times
from concast.topologies.links import LinkEmulator

# issue #26: the emulator's 64-byte frame rate over one link against a veth pair's
VETH_RATIO_GOAL = 0.8
TOOL = tools.binary_or_build_path("linkemu-bench")


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120).stdout


def run_ns(tids: list[str]) -> int:
    """CPU time (ns) the given /proc task directories have run (a thread that ended: 0)."""
    return sum(procs.oncpu_ns(t) or 0 for t in tids)


def machine_busy_ns() -> int:
    """CPU time every CPU of the machine has spent running (user, nice, system, irq, softirq;
    not idle, iowait or the hypervisor's steal): the whole cost of a frame, whoever pays it
    (sender, softirqs, the emulator, the receiving stack)."""
    t = read_cpu_times()
    busy = t["user"] + t["nice"] + t["system"] + t["irq"] + t["softirq"]
    return busy * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def emulator_tasks(pid: int) -> list[str]:
    return [str(p) for p in Path(f"/proc/{pid}/task").iterdir()]


def napi_tasks(ifaces: set[str]) -> list[str]:
    """The NAPI kernel threads of these devices (comm `napi/<dev>-<napi id>`)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            comm = (p / "comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith("napi/") and comm[5:].rsplit("-", 1)[0] in ifaces:
            out.append(str(p))
    return out


class Bench:
    def __init__(self, scratch: Scratch, ns: str, emu: LinkEmulator) -> None:
        self.scratch, self.ns, self.emu = scratch, ns, emu
        self.links: list[int] = []
        self.veths: list[int] = []

    def ensure_links(self, n: int) -> None:
        for i in range(len(self.links), n):
            self.emu.add(f"l{i}", {"netns": self.ns, "name": f"a{i}"},
                         {"netns": self.ns, "name": f"b{i}"})
            sh("ip", "-n", self.ns, "link", "set", f"a{i}", "up")
            sh("ip", "-n", self.ns, "link", "set", f"b{i}", "up")
            self.links.append(i)
        for i in range(len(self.veths), n):
            self.scratch.veth(self.ns, f"va{i}", self.ns, f"vb{i}")
            self.veths.append(i)

    def rx(self, iface: str) -> tuple[int, int]:
        st = json.loads(sh("ip", "-n", self.ns, "-s", "-j", "link", "show", iface))[0]["stats64"]["rx"]
        return st["packets"], st["bytes"]

    def tool(self, *args: str) -> dict:
        return json.loads(sh("ip", "netns", "exec", self.ns, str(TOOL), *args))

    def rate(self, prefix: str, n: int, seconds: float, size: int = 64,
             cpu: dict | None = None) -> tuple[float, float]:
        """(frames/s, bits/s of frames) delivered to the <prefix>b-ends. With `cpu`, also the
        emulator's and the NAPI threads' CPU ns per delivered frame, into cpu["emu"/"napi"],
        and the whole machine's: busy ns per frame and cores busy (cpu["machine"/"cores"])."""
        rx_ends = [f"{prefix}b{i}" for i in range(n)]
        emu_t = emulator_tasks(self.emu.pid) if cpu is not None else []
        napi_t = napi_tasks({f"{e}{i}" for e in "ab" for i in range(n)}) if cpu is not None else []
        blast = subprocess.Popen(["ip", "netns", "exec", self.ns, str(TOOL), "blast", "--ifaces",
                                  ",".join(f"{prefix}a{i}" for i in range(n)),
                                  "--duration", str(seconds + 1.0), "--size", str(size)],
                                 stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.5)      # counted while saturated: not the start, not the drain
            t0, before = time.monotonic(), [self.rx(i) for i in rx_ends]
            c0 = (run_ns(emu_t), run_ns(napi_t), machine_busy_ns())
            time.sleep(seconds)
            c1 = (run_ns(emu_t), run_ns(napi_t), machine_busy_ns())
            t1, after = time.monotonic(), [self.rx(i) for i in rx_ends]
        finally:
            blast.wait()
        frames = sum(a[0] - b[0] for a, b in zip(after, before))
        nbytes = sum(a[1] - b[1] for a, b in zip(after, before))
        if cpu is not None and frames:
            cpu["emu"] = (c1[0] - c0[0]) / frames
            cpu["napi"] = (c1[1] - c0[1]) / frames
            cpu["napi_threads"] = len(napi_t)
            cpu["machine"] = (c1[2] - c0[2]) / frames
            cpu["cores"] = (c1[2] - c0[2]) / 1e9 / (t1 - t0)
        return frames / (t1 - t0), nbytes * 8 / (t1 - t0)

    def probe(self, tx: str, rx: str, count: int) -> dict:
        return self.tool("probe", "--tx", tx, "--rx", rx, "--count", str(count), "--interval-us", "1000")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="shorter runs (a smoke test)")
    p.add_argument("--csv", help="write the figures here too")
    p.add_argument("--realtime", type=int, default=None,
                   help="the emulator's SCHED_FIFO priority (0: normal; default: links.py's)")
    p.add_argument("--rx-mode", choices=("napi", "inline"), default=None,
                   help="where the receiving stack runs (the daemon's --rx-mode; default: its own)")
    p.add_argument("--spin-us", type=int, default=None,
                   help="the daemon's --spin-us (longest poll before it sleeps; default: its own)")
    p.add_argument("--io", choices=("uring", "syscalls"), default=None,
                   help="how the daemon moves TAP frames (its --io; default: its own)")
    p.add_argument("--tap-qdisc", default=None, metavar="QDISC",
                   help="experiment: replace the TAPs' root qdisc (e.g. noqueue, a veth's default)")
    p.add_argument("--rps", metavar="HEXMASK", default=None,
                   help="experiment: write this CPU mask to every TAP's rx-0/rps_cpus")
    p.add_argument("--emu-cpu", type=int, default=None,
                   help="experiment: pin the emulator to this CPU (with --rps: keep them apart)")
    args = p.parse_args()
    if os.geteuid() != 0:
        print("bench_linkemu: needs root (namespaces, TAPs)", file=sys.stderr)
        return 2
    if not TOOL.exists():
        print(f"bench_linkemu: {TOOL} missing: run make build", file=sys.stderr)
        return 2
    secs = 1.0 if args.quick else 3.0
    probes = 1000 if args.quick else 5000
    scratch = Scratch()
    ns = scratch.add(f"linkemu-bench-{os.getpid()}")
    rt = {} if args.realtime is None else {"realtime": args.realtime}
    if args.rx_mode:
        rt["rx_mode"] = args.rx_mode
    if args.spin_us is not None:
        rt["spin_us"] = args.spin_us
    if args.io:
        rt["io"] = args.io
    emu = LinkEmulator(tempfile.mkdtemp(prefix="bench-linkemu-"), f"b{os.getpid()}", **rt)
    rows: list[tuple[str, float, float | None, str]] = []

    def row(what: str, value: float, peer: float | None, unit: str) -> None:
        rows.append((what, value, peer, unit))
        ratio = f"  ratio {value / peer:.2f}" if peer else ""
        peer_s = f"  veth {peer:,.1f}" if peer is not None else ""
        print(f"{what:<44} {value:>14,.1f} {unit}{peer_s}{ratio}", flush=True)

    try:
        emu.start()
        b = Bench(scratch, ns, emu)
        b.ensure_links(16)
        if args.emu_cpu is not None:
            os.sched_setaffinity(emu.pid, {args.emu_cpu})
            for t in emulator_tasks(emu.pid):
                os.sched_setaffinity(int(Path(t).name), {args.emu_cpu})
        if args.tap_qdisc:
            for d in (f"{e}{i}" for e in "ab" for i in range(16)):
                sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", d, "root", args.tap_qdisc)
            print(f"qdisc {args.tap_qdisc} on the TAPs", flush=True)
        if args.rps:
            devs = " ".join(f"{e}{i}" for e in "ab" for i in range(16))
            sh("ip", "netns", "exec", ns, "sh", "-c",
               f"for d in {devs}; do echo {args.rps} > /sys/class/net/$d/queues/rx-0/rps_cpus; done")
            print(f"rps_cpus {args.rps} on the TAPs", flush=True)
        st = emu.call("stats")
        got_rx = sorted({e["rx"] for l in st["links"] for e in (l["a"], l["b"])})
        print(f"TAP receive mode: {', '.join(got_rx)}", flush=True)
        print(f"TAP I/O: {', '.join(sorted(set(st.get('io', ['?']))))}", flush=True)
        for n in (1, 16):
            cpu: dict = {}
            veth_cpu: dict = {}
            fps, _ = b.rate("", n, secs, cpu=cpu)
            veth, _ = b.rate("v", n, secs, cpu=veth_cpu)
            row(f"frames/s through {n} link(s), 64 B, no delay", fps, veth, "frames/s")
            if n == 1 and veth:
                print(f"issue #26 goal, link emulator >= {VETH_RATIO_GOAL} of a bare veth pair in frames/s "
                      f"(64 B, 1 link): {fps / veth:.2f}: {'met' if fps / veth >= VETH_RATIO_GOAL else 'not met'}",
                      flush=True)
            if cpu and veth_cpu:
                # the bound on 2 cores: frames/s is at most cores busy / machine CPU per frame
                # (machine-wide: other work on the machine counts too, so read it quiet)
                row(f"machine CPU per frame, {n} link(s)", cpu["machine"] / 1000, veth_cpu["machine"] / 1000, "us")
                row(f"cores busy, {n} link(s)", cpu["cores"], veth_cpu["cores"], "cores")
            if cpu:
                row(f"emulator CPU per frame, {n} link(s)", cpu["emu"] / 1000, None, "us")
                row(f"NAPI threads' CPU per frame, {n} link(s) ({cpu['napi_threads']} threads)",
                    cpu["napi"] / 1000, None, "us")
        for delay_ms in (0, 5):
            emu.set("l0", params={"delay": f"{delay_ms}ms"})
            emu.call("stats", reset_lateness=True)
            got = b.probe("a0", "b0", probes)
            late = emu.call("stats")
            peer = b.probe("va0", "vb0", probes)
            base = delay_ms * 1000
            row(f"added latency p50, delay {delay_ms} ms", got["p50_us"] - base, peer["p50_us"], "us")
            row(f"added latency p99, delay {delay_ms} ms", got["p99_us"] - base, peer["p99_us"], "us")
            if delay_ms:
                row("delay achieved / configured (median)", got["p50_us"] / base, None, "")
                # The emulator's own share: how late it wrote frames against their due time.
                row("emulator lateness p50, delay 5 ms", late["late_p50_us"] or 0, None, "us")
                row("emulator lateness p99, delay 5 ms", late["late_p99_us"] or 0, None, "us")
        emu.set("l0", params={"delay": 0, "loss": 5})
        got = b.probe("a0", "b0", probes * 2)
        row("loss achieved, configured 5 %", 100 * (1 - got["received"] / got["sent"]), None, "%")
        emu.set("l0", params={"loss": 0, "bw": 10, "max_queue_size": 100})
        _, bps = b.rate("", 1, secs, size=1000)
        row("rate achieved / configured 10 Mbit/s", bps / 10e6, None, "")
    finally:
        emu.stop()
        scratch.close()
    if args.csv:
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["what", "value", "veth", "unit"])
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    from concast import provenance
    sys.exit(provenance.main_in_run("bench-linkemu", main))
