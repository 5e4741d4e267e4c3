"""Objects over kernel TCP, one connection per object (as an HTTP/1.0 fetch): the TCP side of
`concast exp transport`. Run inside a host:

    python -m concast.topologies.experiments.transport.tcpobj serve --dir D --port P
    python -m concast.topologies.experiments.transport.tcpobj get --host H --port P --name N
        --count K --limit SECONDS [--cc cubic]   (prints one JSON line, like `mtping get`)

The request is one line, the object's name and optionally the congestion control the server
(the sender) uses for it: `object.bin cubic`. Without one the sender runs the namespace's
default, which on this machine is BBR, so the study always names it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import socket
import socketserver
import sys
import time
from pathlib import Path


def serve(directory: Path, port: int) -> None:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            name, _, cc = self.rfile.readline(1100).decode(errors="replace").strip().partition(" ")
            path = directory / name
            if "/" in name or name.startswith(".") or not path.is_file():
                return                      # closing without bytes: the client sees a failure
            if cc:
                try:
                    set_cc(self.connection, cc)
                except OSError as e:
                    print(f"tcpobj: congestion control {cc!r}: {e}", file=sys.stderr, flush=True)
                    return
            with open(path, "rb") as f:
                self.wfile.write(f.read())

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    with socketserver.ThreadingTCPServer(("0.0.0.0", port), Handler) as srv:
        srv.daemon_threads = True
        srv.serve_forever()


def set_cc(sock: socket.socket, cc: str) -> None:
    """The connection's congestion control; before any data is sent it governs all of it."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    got = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    if got != cc:
        raise OSError(f"asked for {cc}, got {got}")


class Interrupted(OSError):
    """The limit passed mid-object; `got` bytes of it had arrived."""

    def __init__(self, why: str, got: int) -> None:
        super().__init__(why)
        self.got = got


def fetch(host: str, port: int, name: str, deadline: float, cc: str = "") -> bytes:
    with socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0.01)) as s:
        if cc:
            set_cc(s, cc)                   # the client's ACKs follow it too
        s.sendall(f"{name} {cc}".strip().encode() + b"\n")
        chunks, got = [], 0
        while True:
            s.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                b = s.recv(1 << 16)
            except OSError as e:
                raise Interrupted(str(e), got) from e
            if not b:
                return b"".join(chunks)
            chunks.append(b)
            got += len(b)


def get(host: str, port: int, name: str, count: int, limit: float, cc: str = "") -> dict:
    t0 = time.monotonic()
    deadline = t0 + limit
    done, total, partial, hashes, failed = 0, 0, 0, set(), []
    for _ in range(count):
        try:
            obj = fetch(host, port, name, deadline, cc)
        except OSError as e:               # timeout at the limit, reset, refused
            failed.append(str(e))
            partial = getattr(e, "got", 0)
            break
        if not obj:
            failed.append("empty answer")
            break
        done, total = done + 1, total + len(obj)
        hashes.add(hashlib.sha256(obj).hexdigest())
    secs = time.monotonic() - t0
    return {"role": "get", "proto": "tcp", "cc": cc or "default", "name": name, "objects": done, "wanted": count,
            "complete": done == count, "failed": failed, "bytes": total, "partial_bytes": partial,
            "secs": secs,
            "kbytes_per_s": total / 1e3 / secs, "sha256": next(iter(hashes), None),
            "all_same": len(hashes) <= 1}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tcpobj")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--dir", type=Path, required=True)
    s.add_argument("--port", type=int, default=7711)
    g = sub.add_parser("get")
    g.add_argument("--host", required=True)
    g.add_argument("--port", type=int, default=7711)
    g.add_argument("--name", required=True)
    g.add_argument("--count", type=int, default=1)
    g.add_argument("--limit", type=float, default=120.0)
    g.add_argument("--cc", default="", help="the sender's congestion control (default: the host's)")
    a = ap.parse_args(argv)
    if a.cmd == "serve":
        serve(a.dir, a.port)
        return 0
    print(json.dumps(get(a.host, a.port, a.name, a.count, a.limit, a.cc)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
