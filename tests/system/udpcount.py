"""UDP datagrams for the link emulator tests, run inside a Mininet host.

    udpcount.py recv PORT IDLE_S       prints "ready", then the count once IDLE_S pass quiet
    udpcount.py send DST PORT N SIZE RATE   N datagrams of SIZE bytes; RATE per second, 0 = burst
"""
import socket
import sys
import time


def recv(port: int, idle: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("0.0.0.0", port))
    print("ready", flush=True)
    n = 0
    s.settimeout(30)            # the first datagram may take a while
    while True:
        try:
            s.recv(65535)
        except socket.timeout:
            break
        n += 1
        s.settimeout(idle)
    print(n, flush=True)


def send(dst: str, port: int, count: int, size: int, rate: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    payload = bytes(size)
    start = time.monotonic()
    for i in range(count):
        if rate:
            wait = start + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        s.sendto(payload, (dst, port))
    print("sent", count, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        recv(int(sys.argv[2]), float(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
