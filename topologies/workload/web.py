"""A page server and a many-client fetcher for the ACK study.

Protocol: HTTP/1.0. Any `GET <path>` gets the same page (page.py: N bytes derived from
a seed) with a Content-Length header, then the server closes; curl works against it.

    python -m concast.topologies.workload.web serve --netns NS --port 8000 --size 4096
    python -m concast.topologies.workload.web fetch --server IP --client c1=NS1 ... --out r.json

Both run in the root namespace and enter the hosts' namespaces themselves; the fetcher
is ONE process for all clients: every client's socket is made inside its namespace,
then one event loop issues all connects back to back and reads every page.
In-process: `PageServer` (starts/stops the server process) and `fetch_all()`.
"""
from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import resource
import selectors
import signal
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from concast.topologies.workload import launch, page, stats
from concast import netns as ns
from concast.topologies.workload import tcpsettings
from concast.topologies.workload.tcpsettings import TcpSettings

DEFAULT_PORT = 8000
MODULE = "concast.topologies.workload.web"


def _cc_of(sock: socket.socket) -> str | None:
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16) \
            .split(b"\0", 1)[0].decode()
    except OSError:
        return None


# --- server --------------------------------------------------------------------------
def listen_socket(netns: str | None, addr: str = "0.0.0.0", port: int = DEFAULT_PORT,
                  backlog: int = 4096) -> socket.socket:
    def make() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        s.listen(backlog)
        s.setblocking(False)
        return s
    return ns.run_in([(netns, make)])[0]


class Server:
    """Selector loop: accept, read the request head, send head + page, close."""

    def __init__(self, sock: socket.socket, size: int = page.DEFAULT_SIZE, seed: int = 0):
        self.sock = sock
        self.body = page.content(size, seed)
        self.reply = page.response_head(size) + self.body
        self.sel = selectors.DefaultSelector()
        self.sel.register(sock, selectors.EVENT_READ, None)
        self.counts = Counter()
        self.cc = Counter()
        self.stopping = False

    def run(self, poll: float = 0.2) -> dict:
        while not self.stopping:
            for key, events in self.sel.select(poll):
                if key.data is None:
                    self._accept()
                else:
                    self._serve(key.fileobj, key.data, events)
        return self.summary()

    def _accept(self) -> None:
        for _ in range(256):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            self.counts["accepted"] += 1
            self.cc[_cc_of(conn) or "?"] += 1
            self.sel.register(conn, selectors.EVENT_READ, {"req": b"", "out": None})

    def _serve(self, conn: socket.socket, st: dict, events: int) -> None:
        try:
            if st["out"] is None:
                data = conn.recv(page.MAX_HEADER)
                if not data:
                    return self._close(conn, "closed_before_request")
                st["req"] += data
                if len(st["req"]) > page.MAX_HEADER:
                    return self._close(conn, "request_too_long")
                if not page.request_complete(st["req"]):
                    return
                if not st["req"].startswith(b"GET "):
                    st["out"] = memoryview(b"HTTP/1.0 405 Method Not Allowed\r\n"
                                           b"Content-Length: 0\r\n\r\n")
                    self.counts["bad_request"] += 1
                else:
                    st["out"] = memoryview(self.reply)
                self.sel.modify(conn, selectors.EVENT_WRITE, st)
            sent = conn.send(st["out"])
            st["out"] = st["out"][sent:]
            self.counts["bytes_sent"] += sent
            if not st["out"]:
                self.counts["served"] += 1
                self._close(conn, None)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            self._close(conn, errno.errorcode.get(e.errno, str(e.errno)))

    def _close(self, conn: socket.socket, problem: str | None) -> None:
        if problem:
            self.counts[f"error_{problem}"] += 1
        self.sel.unregister(conn)
        conn.close()

    def summary(self) -> dict:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return {"page_bytes": len(self.body), "counts": dict(self.counts),
                "accepted_cc": dict(self.cc), "cpu_s": ru.ru_utime + ru.ru_stime}


