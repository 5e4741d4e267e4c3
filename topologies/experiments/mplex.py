"""`concast exp mplex`: TCP ACK multiplexing on a dumbbell, with and without.

    c1..cN ── r1 ══ r2 ── sv        (routerd on r1 and r2, hostd on every host)

A web server on sv sends a page to every client at once over the kernels' own TCP; the
clients' ACKs travel toward sv. With the multiplex service on (`concast mplex on` at sv as
receiver and at every client as sender), each client's hostd takes its kernel's pure ACKs
from an NFQUEUE and sends each as a one-record MplexPkt; r1 bundles ACKs of different
clients, r2 bundles again, and sv's hostd unbundles and injects them into its kernel
through a TUN device. The same downloads then run with the service off.

What is counted, and where (docs/multiplex.md, "The experiment"):

- ACKs the clients' kernels sent: an NFLOG rule put first in each client's OUTPUT chain,
  captured with `tcpdump -i nflog:17` (NFQUEUE takes the ACKs before any interface sees
  them);
- datagrams toward sv on each link, at the receiving end of the link (`tcpdump -Q in`):
  the eight access links at r1's ports, r1→r2 at r2's port, r2→sv at sv's eth0; each
  MplexPkt is opened and its records counted;
- ACKs reaching sv's TCP: the TUN device (injected) plus plain ACKs on sv's eth0;
- downloads: bytes, SHA-256 and time of each (all start together);
- routerd's merge counters and hostd's multiplex counters.

Writes <out>/mplex.csv, <out>/mplex.png, <out>/mplex.json and the pcaps under
<out>/mplex/<on|off>/; prints a line per phase and the table at the end.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from concast import ROOT, tools
from concast.topologies import dumbbell, naming
from concast.topologies.capture import Capture
from concast.topologies.experiments import pcapread

FETCH = Path(__file__).with_name("fetch.py")
NFLOG_GROUP = 17
HTTP_PORT = 8000
HOLD_S = "5"
LINKS = ("access", "r1-r2", "r2-sv")
LINK_TITLES = {"access": "c→r1 (all access links)", "r1-r2": "r1→r2", "r2-sv": "r2→sv"}


def say(text: str) -> None:
    print(f"[mplex] {text}", flush=True)


class _RootNode:
    """Runs commands in the root namespace, where the router-side veths are."""
    name = "root"

    def popen(self, argv, **kw):
        return subprocess.Popen(argv, **kw)


@dataclass
class Settings:
    clients: int = 8
    size: int = 2_000_000
    max_local_delay_ms: float = 2.0
    max_total_delay_ms: float = 10.0
    size_threshold: int = 128
    group: int = 1
    dataplane: str = "ovs"


@dataclass
class Download:
    bytes: int
    sha256: str
    seconds: float


@dataclass
class Phase:
    """What the downloads of one mode measured: one run, or several added up (`combine`)."""
    mode: str
    runs: list[dict[str, Download]]
    intact: int
    pcaps: dict[str, list[Path]]
    links: dict[str, pcapread.LinkCount]
    acks_sent: int
    acks_arrived: int
    accounting: dict
    routers: dict[str, dict]
    #: hostd's multiplex counters at the end of the (last) run, per host
    hostd: dict[str, dict] = field(default_factory=dict)
    expired_ttl: int = 0
    #: packets tcpdump itself lost, per capture file (its "dropped by kernel" count)
    capture_drops: dict[str, int] = field(default_factory=dict)

    @property
    def downloads(self) -> dict[str, Download]:
        """The last run's downloads."""
        return self.runs[-1]

    @property
    def n_downloads(self) -> int:
        return sum(len(r) for r in self.runs)

    @property
    def makespan(self) -> float:
        """The slowest download of a run, averaged over runs."""
        return sum(max(d.seconds for d in r.values()) for r in self.runs) / len(self.runs)

    @property
    def mean_time(self) -> float:
        return sum(d.seconds for r in self.runs for d in r.values()) / self.n_downloads

    def client_time(self, host: str) -> float:
        return sum(r[host].seconds for r in self.runs) / len(self.runs)

    def throughput_mbps(self) -> float:
        """All bytes of all clients over the time until the slowest finished, per run."""
        total = sum(d.bytes for r in self.runs for d in r.values())
        return total * 8 / (self.makespan * len(self.runs)) / 1e6

    def combined_pct(self) -> float:
        """Share of the ACKs sent that reached sv sharing a packet with another ACK."""
        sizes = self.links["r2-sv"].sizes or {}
        bundled = sum(k * v for k, v in sizes.items() if k >= 2)
        return 100.0 * bundled / self.acks_sent if self.acks_sent else 0.0

    def expired(self) -> int:
        return self.expired_ttl


