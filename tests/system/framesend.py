#!/usr/bin/env python3
"""Write whole Ethernet frames out of an interface (AF_PACKET), from inside whatever
namespace it runs in; standard library only, so it starts fast.

    framesend.py --iface s1-eth0 --frame 02cc0a000001... [--count N]
"""
from __future__ import annotations

import argparse
import socket


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iface", required=True)
    ap.add_argument("--frame", required=True, help="the frame in hex, Ethernet header first")
    ap.add_argument("--count", type=int, default=1)
    a = ap.parse_args()
    frame = bytes.fromhex(a.frame)
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((a.iface, 0))
        for _ in range(a.count):
            s.send(frame)
    print(f"sent {a.count}")


if __name__ == "__main__":
    main()