class PageServer:
    """The server as a process in the root namespace that serves inside `netns`.
    `stop()` (by PID) returns its summary: accepted, served, bytes_sent, errors, and the
    congestion control the accepted sockets had."""

    def __init__(self, netns: str | None, port: int = DEFAULT_PORT,
                 size: int = page.DEFAULT_SIZE, seed: int = 0, out: Path | None = None,
                 tcp: TcpSettings | None = None) -> None:
        args = ["serve", "--port", str(port), "--size", str(size), "--seed", str(seed)]
        if netns:
            args += ["--netns", netns]
        self.tcp_state = tcpsettings.summarize(tcpsettings.apply([netns], tcp)) \
            if tcp and netns else None
        out = Path(out or f"/tmp/concast/workload/server-{time.monotonic_ns()}.json")
        self.child = launch.Child(MODULE, args, out)
        self.port = self.child.ready["port"]
        self.pid = self.child.pid

    def stop(self) -> dict | None:
        s = self.child.stop()
        if s is not None and self.tcp_state is not None:
            s["tcp"] = self.tcp_state
        return s

    def __enter__(self) -> "PageServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# --- fetcher -------------------------------------------------------------------------
@dataclass
class Result:
    settings: dict
    clients: list[dict]
    summary: dict
    cpu: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"settings": self.settings, "summary": self.summary, "cpu": self.cpu,
                "clients": self.clients}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)


def _errname(code: int) -> str:
    return errno.errorcode.get(code, str(code))


class _Fetch:
    __slots__ = ("name", "netns", "sock", "rec", "buf", "out", "stage")

    def __init__(self, name: str, netns: str | None, sock: socket.socket) -> None:
        self.name, self.netns, self.sock = name, netns, sock
        self.rec = {"client": name, "netns": netns, "ok": False, "error": None,
                    "connect_start_ns": None, "connected_ns": None, "first_byte_ns": None,
                    "last_byte_ns": None, "eof_ns": None, "bytes": 0, "body_bytes": 0,
                    "sha256_ok": False, "status": None, "local": None, "cc": _cc_of(sock)}
        self.buf = bytearray()
        self.out = b""
        self.stage = "connect"


def _realtime(wanted: bool) -> tuple | None:
    """Switch this thread to SCHED_FIFO; the policy to restore, or None if not done."""
    if not wanted:
        return None
    old = (os.sched_getscheduler(0), os.sched_getparam(0))
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except OSError:
        return None
    return old


