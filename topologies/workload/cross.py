"""Cross traffic: constant-bit-rate UDP flows and long-lived bulk TCP flows between
host pairs, one process sending for every flow and one receiving for every flow.

    python -m concast.topologies.workload.cross recv --spec flows.json --out recv.json
    python -m concast.topologies.workload.cross send --spec flows.json --out send.json

Both run in the root namespace, make each flow's socket in its host's namespace, run
until SIGTERM and then write a JSON summary. `CrossTraffic(flows).start()` / `.stop()`
does all of that and merges the two summaries into one report per flow.

UDP: `size` is the IP datagram size (payload = size - 28), `rate_mbps` counts IP
bytes. Each datagram carries flow id, sequence number and the sender's CLOCK_MONOTONIC
(one machine, one clock: the receiver gets one-way delay). Sends are paced to absolute
deadlines start + seq * interval; if the sender falls more than MAX_LAG behind (a
stalled process), it restarts the schedule from now instead of bursting, and counts it.
TCP: each flow connects once and writes as fast as the kernel accepts; goodput is what
the receiver read over its first-to-last byte time.
"""
from __future__ import annotations

import argparse
import errno
import heapq
import json
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from concast.topologies.workload import launch
from concast import netns as ns

MODULE = "concast.topologies.workload.cross"
HEADER = struct.Struct("!IQQ")          # flow id, sequence, sender monotonic ns
UDP_IP_OVERHEAD = 28
MAX_LAG_NS = 100_000_000
TCP_CHUNK = 256 * 1024
DEFAULT_BASE_PORT = 9000


