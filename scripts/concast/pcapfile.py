"""Writing classic pcap files of raw IPv4 datagrams (no link header), for Wireshark/tshark."""
from __future__ import annotations

import struct
from pathlib import Path

LINKTYPE_IPV4 = 228  # raw IPv4, no link-layer header


def write_ipv4(path: Path, datagrams: list[bytes], linktype: int = LINKTYPE_IPV4) -> None:
    """A little-endian pcap with microsecond timestamps, one record per datagram, a second apart."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)]
    for i, d in enumerate(datagrams):
        out.append(struct.pack("<IIII", 1_700_000_000 + i, 0, len(d), len(d)) + d)
    Path(path).write_bytes(b"".join(out))