def fetch_all(netns_by_client: dict[str, str | None], server_ip: str,
              port: int = DEFAULT_PORT, size: int = page.DEFAULT_SIZE, seed: int = 0,
              timeout: float = 60.0, path: str = "/", tcp: TcpSettings | None = None,
              realtime_release: bool = True, read_back: bool = True,
              release_at_ns: int | None = None) -> Result:
    """Fetch the page once per client, all connects issued at the same instant from
    one event loop. `netns_by_client`: client name -> /run/netns name (None: this
    process's own namespace). `tcp`: settings applied to the clients' namespaces first
    (and recorded). `timeout` bounds the whole session: what is not done by then is
    reported as "timeout: <stage>". `realtime_release`: issue the connects at SCHED_FIFO
    priority when allowed (root), so they leave together on a busy machine.
    `read_back=False`: without `tcp`, do not read the namespaces' settings back (a caller
    that applied and recorded them once for many sessions). `release_at_ns`: issue the
    connects at this CLOCK_REALTIME instant (after the set-up), so fetchers on several
    servers release their clients together (docs/cluster.md); how late this one was is in
    settings["release_late_ms"]."""
    if not netns_by_client:
        raise ValueError("no clients")
    setup0 = time.monotonic()
    expected = hashlib.sha256(page.content(size, seed)).hexdigest()
    tcp = tcp or TcpSettings()
    names = list(netns_by_client)
    spaces = [netns_by_client[c] for c in names]
    distinct = list(dict.fromkeys(spaces))
    state = tcpsettings.apply(distinct, tcp) if not tcp.empty() else None
    if state is None and read_back and None not in distinct:
        state = tcpsettings.read_back(distinct)

    def make() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        return s
    ns.room_for_files(len(spaces))
    socks = ns.run_in([(n, make) for n in spaces])
    fetches = [_Fetch(c, n, s) for c, n, s in zip(names, spaces, socks)]
    request = page.request(path)
    sel = selectors.DefaultSelector()
    setup_s = time.monotonic() - setup0
    if release_at_ns is not None:
        wait_ns = release_at_ns - time.time_ns()
        if wait_ns > 0:
            time.sleep(wait_ns / 1e9)
    cpu0, ru0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    pending = 0
    # The release, back to back: a busy machine could preempt us halfway and spread the
    # connects over tens of ms, so (as root) the loop runs at real-time priority; it is
    # a bounded loop of syscalls, and the normal policy is restored right after.
    priority = _realtime(realtime_release)
    try:
        wall0 = time.time_ns()
        t0 = time.monotonic_ns()
        late_ms = (wall0 - release_at_ns) / 1e6 if release_at_ns is not None else None
        for f in fetches:
            f.rec["connect_start_ns"] = time.monotonic_ns() - t0
            code = f.sock.connect_ex((server_ip, port))
            if code in (0, errno.EINPROGRESS):
                sel.register(f.sock, selectors.EVENT_WRITE, f)
                pending += 1
            else:
                f.rec["error"] = f"connect: {_errname(code)}"
        release_ns = time.monotonic_ns() - t0
    finally:
        if priority is not None:
            os.sched_setscheduler(0, *priority)
    deadline = t0 + int(timeout * 1e9)

    def finish(f: _Fetch, error: str | None) -> None:
        nonlocal pending
        sel.unregister(f.sock)
        pending -= 1
        f.rec["bytes"] = len(f.buf)
        if error:
            f.rec["error"] = error
            return
        try:
            status, body = page.split_response(bytes(f.buf))
        except page.BadResponse as e:
            f.rec["error"] = f"response: {e}"
            return
        f.rec["status"], f.rec["body_bytes"] = status, len(body)
        f.rec["sha256_ok"] = hashlib.sha256(body).hexdigest() == expected
        f.rec["ok"] = status == 200 and f.rec["sha256_ok"]
        if not f.rec["ok"]:
            f.rec["error"] = f"status {status}" if status != 200 else "content: sha256 mismatch"

    while pending:
        left = deadline - time.monotonic_ns()
        if left <= 0:
            break
        for key, _ in sel.select(min(left / 1e9, 0.5)):
            f: _Fetch = key.data
            now = time.monotonic_ns() - t0
            try:
                if f.stage == "connect":
                    code = f.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if code:
                        finish(f, f"connect: {_errname(code)}")
                        continue
                    f.rec["connected_ns"] = now
                    f.rec["local"] = "%s:%d" % f.sock.getsockname()
                    f.out, f.stage = request, "request"
                if f.stage == "request":
                    f.out = f.out[f.sock.send(f.out):]
                    if not f.out:
                        f.stage = "response"
                        sel.modify(f.sock, selectors.EVENT_READ, f)
                    continue
                data = f.sock.recv(65536)
                if data:
                    if f.rec["first_byte_ns"] is None:
                        f.rec["first_byte_ns"] = now
                    f.rec["last_byte_ns"] = now
                    f.buf += data
                else:
                    f.rec["eof_ns"] = now
                    finish(f, None)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                finish(f, f"{f.stage}: {_errname(e.errno) if e.errno else e}")
    for f in fetches:
        if f.rec["error"] is None and not f.rec["ok"] and f.rec["eof_ns"] is None:
            f.rec["error"] = f"timeout: {f.stage}"
            f.rec["bytes"] = len(f.buf)
        f.sock.close()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    wall_s = (time.monotonic_ns() - t0) / 1e9
    cpu_s = time.process_time() - cpu0
    records = [f.rec for f in fetches]
    summary = stats.summarize(records)
    summary["release_ms"] = release_ns / 1e6
    settings = {"server": server_ip, "port": port, "path": path, "page_size": size,
                "seed": seed, "sha256": expected, "timeout_s": timeout,
                "requested": tcp.asdict(), "start_unix_ns": wall0,
                "release_priority": "fifo" if priority is not None else "normal",
                "release_at_ns": release_at_ns, "release_late_ms": late_ms,
                "clients_tcp": tcpsettings.summarize(state) if state else None}
    cpu = {"setup_s": setup_s, "cpu_s": cpu_s, "user_s": ru1.ru_utime - ru0.ru_utime,
           "sys_s": ru1.ru_stime - ru0.ru_stime, "wall_s": wall_s,
           "cpu_share": cpu_s / wall_s if wall_s else None}
    return Result(settings, records, summary, cpu)