@dataclass(frozen=True)
class Flow:
    id: int
    kind: str                       # "udp" or "tcp"
    src: str
    dst: str
    src_netns: str | None
    dst_netns: str | None
    dst_ip: str
    port: int
    rate_mbps: float = 0.0          # udp only
    size: int = 1000                # udp only: IP datagram bytes

    def __post_init__(self) -> None:
        if self.kind not in ("udp", "tcp"):
            raise ValueError(f"flow {self.id}: kind must be udp or tcp, not {self.kind!r}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"flow {self.id}: port {self.port} out of range")
        if self.kind == "udp":
            if not UDP_IP_OVERHEAD + HEADER.size <= self.size <= 65507 + UDP_IP_OVERHEAD:
                raise ValueError(f"flow {self.id}: UDP size {self.size} must be "
                                 f"{UDP_IP_OVERHEAD + HEADER.size}..65535 (IP bytes)")
            if not self.rate_mbps > 0:
                raise ValueError(f"flow {self.id}: UDP rate must be > 0 Mbit/s")

    @property
    def interval_ns(self) -> int:
        return max(1, round(self.size * 8 / (self.rate_mbps * 1e6) * 1e9))


def flows_between(net, pairs: list[tuple[str, str]], kind: str, base_port: int =
                  DEFAULT_BASE_PORT, first_id: int = 0, **kw) -> list[Flow]:
    """Flows for (src, dst) host pairs of a RunningNet; flow i uses port base_port + id."""
    return [Flow(first_id + i, kind, s, d, net.netns(s), net.netns(d), net.ip(d),
                 base_port + first_id + i, **kw) for i, (s, d) in enumerate(pairs)]


def save_spec(flows: list[Flow], path: Path) -> None:
    ids = [f.id for f in flows]
    if len(set(ids)) != len(ids):
        raise ValueError("flow ids must be unique")
    ports = [(f.dst_netns, f.kind, f.port) for f in flows]
    if len(set(ports)) != len(ports):
        raise ValueError("two flows of one kind use the same port on the same host")
    Path(path).write_text(json.dumps({"flows": [asdict(f) for f in flows]}, indent=1))


def load_spec(path: Path) -> list[Flow]:
    return [Flow(**f) for f in json.loads(Path(path).read_text())["flows"]]


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _errname(e: OSError) -> str:
    return errno.errorcode.get(e.errno, str(e)) if e.errno else str(e)


# --- receiver ------------------------------------------------------------------------
class Receiver:
    def __init__(self, flows: list[Flow]) -> None:
        self.flows = flows
        self.stopping = False
        self.sel = selectors.DefaultSelector()
        self.stats = {f.id: {"kind": f.kind, "received": 0, "bytes": 0, "first_ns": None,
                             "last_ns": None} for f in flows}
        for f in flows:
            st = self.stats[f.id]
            if f.kind == "udp":
                st.update(max_seq=-1, gaps=0, reordered=0, foreign=0, delay_sum_ns=0)
            else:
                st.update(connections=0, errors=[])
        ns.room_for_files(2 * len(flows))
        socks = ns.run_in([(f.dst_netns, lambda f=f: self._open(f)) for f in flows])
        for f, s in zip(flows, socks):
            self.sel.register(s, selectors.EVENT_READ, ("udp" if f.kind == "udp" else
                                                        "listen", f))

    @staticmethod
    def _open(f: Flow) -> socket.socket:
        if f.kind == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", f.port))
        if f.kind == "tcp":
            s.listen(16)
        s.setblocking(False)
        return s

    def run(self) -> dict:
        while not self.stopping:
            for key, _ in self.sel.select(0.2):
                role, f = key.data
                try:
                    if role == "udp":
                        self._udp(key.fileobj, f)
                    elif role == "listen":
                        conn, _ = key.fileobj.accept()
                        conn.setblocking(False)
                        self.stats[f.id]["connections"] += 1
                        self.sel.register(conn, selectors.EVENT_READ, ("tcp", f))
                    else:
                        self._tcp(key.fileobj, f)
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError as e:
                    if role == "tcp":
                        self.stats[f.id]["errors"].append(_errname(e))
                        self.sel.unregister(key.fileobj)
                        key.fileobj.close()
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()
        return {"flows": self.stats, "cpu_s": _cpu_s()}

    def _udp(self, sock: socket.socket, f: Flow) -> None:
        st = self.stats[f.id]
        for _ in range(64):
            data = sock.recv(65536)
            now = time.monotonic_ns()
            if len(data) < HEADER.size:
                st["foreign"] += 1
                continue
            fid, seq, sent = HEADER.unpack_from(data)
            if fid != f.id:
                st["foreign"] += 1
                continue
            st["received"] += 1
            st["bytes"] += len(data) + UDP_IP_OVERHEAD
            st["delay_sum_ns"] += now - sent
            if st["first_ns"] is None:
                st["first_ns"] = now
            st["last_ns"] = now
            if seq > st["max_seq"] + 1:
                st["gaps"] += 1
            if seq < st["max_seq"]:
                st["reordered"] += 1
            st["max_seq"] = max(st["max_seq"], seq)

    def _tcp(self, conn: socket.socket, f: Flow) -> None:
        st = self.stats[f.id]
        data = conn.recv(TCP_CHUNK)
        if not data:
            self.sel.unregister(conn)
            conn.close()
            return
        now = time.monotonic_ns()
        st["bytes"] += len(data)
        st["received"] += 1
        if st["first_ns"] is None:
            st["first_ns"] = now
        st["last_ns"] = now


# --- sender --------------------------------------------------------------------------
class Sender:
    def __init__(self, flows: list[Flow]) -> None:
        self.flows = flows
        self.stopping = False
        self.sel = selectors.DefaultSelector()
        self.stats = {f.id: {"kind": f.kind, "sent": 0, "bytes": 0, "errors": {},
                             "start_ns": None, "stop_ns": None} for f in flows}
        for f in flows:
            if f.kind == "udp":
                self.stats[f.id].update(schedule_resets=0, slots=0)
            else:
                self.stats[f.id].update(connected_ns=None)
        ns.room_for_files(len(flows))
        self.socks = ns.run_in([(f.src_netns, lambda f=f: self._open(f)) for f in flows])
        self.chunk = memoryview(os.urandom(TCP_CHUNK))

    @staticmethod
    def _open(f: Flow) -> socket.socket:
        s = socket.socket(socket.AF_INET,
                          socket.SOCK_DGRAM if f.kind == "udp" else socket.SOCK_STREAM)
        s.setblocking(False)
        return s

    def _error(self, f: Flow, what: str) -> None:
        errs = self.stats[f.id]["errors"]
        errs[what] = errs.get(what, 0) + 1

    def run(self) -> dict:
        t0 = time.monotonic_ns()
        heap: list[tuple[int, int]] = []
        base: dict[int, int] = {}
        udp: dict[int, tuple[Flow, socket.socket, bytearray]] = {}
        for i, (f, s) in enumerate(zip(self.flows, self.socks)):
            self.stats[f.id]["start_ns"] = t0
            if f.kind == "udp":
                payload = bytearray(f.size - UDP_IP_OVERHEAD)
                udp[i] = (f, s, payload)
                base[i] = t0
                heapq.heappush(heap, (t0, i))
            else:
                code = s.connect_ex((f.dst_ip, f.port))
                if code in (0, errno.EINPROGRESS):
                    self.sel.register(s, selectors.EVENT_WRITE, f)
                else:
                    self._error(f, f"connect: {errno.errorcode.get(code, code)}")
        while not self.stopping:
            now = time.monotonic_ns()
            while heap and heap[0][0] <= now:
                deadline, i = heapq.heappop(heap)
                f, s, payload = udp[i]
                st = self.stats[f.id]
                if now - deadline > MAX_LAG_NS:         # stalled: no catch-up burst
                    st["schedule_resets"] += 1
                    base[i] = now - st["slots"] * f.interval_ns
                HEADER.pack_into(payload, 0, f.id, st["sent"], time.monotonic_ns())
                try:
                    s.sendto(payload, (f.dst_ip, f.port))
                    st["sent"] += 1
                    st["bytes"] += f.size
                except OSError as e:                    # not sent: not numbered
                    self._error(f, f"send: {_errname(e)}")
                st["slots"] += 1                        # sent or not, the slot is used
                heapq.heappush(heap, (base[i] + st["slots"] * f.interval_ns, i))
            wait = (heap[0][0] - time.monotonic_ns()) / 1e9 if heap else 0.2
            for key, _ in self.sel.select(min(max(wait, 0), 0.2)):
                self._tcp(key.fileobj, key.data)
        end = time.monotonic_ns()
        for f, s in zip(self.flows, self.socks):
            self.stats[f.id]["stop_ns"] = end
            s.close()
        return {"flows": self.stats, "cpu_s": _cpu_s()}

    def _tcp(self, sock: socket.socket, f: Flow) -> None:
        st = self.stats[f.id]
        try:
            if st["connected_ns"] is None:
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    self._error(f, f"connect: {errno.errorcode.get(code, code)}")
                    self.sel.unregister(sock)
                    return
                st["connected_ns"] = time.monotonic_ns()
            for _ in range(16):
                n = sock.send(self.chunk)
                st["bytes"] += n
                st["sent"] += 1
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            self._error(f, f"send: {_errname(e)}")
            self.sel.unregister(sock)


# --- both ends, and the report ---------------------------------------------------------
def report(flows: list[Flow], sent: dict | None, received: dict | None) -> dict:
    """Per flow: UDP sent/received/loss %/delivered Mbit/s/mean one-way delay; TCP
    bytes sent/received and goodput (Mbit/s over the receiver's first-to-last byte)."""
    out = []
    s_all = (sent or {}).get("flows", {})
    r_all = (received or {}).get("flows", {})
    for f in flows:
        s = s_all.get(str(f.id)) or s_all.get(f.id) or {}
        r = r_all.get(str(f.id)) or r_all.get(f.id) or {}
        row = {"id": f.id, "kind": f.kind, "src": f.src, "dst": f.dst, "port": f.port,
               "errors": s.get("errors", {})}
        span = (r["last_ns"] - r["first_ns"]) if r.get("first_ns") else 0
        if f.kind == "udp":
            n_sent, n_recv = s.get("sent", 0), r.get("received", 0)
            row.update(rate_mbps=f.rate_mbps, size=f.size, sent=n_sent, received=n_recv,
                       loss_pct=100 * (n_sent - n_recv) / n_sent if n_sent else None,
                       missing=r["max_seq"] + 1 - n_recv if r else None,
                       gaps=r.get("gaps", 0), reordered=r.get("reordered", 0),
                       schedule_resets=s.get("schedule_resets", 0),
                       sent_mbps=_mbps(s.get("bytes", 0), s.get("stop_ns"), s.get("start_ns")),
                       delivered_mbps=r["bytes"] * 8 / span * 1e3 if span else None,
                       delay_ms=r["delay_sum_ns"] / n_recv / 1e6 if n_recv else None)
        else:
            row.update(bytes_sent=s.get("bytes", 0), bytes_received=r.get("bytes", 0),
                       connections=r.get("connections", 0),
                       receiver_errors=r.get("errors", []),
                       goodput_mbps=r["bytes"] * 8 / span * 1e3 if span else None)
        out.append(row)
    udp = [x for x in out if x["kind"] == "udp"]
    tcp = [x for x in out if x["kind"] == "tcp"]
    total_sent = sum(x["sent"] for x in udp)
    return {"flows": out,
            "cpu_s": {"sender": (sent or {}).get("cpu_s"),
                      "receiver": (received or {}).get("cpu_s")},
            "udp": {
        "flows": len(udp), "sent": total_sent, "received": sum(x["received"] for x in udp),
        "loss_pct": 100 * (total_sent - sum(x["received"] for x in udp)) / total_sent
        if total_sent else None},
        "tcp": {"flows": len(tcp), "bytes_received": sum(x["bytes_received"] for x in tcp),
                "goodput_mbps": sum(x["goodput_mbps"] or 0 for x in tcp)}}


def _mbps(nbytes: int, stop: int | None, start: int | None) -> float | None:
    return nbytes * 8 / (stop - start) * 1e3 if stop and start and stop > start else None


class CrossTraffic:
    """Receiver process, then sender process; `stop()` ends the sender, lets what is in
    flight arrive for `drain_s`, ends the receiver and returns report()."""

    def __init__(self, flows: list[Flow], work_dir: Path | str | None = None,
                 drain_s: float = 1.0) -> None:
        if not flows:
            raise ValueError("no flows")
        self.flows = flows
        self.dir = Path(work_dir or f"/tmp/concast/workload/cross-{time.monotonic_ns()}")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.spec = self.dir / "flows.json"
        save_spec(flows, self.spec)
        self.drain_s = drain_s
        self.receiver: launch.Child | None = None
        self.sender: launch.Child | None = None

    def start(self, receiver: bool = True) -> "CrossTraffic":
        """`receiver=False` starts only the sender (every datagram is then lost)."""
        try:
            if receiver:
                self.receiver = launch.Child(MODULE, ["recv", "--spec", str(self.spec)],
                                             self.dir / "recv.json")
            self.sender = launch.Child(MODULE, ["send", "--spec", str(self.spec)],
                                       self.dir / "send.json")
        except BaseException:
            self.stop()
            raise
        return self

    def pids(self) -> list[int]:
        return [c.pid for c in (self.sender, self.receiver) if c is not None]

    def stop(self) -> dict:
        sent = self.sender.stop() if self.sender else None
        if self.receiver:
            time.sleep(self.drain_s)
            received = self.receiver.stop()
        else:
            received = None
        self.sender = self.receiver = None
        result = report(self.flows, sent, received)
        (self.dir / "report.json").write_text(json.dumps(result, indent=1) + "\n")
        return result

    def __enter__(self) -> "CrossTraffic":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.sender or self.receiver:
            self.stop()


# --- command line --------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m " + MODULE, description=__doc__.split("\n")[0])
    p.add_argument("role", choices=("send", "recv"))
    p.add_argument("--spec", required=True, help='JSON {"flows": [Flow fields, ...]}')
    p.add_argument("--out", help="summary JSON at SIGTERM (default: stdout)")
    a = p.parse_args(argv)
    try:
        flows = load_spec(Path(a.spec))
        worker = Receiver(flows) if a.role == "recv" else Sender(flows)
    except (OSError, ValueError, TypeError, KeyError) as e:
        launch.announce(error=f"{a.role}: {e}")
        return 2

    def on_term(*_):
        worker.stopping = True
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    launch.announce(ready=True, pid=os.getpid(), flows=len(flows))
    launch.write_summary(a.out, worker.run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
