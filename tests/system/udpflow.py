"""A UDP sender and receiver for the per-flow multiplexing system test, run inside a host's
namespace as a script (`python udpflow.py send|recv ...`); prints JSON on stdout.

send R PORT SPORT N [--mplex SOCKET]: N datagrams of 1..100 bytes from SPORT to R:PORT, paced
  1 ms apart; with --mplex, first turns multiplexing on for its own socket through hostd's
  API (concast.hosts.Client.mplex_socket_on), as a researcher's script would.
recv ADDR PORT... : every datagram to those ports until 3 s pass without one; per source
  (address:port) the count and a SHA-256 over the payloads in arrival order.
"""
from __future__ import annotations

import hashlib
import json
import socket
import sys
import time


def payload(sport: int, i: int) -> bytes:
    # 1..100 bytes: every datagram (at most 128 bytes) is within the routers' spec threshold.
    n = 1 + (i * 37 + sport) % 100
    return bytes((j * 13 + i * 7 + sport) & 0xFF for j in range(n))


def digest(payloads) -> str:
    h = hashlib.sha256()
    for p in payloads:
        h.update(len(p).to_bytes(4, "big") + p)
    return h.hexdigest()


def send(r: str, port: int, sport: int, n: int, mplex_socket: str | None) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("", sport))
    reply = None
    if mplex_socket:
        from concast.hosts import Client
        with Client(mplex_socket, timeout=15) as c:
            reply = c.mplex_socket_on(s, max_local_delay_ms=5, max_total_delay_ms=50,
                                      size_threshold=200, receiver=r)
            deadline = time.monotonic() + 15
            while reply.get("state") != "capturing" and time.monotonic() < deadline:
                time.sleep(0.05)
                st = c.mplex_status()
                flows = [f for f in st["senders"] if f["flow"] == f"udp sport {sport}"]
                reply = flows[0] if flows else reply
    sent = [payload(sport, i) for i in range(n)]
    for p in sent:
        s.sendto(p, (r, port))
        time.sleep(0.001)
    return {"sport": sport, "count": n, "sha256": digest(sent), "mplex": reply}


def recv(addr: str, ports: list[int]) -> dict:
    socks = []
    for p in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((addr, p))
        s.setblocking(False)
        socks.append(s)
    print(json.dumps({"ready": True}), flush=True)
    import select
    got: dict[str, list[bytes]] = {}
    last = time.monotonic()
    while time.monotonic() - last < 3.0:
        ready, _, _ = select.select(socks, [], [], 0.2)
        for s in ready:
            data, (src, sport) = s.recvfrom(2048)
            got.setdefault(f"{src}:{sport}", []).append(data)
            last = time.monotonic()
    return {k: {"count": len(v), "sha256": digest(v)} for k, v in got.items()}


def main(argv: list[str]) -> int:
    if argv[0] == "send":
        i = argv.index("--mplex") if "--mplex" in argv else None
        sock = argv[i + 1] if i is not None else None
        r, port, sport, n = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
        print(json.dumps(send(r, port, sport, n, sock)), flush=True)
    else:
        print(json.dumps(recv(argv[1], [int(p) for p in argv[2:]])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