def combine(phases: list[Phase]) -> Phase:
    """Several runs of one mode as one: counts added, runs kept for the times."""
    if len(phases) == 1:
        return phases[0]
    links = {}
    for k in phases[0].links:
        c = pcapread.LinkCount(sizes={})
        for p in phases:
            x = p.links[k]
            for f in ("packets", "plain_acks", "mplex", "records", "other"):
                setattr(c, f, getattr(c, f) + getattr(x, f))
            for size, n in (x.sizes or {}).items():
                c.sizes[size] = c.sizes.get(size, 0) + n
        links[k] = c

    def add(dicts: list[dict]) -> dict:
        out: dict = {}
        for d in dicts:
            for key, v in d.items():
                if isinstance(v, dict):
                    out[key] = add([out.get(key, {}), v])
                elif isinstance(v, (int, float)):
                    out[key] = out.get(key, 0) + v
        return out

    pcaps: dict[str, list[Path]] = collections.defaultdict(list)
    for p in phases:
        for k, v in p.pcaps.items():
            pcaps[k] += v
    return Phase(phases[0].mode, [r for p in phases for r in p.runs], sum(p.intact for p in phases),
                 dict(pcaps), links, sum(p.acks_sent for p in phases),
                 sum(p.acks_arrived for p in phases), add([p.accounting for p in phases]),
                 add([p.routers for p in phases]), phases[-1].hostd,
                 sum(p.expired_ttl for p in phases),
                 add([p.capture_drops for p in phases]))


# --- the network ---------------------------------------------------------------------------
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
        from concast.hosts.client import wait_ready
        from concast.hosts import routerd
        plane = {"ovs": "Open vSwitch", "bmv2": "BMv2 (P4)",
                 "linux": "Linux namespaces (kernel forwarding, tc)"}[self.s.dataplane]
        say(f"starting dumbbell(clients={self.s.clients}) on {plane}")
        self.net = dumbbell(clients=self.s.clients, dataplane=self.s.dataplane).start(
            run_dir=self.run_dir)
        net = self.net
        say("starting routerd on r1, r2 and hostd on every host")
        net.start_routerd([str(tools.rust_binary("concast-routerd")), "--config", "{config}",
                           "--hold", HOLD_S])
        for r in net.routers:
            _wait(lambda r=r: _answers(routerd, net.routerd_socket(r)), 10, f"routerd on {r}")
        net.start_hostd([str(tools.rust_binary("concast-hostd")), "--config", "{config}",
                         "--hold", HOLD_S, "--join-retry-ms", "300"])
        for h in net.plan.hosts:
            wait_ready(net.hostd_socket(h))
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
        from concast.mplexcli import wait_capture
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
        from concast.hosts import routerd
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
        at = lambda r: net.mn[net[r].bridge] if self.s.dataplane == "linux" else root  # noqa: E731
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


def _answers(routerd, path) -> bool:
    try:
        routerd.query(path, "status", timeout=1.0)
        return True
    except (OSError, ValueError):
        return False


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not come up within {timeout} s")


