"""`concast decode`: show concast packets (hex or a pcap) with the spec's verdict."""
from __future__ import annotations

import sys

from scapy.layers.inet import IP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

import concast.scapy as cs


def ipv4_bytes(pkt) -> bytes | None:
    """The IPv4 datagram inside a pcap record (Ethernet or raw IP)."""
    if Ether in pkt and pkt[Ether].type == 0x0800:
        return bytes(pkt[Ether].payload)
    raw = bytes(pkt)
    return raw if raw[:1] and raw[0] >> 4 == 4 else None


def describe(raw: bytes) -> str:
    """One block of text: the verdict line, then Scapy's field dump for valid datagrams."""
    c = cs.classify(raw)
    if c.kind == "malformed":
        return f"malformed: {c.error} ({len(raw)} bytes) {raw[:48].hex()}"
    head = f"{c.kind}" + (f" group={c.group}" if c.group is not None else "")
    return head + "\n" + IP(raw).show(dump=True)


def main(hex_text: str | None, pcap: str | None) -> int:
    if (hex_text is None) == (pcap is None):
        print("concast decode: give either HEX or --pcap FILE", file=sys.stderr)
        return 2
    if hex_text is not None:
        try:
            raw = bytes.fromhex(hex_text.replace(" ", "").replace(":", ""))
        except ValueError as e:
            print(f"concast decode: not hex: {e}", file=sys.stderr)
            return 2
        print(describe(raw))
        return 0
    try:
        packets = rdpcap(pcap)
    except (OSError, ValueError) as e:
        print(f"concast decode: cannot read {pcap}: {e}", file=sys.stderr)
        return 2
    for i, pkt in enumerate(packets, 1):
        raw = ipv4_bytes(pkt)
        print(f"#{i} " + (describe(raw) if raw else "not IPv4"))
    return 0