# --- command line --------------------------------------------------------------------
def _serve_main(a: argparse.Namespace) -> int:
    try:
        sock = listen_socket(a.netns, a.bind, a.port)
    except OSError as e:
        launch.announce(error=f"listen on {a.bind}:{a.port} in {a.netns or 'own'}: {e}")
        return 1
    server = Server(sock, a.size, a.seed)

    def on_term(*_):
        server.stopping = True
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    launch.announce(ready=True, port=sock.getsockname()[1], pid=os.getpid(),
                    sha256=hashlib.sha256(server.body).hexdigest())
    launch.write_summary(a.out, server.run())
    return 0


def _clients(a: argparse.Namespace) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    if a.clients_file:
        out.update(json.loads(Path(a.clients_file).read_text()))
    for item in a.client or []:
        name, sep, space = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--client {item!r}: expected NAME=NETNS")
        out[name] = space or None
    if not out:
        raise SystemExit("no clients: give --client NAME=NETNS or --clients-file")
    return out


def _fetch_main(a: argparse.Namespace) -> int:
    tcp = TcpSettings(a.cc, a.initcwnd, a.advmss,
                      None if a.delayed_acks is None else a.delayed_acks == "off")
    r = fetch_all(_clients(a), a.server, a.port, a.size, a.seed, a.timeout, a.path, tcp,
                  realtime_release=not a.no_realtime, read_back=not a.no_read_back,
                  release_at_ns=a.release_at_ns)
    launch.write_summary(a.out, r.to_dict())
    s = r.summary
    print(f"{s['completed']}/{s['clients']} pages intact, median "
          f"{s['completion_ms']['median']} ms, max {s['completion_ms']['max']} ms, "
          f"cpu {r.cpu['cpu_s']:.3f} s", file=sys.stderr)
    return 0 if s["failed"] == 0 else 3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m " + MODULE, description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sv = sub.add_parser("serve", help="serve the page until SIGTERM, then write a summary")
    sv.add_argument("--netns", help="/run/netns name to serve in (default: own namespace)")
    sv.add_argument("--bind", default="0.0.0.0")
    sv.add_argument("--port", type=int, default=DEFAULT_PORT, help="0: any free port")
    sv.add_argument("--size", type=int, default=page.DEFAULT_SIZE)
    sv.add_argument("--seed", type=int, default=0)
    sv.add_argument("--out", help="summary JSON file (default: stdout)")
    fe = sub.add_parser("fetch", help="fetch the page once per client, all at once")
    fe.add_argument("--server", required=True, help="server IPv4 address")
    fe.add_argument("--port", type=int, default=DEFAULT_PORT)
    fe.add_argument("--path", default="/")
    fe.add_argument("--size", type=int, default=page.DEFAULT_SIZE, help="expected page size")
    fe.add_argument("--seed", type=int, default=0, help="expected page seed")
    fe.add_argument("--client", action="append", metavar="NAME=NETNS")
    fe.add_argument("--clients-file", help='JSON {"name": "netns", ...}')
    fe.add_argument("--timeout", type=float, default=60.0, help="whole session, seconds")
    fe.add_argument("--cc", help="congestion control for the clients' namespaces")
    fe.add_argument("--initcwnd", type=int)
    fe.add_argument("--advmss", type=int)
    fe.add_argument("--delayed-acks", choices=("on", "off"))
    fe.add_argument("--no-realtime", action="store_true",
                    help="issue the connects at normal priority (default: SCHED_FIFO if root)")
    fe.add_argument("--no-read-back", action="store_true",
                    help="do not read the clients' TCP settings back (set and recorded elsewhere)")
    fe.add_argument("--release-at-ns", type=int, metavar="NS",
                    help="issue the connects at this CLOCK_REALTIME time (ns since the epoch), "
                         "to release fetchers on several servers together")
    fe.add_argument("--out", help="result JSON file (default: stdout)")
    a = p.parse_args(argv)
    try:
        return _serve_main(a) if a.cmd == "serve" else _fetch_main(a)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"{p.prog} {a.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
