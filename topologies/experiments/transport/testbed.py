"""The network of `concast exp transport`: two Mininet hosts on one link, an HTB bottleneck
each way, random loss from nftables at both hosts' input, and the servers of every protocol.
With a delay, the link is the project's emulated link (concast-linkemu, `topologies/links.py`;
this kernel has no netem) and carries only the delay; rate and loss stay HTB's and nftables'.

Host names carry this process's id so that concurrent networks on the machine do not meet;
`stop()` ends only what this testbed started (by PID) and the Mininet network (net.stop()).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from concast import tools

from .settings import BULK_PORT, MTP_PORT, TCP_PORT, say


class Testbed:
    def __init__(self, rate_mbit: float, queue_ms: float, work: Path, seed: int = 1,
                 delay_ms: float = 0.0) -> None:
        self.rate, self.queue_ms, self.work, self.seed = rate_mbit, queue_ms, work, seed
        self.delay_ms = delay_ms
        self.tag = os.getpid() % 100000
        self.cn, self.sn = f"tc{self.tag}", f"ts{self.tag}"
        self.net = None
        self.emu = None
        self.procs: list[subprocess.Popen] = []

    def start(self, objects: dict[str, int]) -> "Testbed":
        from mininet.link import Link
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        setLogLevel("error")
        self.net = Mininet(topo=None, build=False, controller=None)
        c = self.net.addHost(self.cn, ip="10.78.0.1/24")
        s = self.net.addHost(self.sn, ip="10.78.0.2/24")
        if self.delay_ms > 0:
            from concast.topologies.links import EmuLink, LinkEmulator
            self.work.mkdir(parents=True, exist_ok=True)
            self.emu = LinkEmulator(self.work, f"ctx{self.tag}").start()
            # the emulator's own queue is not the bottleneck: HTB's is
            self.net.addLink(c, s, cls=EmuLink, emu=self.emu, delay=f"{self.delay_ms}ms",
                             max_queue_size=10000)
        else:
            self.net.addLink(c, s, cls=Link)
        self.net.build()
        self.net.start()
        for h in (c, s):
            self._bottleneck(h)
        self.www = self.work / "www"
        self.www.mkdir(parents=True, exist_ok=True)
        self.sha256 = {}
        import hashlib
        for name, size in objects.items():
            blob = random.Random(f"{self.seed}-{name}").randbytes(size)
            (self.www / name).write_bytes(blob)
            self.sha256[name] = hashlib.sha256(blob).hexdigest()
        self.server_ip = s.IP()
        self._serve()
        say(f"{self.cn} -- {self.sn}: HTB {self.rate} Mbit/s each way, {self.queue_ms} ms of "
            f"queue, {self.delay_ms} ms delay each way; objects {objects}")
        return self

    @property
    def client(self):
        return self.net[self.cn]

    @property
    def server(self):
        return self.net[self.sn]

    def _bottleneck(self, h) -> None:
        dev = h.defaultIntf().name
        pkts = max(int(self.rate * 1e6 / 8 * self.queue_ms / 1e3 / 1500), 5)
        for cmd in (f"tc qdisc add dev {dev} root handle 1: htb default 10",
                    f"tc class add dev {dev} parent 1: classid 1:10 htb rate {self.rate}mbit "
                    f"ceil {self.rate}mbit",
                    f"tc qdisc add dev {dev} parent 1:10 handle 10: pfifo limit {pkts}"):
            out = h.cmd(cmd + " 2>&1; echo rc=$?")
            if "rc=0" not in out:
                raise RuntimeError(f"{h.name}: {cmd}: {out}")

    def set_loss(self, pct: float) -> None:
        """`pct` % of TCP and UDP arriving at either host is dropped (both directions lose)."""
        per_mille = round(pct * 10)
        for h in (self.client, self.server):
            h.cmd("nft delete table inet ctexp 2>/dev/null")
            if per_mille:
                rule = (f"add table inet ctexp\n"
                        f"add chain inet ctexp input {{ type filter hook input priority 0; policy accept; }}\n"
                        f"add rule inet ctexp input meta l4proto {{ tcp, udp }} "
                        f"numgen random mod 1000 < {per_mille} counter drop\n")
                p = h.popen(["nft", "-f", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
                _, err = p.communicate(rule, timeout=20)
                if p.returncode:
                    raise RuntimeError(f"{h.name}: nft: {err}")

    def dropped(self) -> int:
        n = 0
        for h in (self.client, self.server):
            words = h.cmd("nft list table inet ctexp 2>/dev/null").split()
            n += sum(int(b) for a, b in zip(words, words[1:]) if a == "packets")
        return n

    def _serve(self) -> None:
        logs = self.work / "logs"
        logs.mkdir(exist_ok=True)
        s = self.server
        self.procs.append(s.popen([str(tools.rust_binary("mtping")), "serve", "--listen", f"0.0.0.0:{MTP_PORT}",
                                   "--dir", str(self.www)],
                                  stdout=open(logs / "mtping-serve.log", "w"), stderr=subprocess.STDOUT))
        self.procs.append(s.popen([sys.executable, "-m", "concast.topologies.experiments.transport.tcpobj",
                                   "serve", "--dir", str(self.www), "--port", str(TCP_PORT)],
                                  stdout=open(logs / "tcpobj-serve.log", "w"), stderr=subprocess.STDOUT))
        for _ in range(100):
            if f":{TCP_PORT} " in s.cmd("ss -tlnH"):
                return
            time.sleep(0.05)
        raise RuntimeError("the TCP object server did not start")

    def run_json(self, host, argv: list[str], timeout: float) -> dict | None:
        """Runs a client to completion; its JSON line, or None if it failed or hung."""
        p = host.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            return None
        finally:
            if p.poll() is None:        # interrupted: the client goes with the run
                p.kill()
                p.wait()
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if p.returncode or not lines:
            say(f"{argv[0]} failed: {err.strip()[-300:]}")
            return None
        return json.loads(lines[-1])

    def mtp_get(self, name: str, count: int, limit: float, cc: str = "mtp") -> dict | None:
        return self.run_json(self.client, [str(tools.rust_binary("mtping")), "get", f"{self.server_ip}:{MTP_PORT}",
                                           "--name", name, "--count", str(count), "--limit", str(limit),
                                           # the cell's limit governs (its stop counts the bytes
                                           # in order): a transaction must not expire before it
                                           # (MTP's default expire timer is 30 s)
                                           "--expire", str(limit + 30), "--cc", cc],
                             limit + 30)

    def tcp_get(self, name: str, count: int, limit: float, cc: str) -> dict | None:
        return self.run_json(self.client, [sys.executable, "-m", "concast.topologies.experiments.transport.tcpobj",
                                           "get", "--host", self.server_ip, "--port", str(TCP_PORT),
                                           "--name", name, "--count", str(count), "--limit", str(limit),
                                           "--cc", cc],
                             limit + 30)

    def bulk_send(self, nbytes: int, limit: float) -> dict | None:
        """Part 1's Bulk moves `nbytes` (concast-perf's own pseudo-random bytes, hashed at both
        ends) in one session; goodput is the receiver's."""
        perf = str(tools.rust_binary("concast-perf"))
        srv = self.server.popen([perf, "server", "--listen", f"0.0.0.0:{BULK_PORT}", "--composite", "Bulk",
                                 "--hash", "--idle", "10", "--flows", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(0.3)
            sent = self.run_json(self.client, [perf, "client", "--to", f"{self.server_ip}:{BULK_PORT}",
                                               "--composite", "Bulk", "--bytes", str(nbytes)], limit + 30)
            try:
                out, _ = srv.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                srv.kill()
                out, _ = srv.communicate()
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()
        got = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        if sent is None or not got:
            return None
        return {"sent": sent, "received": got[-1]}

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.net:
            self.net.stop()
        if self.emu:
            self.emu.stop()
