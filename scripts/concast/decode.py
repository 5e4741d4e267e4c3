"""`concast decode`: show concast packets (hex or a pcap), one line per packet: addresses, the
spec's verdict (concast, csp, mplex, ipv4 or malformed), the Concast ID option's group, TTL,
UDP ports and, for the aggregate specs (sum, count, min, max), the decoded payload. With
--verbose, Scapy's full field dump follows each line."""
from __future__ import annotations

import sys

from scapy.layers.inet import IP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

import concast.scapy as cs
from concast.hosts import aggregate

PROTOCOLS = {1: "icmp", 6: "tcp", 17: "udp"}


def ipv4_bytes(pkt) -> bytes | None:
    """The IPv4 datagram inside a pcap record (Ethernet or raw IP)."""
    if Ether in pkt and pkt[Ether].type == 0x0800:
        return bytes(pkt[Ether].payload)
    raw = bytes(pkt)
    return raw if raw[:1] and raw[0] >> 4 == 4 else None


def summary(raw: bytes) -> str:
    """One line: src > dst, verdict, group, TTL, the transport and a decoded aggregate."""
    c = cs.classify(raw)
    if c.kind == "malformed":
        return f"malformed: {c.error} ({len(raw)} bytes) {raw[:48].hex()}"
    ip = IP(raw)
    parts = [f"{ip.src} > {ip.dst}", c.kind]
    if c.group is not None:
        parts.append(f"group={c.group}")
    parts.append(f"ttl={ip.ttl} len={ip.len}")
    hlen = ip.ihl * 4
    body = raw[hlen:ip.len]
    if ip.proto == 17 and len(body) >= 8 and not ip.frag and not ip.flags.MF:
        sport, dport = int.from_bytes(body[0:2], "big"), int.from_bytes(body[2:4], "big")
        parts.append(f"udp {sport}>{dport}")
        agg = aggregate.decode(body[8:])
        parts.append(f"sum/aggregate key={agg.key} count={agg.count} value={agg.value}"
                     if agg else f"payload={len(body) - 8}B")
    elif c.kind in ("csp", "mplex"):
        layer = ip.payload
        parts.append(layer.summary() if layer else f"{len(body)}B")
    else:
        parts.append(PROTOCOLS.get(ip.proto, f"proto={ip.proto}"))
        if ip.proto == 6 and len(body) >= 4:
            parts.append(f"{int.from_bytes(body[0:2], 'big')}>{int.from_bytes(body[2:4], 'big')}")
    return " ".join(parts)


def describe(raw: bytes, verbose: bool = False) -> str:
    """The summary line, then (verbose) Scapy's field dump for valid datagrams."""
    line = summary(raw)
    if not verbose or line.startswith("malformed"):
        return line
    return line + "\n" + IP(raw).show(dump=True)


def main(hex_text: str | None, pcap: str | None, verbose: bool = False) -> int:
    if (hex_text is None) == (pcap is None):
        print("concast decode: give either HEX or --pcap FILE", file=sys.stderr)
        return 2
    if hex_text is not None:
        try:
            raw = bytes.fromhex(hex_text.replace(" ", "").replace(":", ""))
        except ValueError as e:
            print(f"concast decode: not hex: {e}", file=sys.stderr)
            return 2
        print(describe(raw, verbose))
        return 0
    try:
        packets = rdpcap(pcap)
    except (OSError, ValueError) as e:
        print(f"concast decode: cannot read {pcap}: {e}", file=sys.stderr)
        return 2
    t0 = float(packets[0].time) if packets else 0.0
    for i, pkt in enumerate(packets, 1):
        raw = ipv4_bytes(pkt)
        when = f"{float(pkt.time) - t0:9.6f}"
        print(f"#{i} {when} " + (describe(raw, verbose) if raw else f"not IPv4: {pkt.summary()}"))
    return 0