# --- accounting ----------------------------------------------------------------------------
def ack_accounting(nflog_pcaps, server_eth0_pcaps, server_tun_pcaps, sv: str) -> dict:
    """Every pure ACK toward sv that a client's kernel sent (NFLOG) against every one that
    reached sv's interface (plain, or as a record of an MplexPkt) and every one sv's kernel
    received (plain on eth0, injected on the TUN device), as multisets of (source,
    destination, TCP header without checksum). `lost_in_network` went missing between the
    clients and sv's interface, `lost_at_sv` between sv's interface and its TCP (the TTL rule
    is the only legitimate reason), `extra` reached TCP without having been sent (or twice)."""
    def keys(paths, records: bool) -> collections.Counter:
        c: collections.Counter = collections.Counter()
        for path in paths:
            for _, ip in pcapread.datagrams(path):
                recs = pcapread.mplex_records(ip) if records else None
                found = [pcapread.record_ack(r, sv) for r in recs] if recs else [pcapread.ack_of(ip)]
                c.update(k for k in found if k and k[1] == sv)
        return c
    sent = keys(nflog_pcaps, False)
    at_sv = keys(server_eth0_pcaps, True)
    arrived = keys([*server_eth0_pcaps, *server_tun_pcaps], False)
    missing, extra = sent - arrived, arrived - sent
    return {"sent": sum(sent.values()), "at_sv_interface": sum(at_sv.values()),
            "arrived": sum(arrived.values()), "missing": sum(missing.values()),
            "lost_in_network": sum((sent - at_sv).values()),
            "lost_at_sv": sum((at_sv - arrived).values()), "extra": sum(extra.values()),
            "missing_keys": list(missing)[:5], "extra_keys": list(extra)[:5]}


# --- reporting -----------------------------------------------------------------------------
def rows(on: Phase | None, off: Phase | None) -> list[tuple[str, str, str]]:
    """(metric, with multiplexing, without) for the table and the CSV."""
    def both(fn, fmt="{}"):
        return tuple(fmt.format(fn(p)) if p else "" for p in (on, off))

    out = [("downloads intact (sha256)", *both(lambda p: f"{p.intact}/{p.n_downloads}")),
           ("ACKs sent by the clients' kernels", *both(lambda p: p.acks_sent)),
           ("ACKs reaching sv's TCP", *both(lambda p: p.acks_arrived)),
           ("ACKs combined (reached sv bundled with others, %)",
            *both(lambda p: f"{p.combined_pct():.1f}" if p.links["r2-sv"].mplex else "–"))]
    for k in LINKS:
        out.append((f"packets toward sv, {LINK_TITLES[k]}", *both(lambda p, k=k: p.links[k].packets)))
    for k in ("r1-r2", "r2-sv"):
        def saved(p, k=k):
            c = p.links[k]
            s = c.acks - c.mplex - c.plain_acks
            return f"{s} ({100.0 * s / c.acks:.1f}% of {c.acks} ACKs)" if c.mplex else "–"
        out.append((f"packets saved on {LINK_TITLES[k]} (ACKs carried − packets)", *both(saved)))
        out.append((f"mean bundle on {LINK_TITLES[k]} (records per MplexPkt)",
                    *both(lambda p, k=k: f"{p.links[k].mean_bundle:.2f}" if p.links[k].mplex else "–")))
    for r in ("r1", "r2"):
        out.append((f"routerd {r}: datagrams merged in → out",
                    *both(lambda p, r=r: f"{p.routers[r]['merged_in']} → {p.routers[r]['merged_out']}")))
    out += [("ACKs lost between the clients and sv's interface",
             *both(lambda p: p.accounting["lost_in_network"])),
            ("records dropped by the TTL rule", *both(lambda p: p.expired())),
            ("transfer time, mean / slowest of a run (s)",
             *both(lambda p: f"{p.mean_time:.3f} / {p.makespan:.3f}")),
            ("throughput, all clients (Mbit/s)", *both(lambda p: f"{p.throughput_mbps():.1f}"))]
    return out


def table(rs) -> str:
    w0 = max(len(r[0]) for r in rs)
    w1 = max(len("multiplexing on"), *(len(r[1]) for r in rs))
    w2 = max(len("multiplexing off"), *(len(r[2]) for r in rs))
    lines = [f"{'':{w0}}  {'multiplexing on':>{w1}}  {'multiplexing off':>{w2}}",
             f"{'-' * w0}  {'-' * w1}  {'-' * w2}"]
    lines += [f"{a:{w0}}  {b:>{w1}}  {c:>{w2}}" for a, b, c in rs]
    return "\n".join(lines)


