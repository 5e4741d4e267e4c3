#!/usr/bin/env python3
"""Send hand-built IPv4 datagrams from inside a host namespace (standard library and the
project's checksum only, so it starts in milliseconds).

    hostsend.py --dst 10.1.1.2 --proto 17 --dport 5000 --options 9e0600000007 0000 \
                --ttl 64 --count 1 --payload 68656c6c6f

The IPv4 header, options included, is written here (IP_HDRINCL); the kernel fills in
the source address, ID and header checksum. UDP gets a correct checksum.
"""
from __future__ import annotations

import argparse
import socket
import struct

from concast.inet import checksum


def source_for(dst: str) -> str:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.connect((dst, 9))
    return probe.getsockname()[0]


def datagram(src: str, dst: str, proto: int, ttl: int, options: bytes, payload: bytes,
             sport: int, dport: int) -> bytes:
    if len(options) % 4:
        raise SystemExit("options must be padded to a multiple of 4 bytes")
    if proto == 17:
        length = 8 + len(payload)
        pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, length)
        udp = struct.pack("!HHHH", sport, dport, length, 0) + payload
        csum = checksum(pseudo + udp) or 0xFFFF
        body = udp[:6] + struct.pack("!H", csum) + udp[8:]
    else:
        body = payload
    ihl = 5 + len(options) // 4
    header = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 4 * ihl + len(body), 0, 0x4000, ttl,
                         proto, 0, socket.inet_aton(src), socket.inet_aton(dst)) + options
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    return header + body


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dst", required=True)
    p.add_argument("--proto", type=int, default=17)
    p.add_argument("--ttl", type=int, default=64)
    p.add_argument("--options", nargs="*", default=[], help="hex bytes of the options area")
    p.add_argument("--payload", default="", help="hex bytes")
    p.add_argument("--sport", type=int, default=4000)
    p.add_argument("--dport", type=int, default=5000)
    p.add_argument("--count", type=int, default=1)
    a = p.parse_args()
    src = source_for(a.dst)
    pkt = datagram(src, a.dst, a.proto, a.ttl, bytes.fromhex("".join(a.options)),
                   bytes.fromhex(a.payload), a.sport, a.dport)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for _ in range(a.count):
        s.sendto(pkt, (a.dst, 0))
    print(f"sent {a.count} x {len(pkt)} bytes {src} -> {a.dst}")


if __name__ == "__main__":
    main()
