"""The suite's access to the wire: an AF_PACKET socket on a host's interface, opened inside
the host's network namespace (the socket stays there after we switch back), and a log of
every frame sent and seen, written as a pcap when a test fails."""
from __future__ import annotations

import ctypes
import os
import select
import socket
import time
from pathlib import Path

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def socket_in(netns: str, family: int, kind: int, proto: int = 0) -> socket.socket:
    """A socket created inside the named namespace (/run/netns/NAME); it stays there."""
    here = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        _setns(there)
        try:
            return socket.socket(family, kind, proto)
        finally:
            _setns(here)
    finally:
        os.close(here)
        os.close(there)


def packet_socket_in(netns: str, iface: str) -> socket.socket:
    """An AF_PACKET socket bound to `iface` of the named namespace."""
    s = socket_in(netns, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.setblocking(False)
    return s


class Log:
    """Frames a test sent and saw, in order, for the pcap written on failure."""

    def __init__(self) -> None:
        self.frames: list[tuple[float, bytes]] = []

    def add(self, frame: bytes) -> None:
        self.frames.append((time.time(), frame))

    def write_pcap(self, path: Path) -> Path:
        from scapy.layers.l2 import Ether
        from scapy.utils import PcapWriter
        path.parent.mkdir(parents=True, exist_ok=True)
        with PcapWriter(str(path), sync=True) as w:
            for t, f in self.frames:
                p = Ether(f)
                p.time = t
                w.write(p)
        return path


class Port:
    """A host's end of the wire: send IPv4 datagrams to its router, read what arrives."""

    def __init__(self, name: str, netns: str, iface: str, mac: str, gateway_mac: str,
                 log: Log) -> None:
        self.name, self.mac, self.gateway_mac, self.log = name, mac, gateway_mac, log
        self.sock = packet_socket_in(netns, iface)

    def send(self, datagram) -> None:
        """`datagram`: a Scapy IP packet or raw IPv4 bytes, sent to the router."""
        frame = (bytes.fromhex(self.gateway_mac.replace(":", ""))
                 + bytes.fromhex(self.mac.replace(":", "")) + b"\x08\x00" + bytes(datagram))
        self.log.add(frame)
        self.sock.send(frame)

    def drain(self) -> None:
        """Forget what arrived so far (earlier tests' leftovers, refreshes)."""
        while True:
            try:
                self.sock.recv(65535)
            except BlockingIOError:
                return

    def datagrams(self, timeout: float, until=None) -> list[bytes]:
        """IPv4 datagrams (Ethernet padding cut) arriving within `timeout` seconds; returns
        early once `until(list)` is true."""
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([self.sock], [], [], left)[0]:
                break
            frame, addr = self.sock.recvfrom(65535)
            if addr[2] == PACKET_OUTGOING or frame[12:14] != b"\x08\x00":
                continue
            self.log.add(frame)
            ip = frame[14:]
            total = int.from_bytes(ip[2:4], "big") if len(ip) >= 4 else len(ip)
            out.append(ip[:total] if 20 <= total <= len(ip) else ip)
            if until is not None and until(out):
                break
        return out

    def first(self, match, timeout: float = 5.0) -> bytes | None:
        """The first arriving datagram for which match(bytes) is true, or None."""
        got = self.datagrams(timeout, until=lambda ds: match(ds[-1]))
        return got[-1] if got and match(got[-1]) else None

    def close(self) -> None:
        self.sock.close()