def write_csv(path: Path, rs) -> None:
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["metric", "multiplexing_on", "multiplexing_off"])
        w.writerows(rs)


def plot(path: Path, on: Phase | None, off: Phase | None, s: Settings) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4.6))
    runs = len((on or off).runs)
    fig.suptitle(f"ACK multiplexing, {s.clients} clients × {s.size / 1e6:g} MB"
                 + (f", {runs} runs of each" if runs > 1 else "") + " "
                 f"(MaxLocalDelay {s.max_local_delay_ms} ms, MaxTotalDelay {s.max_total_delay_ms} ms)")
    x = range(len(LINKS))
    for i, (p, label, color) in enumerate(((off, "off", "#999999"), (on, "on", "#1f77b4"))):
        if p:
            vals = [p.links[k].packets for k in LINKS]
            bars = a.bar([j + (i - 0.5) * 0.4 for j in x], vals, 0.4, label=f"multiplexing {label}",
                         color=color)
            texts = [str(v) for v in vals]
            if p is on and off and on.acks_sent and off.acks_sent:
                # The runs' TCPs send different numbers of ACKs: compare packets per ACK.
                texts = [f"{v}\n{100 * (v / on.acks_sent) / (o / off.acks_sent) - 100:+.0f}% per ACK"
                         for v, o in zip(vals, (off.links[k].packets for k in LINKS))]
            a.bar_label(bars, labels=texts, fontsize=8)
    a.margins(y=0.28)
    a.set_xticks(list(x), [LINK_TITLES[k].replace(" (all access links)", "\n(8 access links)") for k in LINKS])
    a.set_ylabel("datagrams toward sv")
    a.set_title("packets in the ACK direction, per link")
    a.legend(loc="upper center", ncol=2, fontsize=8)
    if on:
        width = 0.4
        for i, k in enumerate(("r1-r2", "r2-sv")):
            sizes = on.links[k].sizes or {}
            ks = sorted(sizes)
            b.bar([v + (i - 0.5) * width for v in ks], [sizes[v] for v in ks], width,
                  label=f"{LINK_TITLES[k]} (mean {on.links[k].mean_bundle:.2f})")
        b.set_xlabel("records (ACKs) per MplexPkt")
        b.set_ylabel("MplexPkts")
        b.set_title("bundle sizes after each router")
        b.legend()
    hosts = sorted((on or off).downloads, key=lambda h: int(h[1:]))
    for i, (p, label, color) in enumerate(((off, "off", "#999999"), (on, "on", "#1f77b4"))):
        if p:
            c.bar([j + (i - 0.5) * 0.4 for j in range(len(hosts))],
                  [p.client_time(h) for h in hosts], 0.4, label=f"multiplexing {label}",
                  color=color)
    c.set_xticks(range(len(hosts)), hosts)
    c.set_ylabel("seconds")
    c.set_title("download time per client" + (f" (mean of {len((on or off).runs)} runs)"
                                                 if len((on or off).runs) > 1 else ""))
    c.margins(y=0.2)
    c.legend(loc="upper center", ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def phase_json(p: Phase) -> dict:
    return {"mode": p.mode, "intact": p.intact, "acks_sent": p.acks_sent,
            "acks_arrived": p.acks_arrived,
            "accounting": {k: v for k, v in p.accounting.items() if not k.endswith("_keys")},
            "runs": [{h: vars(d) for h, d in r.items()} for r in p.runs],
            "expired_ttl": p.expired_ttl, "capture_drops": p.capture_drops,
            "links": {k: {**{f: getattr(v, f) for f in ("packets", "plain_acks", "mplex", "records", "other")},
                          "sizes": v.sizes} for k, v in p.links.items()},
            "routers": p.routers, "hostd_mplex": p.hostd}


def save(out: Path, s: Settings, phases: dict[str, Phase]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    on, off = phases.get("on"), phases.get("off")
    rs = rows(on, off)
    write_csv(out / "mplex.csv", rs)
    plot(out / "mplex.png", on, off, s)
    (out / "mplex.json").write_text(json.dumps(
        {"settings": vars(s), "phases": {m: phase_json(p) for m, p in phases.items()}},
        indent=1, default=str) + "\n")
    dest = out / "mplex"
    if dest.exists():
        shutil.rmtree(dest)
    for p in phases.values():
        for paths in p.pcaps.values():
            for path in paths:
                if path.exists():          # <run>/pcap/<mode>-<n>/<link>.pcap -> mplex/<mode>-<n>/
                    (dest / path.parent.name).mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, dest / path.parent.name / path.name)
    return [out / "mplex.csv", out / "mplex.png", out / "mplex.json", out / "mplex"]


def run(s: Settings, modes=("on", "off"), repeat: int = 1,
        run_dir: Path | None = None) -> dict[str, Phase]:
    """The modes in turn, `repeat` times (interleaved, so slow drifts of this shared machine
    hit both alike); each mode's runs added up."""
    tb = Testbed(s, run_dir)
    runs: dict[str, list[Phase]] = {m: [] for m in modes}
    try:
        tb.start()
        for i in range(1, repeat + 1):
            for mode in modes:
                runs[mode].append(tb.run_phase(mode, tb.net.run_dir / "pcap" / f"{mode}-{i}",
                                               f"{i}/{repeat}"))
    finally:
        say("stopping the network")
        tb.stop()
    return {m: combine(ps) for m, ps in runs.items()}


def missing_prerequisites() -> str | None:
    if os.geteuid() != 0:
        return "needs root (Mininet, network namespaces, Open vSwitch)"
    for tool in ("tcpdump", "iptables", "ovs-vsctl"):
        if not shutil.which(tool):
            return f"{tool} is not installed (bash scripts/setup.sh)"
    try:
        for b in ("concast-routerd", "concast-hostd"):
            tools.rust_binary(b)
        tools.spec_module("multiplex")
    except tools.MissingTool as e:
        return str(e)
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="concast exp mplex", description=__doc__.split("\n\n")[0])
    d = Settings()
    p.add_argument("--clients", type=int, default=d.clients, help="clients (default 8)")
    p.add_argument("--size", type=int, default=d.size, help="page size in bytes (default 2000000)")
    p.add_argument("--max-local-delay", type=float, default=d.max_local_delay_ms, metavar="MS")
    p.add_argument("--max-total-delay", type=float, default=d.max_total_delay_ms, metavar="MS")
    p.add_argument("--size-threshold", type=int, default=d.size_threshold, metavar="BYTES")
    p.add_argument("--modes", default="on,off", help="phases to run, in order (default on,off)")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of each mode, interleaved and added up (default 3)")
    p.add_argument("--out", type=Path, default=tools.RESULTS, help="where results go (default results/)")
    p.add_argument("--dataplane", choices=("ovs", "bmv2", "linux"), default=d.dataplane,
                   help="routers on Open vSwitch (default), BMv2 (needs p4c and "
                        "simple_switch_grpc on PATH) or Linux namespaces")
    ns = p.parse_args(argv)
    modes = tuple(m.strip() for m in ns.modes.split(",") if m.strip())
    if not modes or any(m not in ("on", "off") for m in modes):
        p.error("--modes takes on and/or off, e.g. on,off")
    if not 1 <= ns.clients <= 64 or ns.size < 1 or not 1 <= ns.repeat <= 50:
        p.error("--clients must be 1..64, --size positive and --repeat 1..50")
    why = missing_prerequisites()
    if why:
        print(f"concast exp mplex: {why}", file=sys.stderr)
        return 1
    s = Settings(ns.clients, ns.size, ns.max_local_delay, ns.max_total_delay, ns.size_threshold,
                 dataplane=ns.dataplane)
    t0 = time.monotonic()
    phases = run(s, modes, ns.repeat)
    written = save(ns.out, s, phases)
    print()
    if ns.repeat > 1:
        print(f"(counts added up over {ns.repeat} runs of each mode; times averaged)")
    print(table(rows(phases.get("on"), phases.get("off"))))
    print()
    say(f"done in {time.monotonic() - t0:.0f} s; wrote " + ", ".join(str(w.relative_to(ROOT)) if w.is_relative_to(ROOT) else str(w) for w in written))
    bad = [m for m, ph in phases.items() if ph.intact != ph.n_downloads]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
