"""Send one-record MplexPkts toward R from inside a host's namespace, as a sender's hostd
would: each carries one pure TCP ACK of a flow of its own (distinct source port), so a
multiplexing router may put every one of them in the same bundle.

    python -m ... mplexsend.py --dst 10.0.3.2 --count 300 --max-local-delay-us 400000 --group 7

Built with the Scapy layers (concast.scapy), written with a raw IP_HDRINCL socket.
"""
from __future__ import annotations

import argparse
import socket
import struct

from concast.scapy import EncapsulatedPkt, mplex_datagram


def tcp_ack(sport: int, dport: int) -> bytes:
    """A 20-byte TCP header, ACK only (checksum not checked on the way)."""
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 1, 5 << 4, 0x10, 502, 0, 0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dst", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--max-local-delay-us", type=int, required=True)
    ap.add_argument("--group", type=int, default=1)
    a = ap.parse_args()
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.connect((a.dst, 9))
    src = probe.getsockname()[0]
    out = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for i in range(a.count):
        rec = EncapsulatedPkt(src=src, ttl=64, proto=6, data=tcp_ack(10_000 + i, 80))
        pkt = mplex_datagram([rec], group=a.group, src=src, dst=a.dst, id=i + 1,
                             max_total_delay=2 * a.max_local_delay_us, delayed_so_far=0,
                             max_local_delay=a.max_local_delay_us)
        out.sendto(bytes(pkt), (a.dst, 0))
    print(a.count)


if __name__ == "__main__":
    main()
