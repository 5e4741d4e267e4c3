"""Reading the pcaps the experiments write, and telling TCP ACKs and MplexPkts apart.

Link types met here: Ethernet (router ports, host interfaces), raw IPv4 (TUN devices),
NFLOG (`tcpdump -i nflog:N`, what the kernel logged before NFQUEUE took it) and Linux
cooked captures. Only the IPv4 datagram of each record is kept.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_NFLOG = 239
LINKTYPE_LINUX_SLL2 = 276
NFULA_PAYLOAD = 9
PROTO_TCP, PROTO_MPLEX = 6, 254
MPLEX_VERSION, RECORD_HEADER_LEN = 1, 9     # docs/protocol.md section 3


def _nflog_payload(data: bytes) -> bytes | None:
    """The packet inside an NFLOG record: a 4-byte header, then TLVs (little-endian length
    and type, padded to 4 bytes); type 9 carries the IPv4 datagram."""
    i = 4
    while i + 4 <= len(data):
        length, kind = struct.unpack_from("<HH", data, i)
        if length < 4:
            return None
        if kind & 0x7FFF == NFULA_PAYLOAD:
            return data[i + 4:i + length]
        i += (length + 3) & ~3
    return None


def _ipv4_of(linktype: int, data: bytes) -> bytes | None:
    if linktype == LINKTYPE_ETHERNET:
        off, ethertype = 14, data[12:14]
        if ethertype == b"\x81\x00":
            off, ethertype = 18, data[16:18]
        ip = data[off:] if ethertype == b"\x08\x00" else None
    elif linktype in (LINKTYPE_RAW, LINKTYPE_IPV4):
        ip = data
    elif linktype == LINKTYPE_LINUX_SLL:
        ip = data[16:] if data[14:16] == b"\x08\x00" else None
    elif linktype == LINKTYPE_LINUX_SLL2:
        ip = data[20:] if data[0:2] == b"\x08\x00" else None
    elif linktype == LINKTYPE_NFLOG:
        ip = _nflog_payload(data)
    else:
        raise ValueError(f"link type {linktype} is not read here")
    if not ip or ip[0] >> 4 != 4 or len(ip) < 20:
        return None
    total = struct.unpack_from("!H", ip, 2)[0]
    return ip[:total]


def datagrams(path: str | Path) -> list[tuple[float, bytes]]:
    """(timestamp, IPv4 datagram) of every IPv4 record of a classic pcap file."""
    raw = Path(path).read_bytes() if Path(path).exists() else b""
    if len(raw) < 24:
        return []
    magic = raw[:4]
    endian = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">", b"\x4d\x3c\xb2\xa1": "<",
              b"\xa1\xb2\x3c\x4d": ">"}.get(magic)
    if endian is None:
        raise ValueError(f"{path} is not a classic pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack_from(endian + "I", raw, 20)[0] & 0x0FFFFFFF
    out, i = [], 24
    while i + 16 <= len(raw):
        sec, frac, incl, _ = struct.unpack_from(endian + "IIII", raw, i)
        data = raw[i + 16:i + 16 + incl]
        i += 16 + incl
        ip = _ipv4_of(linktype, data)
        if ip is not None:
            out.append((sec + frac / (1e9 if nano else 1e6), ip))
    return out


def _addr(b: bytes) -> str:
    return ".".join(str(x) for x in b)


def is_pure_ack(ip: bytes) -> bool:
    """A TCP segment with ACK, no SYN/FIN/RST and no data (what the service multiplexes)."""
    ihl = (ip[0] & 0xF) * 4
    if ip[9] != PROTO_TCP or len(ip) < ihl + 20:
        return False
    seg = ip[ihl:]
    return len(seg) == (seg[12] >> 4) * 4 and seg[13] & 0x07 == 0 and seg[13] & 0x10 != 0


def ack_key(src: str, dst: str, segment: bytes) -> tuple:
    """What identifies one ACK wherever it is seen: addresses and the TCP header without its
    checksum (which offload may leave partial before NFQUEUE completes it)."""
    return (src, dst, segment[:16] + segment[18:])


def ack_of(ip: bytes) -> tuple | None:
    """The key of a plain pure ACK, else None."""
    if not is_pure_ack(ip):
        return None
    return ack_key(_addr(ip[12:16]), _addr(ip[16:20]), ip[(ip[0] & 0xF) * 4:])


@dataclass
class Record:
    src: str
    ttl: int
    protocol: int
    payload: bytes
    tos: int = 0


def mplex_records(ip: bytes) -> list[Record] | None:
    """The records of an MplexPkt (protocol 254), None for anything else or a malformed one."""
    if ip[9] != PROTO_MPLEX:
        return None
    body = ip[(ip[0] & 0xF) * 4:]
    if len(body) < 16 or body[1] != MPLEX_VERSION:
        return None
    out, i, h = [], 16, RECORD_HEADER_LEN
    while i < len(body):
        if i + h > len(body):
            return None
        n = struct.unpack_from("!H", body, i + 6)[0]
        if i + h + n > len(body):
            return None
        out.append(Record(_addr(body[i:i + 4]), body[i + 4], body[i + 5], body[i + h:i + h + n],
                          body[i + 8]))
        i += h + n
    return out


def record_ack(r: Record, dst: str) -> tuple | None:
    """The key of the pure ACK a record carries (its destination is the MplexPkt's)."""
    seg = r.payload
    if r.protocol != PROTO_TCP or len(seg) < 20 or len(seg) != (seg[12] >> 4) * 4:
        return None
    return ack_key(r.src, dst, seg)


@dataclass
class LinkCount:
    """Datagrams in the ACK direction on one link."""
    packets: int = 0          # every datagram
    plain_acks: int = 0       # pure ACKs travelling plain
    mplex: int = 0            # MplexPkts
    records: int = 0          # records inside them
    other: int = 0            # the rest (SYN, FIN, requests)
    sizes: dict | None = None  # records per MplexPkt -> count

    @property
    def acks(self) -> int:
        """ACKs the link carried, plain or bundled."""
        return self.plain_acks + self.records

    @property
    def mean_bundle(self) -> float:
        return self.records / self.mplex if self.mplex else 0.0


def count_link(paths) -> LinkCount:
    c = LinkCount(sizes={})
    for path in paths:
        for _, ip in datagrams(path):
            c.packets += 1
            recs = mplex_records(ip)
            if recs is not None:
                c.mplex += 1
                c.records += len(recs)
                c.sizes[len(recs)] = c.sizes.get(len(recs), 0) + 1
            elif is_pure_ack(ip):
                c.plain_acks += 1
            else:
                c.other += 1
    return c
