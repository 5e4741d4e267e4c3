"""The network of `concast exp mplex`: the dumbbell, its daemons, the web server, one phase
of downloads with captures, and what it counted."""
from __future__ import annotations

import collections
import hashlib
import random
import subprocess
import sys
import time
from pathlib import Path

from concast import tools
from concast.netmodel import naming
from concast.topologies import dumbbell
from concast.topologies.capture import Capture
from concast.topologies.experiments import pcapread

from .accounting import ack_accounting
from .settings import (FETCH, HOLD_S, HTTP_PORT, LINK_TITLES, LINKS, NFLOG_GROUP, Download,
                       Phase, Settings, say)


class _RootNode:
    """Runs commands in the root namespace, where the router-side veths are."""
    name = "root"

    def popen(self, argv, **kw):
        return subprocess.Popen(argv, **kw)


class Testbed:
    """dumbbell(clients) on OVS with routerd on both routers, hostd on every host and a web
    server on sv. `stop()` ends everything it started."""

    def __init__(self, settings: Settings, run_dir: Path | None = None) -> None:
        self.s = settings
        self.run_dir = run_dir
        self.net = None
        self.web = None
        self.clients = [f"c{i}" for i in range(1, settings.clients + 1)]

    def start(self) -> "Testbed":
        plane = {"ovs": "Open vSwitch", "bmv2": "BMv2 (P4)",
                 "linux": "Linux namespaces (kernel forwarding, tc)"}[self.s.dataplane]
        say(f"starting dumbbell(clients={self.s.clients}) on {plane}")
        self.net = dumbbell(clients=self.s.clients, dataplane=self.s.dataplane).start(
            run_dir=self.run_dir)
        net = self.net
        say("starting routerd on r1, r2 and hostd on every host")
        net.start_concast(hold=float(HOLD_S), hostd_args=("--join-retry-ms", "300"))
        self.sv = net.ip("sv")
        self.serve_page()
        return self

    def serve_page(self) -> None:
        www = self.net.run_dir / "www"
        www.mkdir(exist_ok=True)
        page = random.Random(self.s.size).randbytes(self.s.size)
        (www / "page.bin").write_bytes(page)
        self.sha256 = hashlib.sha256(page).hexdigest()
        (self.net.run_dir / "logs").mkdir(exist_ok=True)
        log = open(self.net.run_dir / "logs" / "sv-http.log", "w")
        self.web = self.net["sv"].popen(
            [sys.executable, "-m", "http.server", str(HTTP_PORT), "--bind", self.sv,
             "--directory", str(www)], stdout=log, stderr=subprocess.STDOUT)
        _wait(lambda: f":{HTTP_PORT} " in self.net["sv"].cmd("ss -tlnH"), 20, "the web server")
        say(f"web server on sv ({self.sv}:{HTTP_PORT}) serves {self.s.size} bytes, "
            f"sha256 {self.sha256[:16]}…")

    def stop(self) -> None:
        if self.web and self.web.poll() is None:
            self.web.kill()
            self.web.wait()
        if self.net:
            self.net.stop()

    # --- Mplex_Control through hostd -------------------------------------------------------
    def mplex_on(self) -> None:
        from concast.hosts import Client
        from concast.hosts.capture import wait_capture
        with Client(self.net.hostd_socket("sv")) as c:
            r = c.request("mplex", action="on", role="receiver", group=self.s.group,
                          spec_path=str(tools.spec_module("multiplex")))
        say(f"sv receives group {self.s.group} (multiplex spec installed, TUN {r['tun']})")
        clients = {h: Client(self.net.hostd_socket(h), timeout=15) for h in self.clients}
        try:
            waiting = []
            for h, c in clients.items():
                r = c.request("mplex", action="on", role="sender", receiver=self.sv,
                              group=self.s.group, max_local_delay_ms=self.s.max_local_delay_ms,
                              max_total_delay_ms=self.s.max_total_delay_ms,
                              size_threshold=self.s.size_threshold)
                if r["state"] != "capturing":       # else it was on already
                    waiting.append(h)
            for h in waiting:
                ok, text = wait_capture(clients[h], self.sv, self.s.group, 20)
                if not ok:
                    raise RuntimeError(f"{h}: {text}")
        finally:
            for c in clients.values():
                c.close()
        say(f"{len(clients)} clients capture their ACKs toward sv "
            f"(MaxLocalDelay {self.s.max_local_delay_ms} ms, "
            f"MaxTotalDelay {self.s.max_total_delay_ms} ms)")

    def mplex_off(self) -> None:
        from concast.hosts import Client
        for h in self.clients:
            with Client(self.net.hostd_socket(h)) as c:
                c.request("mplex", action="off", role="sender", receiver=self.sv, group=self.s.group)
        with Client(self.net.hostd_socket("sv")) as c:
            c.request("mplex", action="off", role="receiver", group=self.s.group)
        say("multiplexing off at every host")

    def mplex_status(self) -> dict[str, dict]:
        from concast.hosts import Client
        out = {}
        for h in self.net.plan.hosts:
            with Client(self.net.hostd_socket(h)) as c:
                out[h] = c.request("mplex", action="status")
        return out

    def router_counters(self) -> dict[str, dict]:
        from concast.controller import routerdmgmt as routerd
        return {r: routerd.query(self.net.routerd_socket(r), "stats")["counters"]
                for r in self.net.routers}

    # --- measuring ----------------------------------------------------------------------
    def nflog_rule(self, op: str) -> list[str]:
        return ["iptables", "-w", op, "OUTPUT", *(["1"] if op == "-I" else []), "-d", self.sv,
                "-p", "tcp", "-m", "comment", "--comment", "concast-exp-mplex",
                "-j", "NFLOG", "--nflog-group", str(NFLOG_GROUP)]

    def captures(self, folder: Path) -> dict[str, list[Capture]]:
        """tcpdump at the receiving end of each link in the ACK direction, the clients'
        NFLOG groups, and sv's TUN device (when it exists)."""
        net, tag, plan = self.net, self.net.tag, self.net.plan
        toward_sv = f"dst host {self.sv} and (tcp or ip proto 254)"
        # --immediate-mode rings have fixed slots of the snap length: a short snap length
        # (an MplexPkt fits in 1600 bytes) gives thousands of slots instead of a few dozen.
        inbound = ("-Q", "in", "-B", "8192", "-s", "1600")
        small = ("-B", "8192", "-s", "256")
        # NFLOG is read from netlink, several packets per message, into a buffer of the snap
        # length: it keeps tcpdump's default, or batches are cut short.
        root = _RootNode()
        # Router ports are in the root namespace, except on Linux routers (their own).
        at = lambda r: net.mn[net[r].node] if self.s.dataplane == "linux" else root  # noqa: E731
        caps: dict[str, list[Capture]] = collections.defaultdict(list)
        for h in self.clients:
            iface = naming.port_iface(tag, "r1", plan.hosts[h].ofport)
            caps["access"].append(Capture(at("r1"), iface, folder / f"access-{h}.pcap", toward_sv,
                                          extra=inbound))
            caps["nflog"].append(Capture(net[h], f"nflog:{NFLOG_GROUP}",
                                         folder / f"nflog-{h}.pcap",
                                         extra=("-B", "8192")))
        link = plan.links[0]
        r2_port = link.port_b if link.b == "r2" else link.port_a
        caps["r1-r2"].append(Capture(at("r2"), naming.port_iface(tag, "r2", r2_port),
                                     folder / "r1-r2.pcap", toward_sv, extra=inbound))
        caps["r2-sv"].append(Capture(net["sv"], naming.host_iface("sv"), folder / "r2-sv.pcap",
                                     toward_sv, extra=inbound))
        if "mplex0" in net["sv"].cmd("ip -o link show mplex0 2>/dev/null"):
            caps["tun"].append(Capture(net["sv"], "mplex0", folder / "sv-tun.pcap", "tcp",
                                       extra=small))
        return caps

    def download_all(self) -> dict[str, Download]:
        """Every client fetches the page; all start at the same instant."""
        go = self.net.run_dir / f"go-{time.monotonic_ns()}"
        url = f"http://{self.sv}:{HTTP_PORT}/page.bin"
        procs = {h: self.net[h].popen([sys.executable, str(FETCH), url, str(go)],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for h in self.clients}
        try:
            for h, p in procs.items():
                line = p.stdout.readline().strip()
                if line != "ready":
                    raise RuntimeError(f"{h}: the download client did not start: {line!r}")
            go.touch()
            out = {}
            for h, p in procs.items():
                text, _ = p.communicate(timeout=300)
                words = text.split()
                if p.returncode != 0 or len(words) != 3:
                    raise RuntimeError(f"{h}: download failed: {text.strip()[-300:]}")
                out[h] = Download(int(words[0]), words[1], float(words[2]))
            return out
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()

    def run_phase(self, mode: str, folder: Path, label: str = "") -> Phase:
        say(f"--- multiplexing {mode.upper()}{' (run ' + label + ')' if label else ''} ---")
        if mode == "on":
            self.mplex_on()
        for h in self.clients:
            self.net[h].cmd(" ".join(self.nflog_rule("-I")))
        folder.mkdir(parents=True, exist_ok=True)
        caps = self.captures(folder)
        routers_before = self.router_counters()
        for cs in caps.values():
            for c in cs:
                c.start()
        say(f"capturing on {sum(len(v) for v in caps.values())} interfaces; "
            f"{len(self.clients)} clients download {self.s.size} bytes each")
        try:
            downloads = self.download_all()
            time.sleep(1.0)          # the last ACKs and FIN exchanges, bundles flushed
        finally:
            for cs in caps.values():
                for c in cs:
                    c.stop()
        routers_after = self.router_counters()
        hostd = self.mplex_status() if mode == "on" else {}
        for h in self.clients:
            self.net[h].cmd(" ".join(self.nflog_rule("-D")))
        if mode == "on":
            self.mplex_off()
        intact = sum(d.bytes == self.s.size and d.sha256 == self.sha256 for d in downloads.values())
        say(f"downloads intact: {intact}/{len(downloads)}; slowest {max(d.seconds for d in downloads.values()):.2f} s")
        pcaps = {k: [c.path for c in v] for k, v in caps.items()}
        links = {k: pcapread.count_link(pcaps[k]) for k in LINKS}
        acc = ack_accounting(pcaps["nflog"], pcaps["r2-sv"], pcaps.get("tun", []), self.sv)
        routers = {r: {k: routers_after[r][k] - routers_before[r][k]
                       for k in ("merged_in", "merged_out", "diverted")} for r in routers_after}
        drops = {c.path.name: c.kernel_drops for cs in caps.values() for c in cs if c.kernel_drops}
        expired = sum(r["counters"]["expired_ttl"] for r in hostd.get("sv", {}).get("receivers", []))
        phase = Phase(mode, [downloads], intact, pcaps, links, acc["sent"], acc["arrived"], acc,
                      routers, hostd, expired, drops)
        if drops:
            say(f"tcpdump lost packets: {drops}")
        say(f"ACKs sent {phase.acks_sent}, reaching sv's TCP {phase.acks_arrived}; packets "
            + ", ".join(f"{LINK_TITLES[k]} {links[k].packets}" for k in LINKS))
        return phase


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not come up within {timeout} s")
