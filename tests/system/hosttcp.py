#!/usr/bin/env python3
"""A byte-exact TCP check between two hosts (standard library only).

    hosttcp.py serve PORT            accept one connection, read to EOF, print
                                     "<bytes> <sha256>" and close
    hosttcp.py send DST PORT N       send N pseudo-random bytes, print "<bytes> <sha256>"
"""
from __future__ import annotations

import hashlib
import random
import socket
import sys


def serve(port: int) -> None:
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(1)
    print("listening", flush=True)
    conn, _ = ls.accept()
    h, n = hashlib.sha256(), 0
    while chunk := conn.recv(1 << 16):
        h.update(chunk)
        n += len(chunk)
    print(n, h.hexdigest(), flush=True)


def send(dst: str, port: int, n: int) -> None:
    data = random.Random(n).randbytes(n)
    s = socket.create_connection((dst, port), timeout=20)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)                                    # wait for the server to finish reading
    print(n, hashlib.sha256(data).hexdigest(), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
