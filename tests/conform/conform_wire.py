"""The suite's access to the wire: an AF_PACKET socket on a host's interface, opened inside
the host's network namespace (concast.netns; the socket stays there), and a log of
every frame sent and seen, written as a pcap when a test fails."""
from __future__ import annotations

import select
import socket
import time
from pathlib import Path

from concast.netns import call_in

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def socket_in(netns: str, family: int, kind: int, proto: int = 0) -> socket.socket:
    """A socket created inside the named namespace (/run/netns/NAME); it stays there."""
    return call_in(netns, lambda: socket.socket(family, kind, proto))


def packet_socket_in(netns: str | None, iface: str) -> socket.socket:
    """An AF_PACKET socket bound to `iface` of the named namespace (None: this one)."""
    args = (socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s = socket_in(netns, *args) if netns else socket.socket(*args)
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


def _mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def arp_frame(op: int, src_mac: str, src_ip: str, dst_mac: str, dst_ip: str) -> bytes:
    """An Ethernet ARP frame (op 1 request, 2 reply); a request is broadcast."""
    eth_dst = b"\xff" * 6 if op == 1 else _mac_bytes(dst_mac)
    return (eth_dst + _mac_bytes(src_mac) + b"\x08\x06" + b"\x00\x01\x08\x00\x06\x04"
            + op.to_bytes(2, "big") + _mac_bytes(src_mac) + socket.inet_aton(src_ip)
            + _mac_bytes(dst_mac) + socket.inet_aton(dst_ip))


class Wire:
    """A host's end of the wire: send IPv4 datagrams to its router, read what arrives.

    With `ip` set, the port answers ARP requests for that address while it reads, as a
    host would: a device under test that resolves its neighbours (--ports) can reach it.
    Subclasses move the frames: `_send` one frame, `_recv(timeout)` the next arriving one
    (not one this port sent) or None."""

    def __init__(self, name: str, mac: str, gateway_mac: str, log: Log,
                 ip: str | None = None) -> None:
        self.name, self.mac, self.gateway_mac, self.log, self.ip = name, mac, gateway_mac, log, ip

    def _send(self, frame: bytes) -> None:
        raise NotImplementedError

    def _recv(self, timeout: float) -> bytes | None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def send(self, datagram) -> None:
        """`datagram`: a Scapy IP packet or raw IPv4 bytes, sent to the router."""
        frame = _mac_bytes(self.gateway_mac) + _mac_bytes(self.mac) + b"\x08\x00" + bytes(datagram)
        self.log.add(frame)
        self._send(frame)

    def drain(self) -> None:
        """Forget what arrived so far (earlier tests' leftovers, refreshes)."""
        while (frame := self._recv(0)) is not None:
            if frame[12:14] == b"\x08\x06":
                self._answer_arp(frame)

    def datagrams(self, timeout: float, until=None) -> list[bytes]:
        """IPv4 datagrams (Ethernet padding cut) arriving within `timeout` seconds; returns
        early once `until(list)` is true."""
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            frame = self._recv(left)
            if frame is None:
                break
            if frame[12:14] == b"\x08\x06":
                self._answer_arp(frame)
                continue
            if frame[12:14] != b"\x08\x00":
                continue
            self.log.add(frame)
            ip = frame[14:]
            total = int.from_bytes(ip[2:4], "big") if len(ip) >= 4 else len(ip)
            out.append(ip[:total] if 20 <= total <= len(ip) else ip)
            if until is not None and until(out):
                break
        return out

    def _answer_arp(self, frame: bytes) -> None:
        arp = frame[14:42]
        if self.ip and len(arp) == 28 and arp[6:8] == b"\x00\x01" \
                and arp[24:28] == socket.inet_aton(self.ip):
            asker_mac, asker_ip = arp[8:14].hex(":"), socket.inet_ntoa(arp[14:18])
            self._send(arp_frame(2, self.mac, self.ip, asker_mac, asker_ip))

    def resolve(self, addresses: list[str], timeout: float = 3.0) -> str | None:
        """The MAC that answers ARP for the first of `addresses` to answer, or None."""
        wanted = {socket.inet_aton(a) for a in addresses}
        src_ip = self.ip or "0.0.0.0"
        for a in addresses:
            self._send(arp_frame(1, self.mac, src_ip, "00:00:00:00:00:00", a))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            frame = self._recv(left)
            if frame is None:
                break
            if frame[12:14] != b"\x08\x06":
                continue
            arp = frame[14:42]
            if arp[6:8] == b"\x00\x02" and arp[14:18] in wanted:
                return arp[8:14].hex(":")
            self._answer_arp(frame)
        return None

    def first(self, match, timeout: float = 5.0) -> bytes | None:
        """The first arriving datagram for which match(bytes) is true, or None."""
        got = self.datagrams(timeout, until=lambda ds: match(ds[-1]))
        return got[-1] if got and match(got[-1]) else None


class Port(Wire):
    """A Wire on an AF_PACKET socket bound to `iface` of namespace `netns` (None: this one)."""

    def __init__(self, name: str, netns: str | None, iface: str, mac: str, gateway_mac: str,
                 log: Log, ip: str | None = None) -> None:
        super().__init__(name, mac, gateway_mac, log, ip)
        self.iface = iface
        self.sock = packet_socket_in(netns, iface)

    def _send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def _recv(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            if not select.select([self.sock], [], [], left)[0]:
                return None
            frame, addr = self.sock.recvfrom(65535)
            if addr[2] != PACKET_OUTGOING:
                return frame

    def close(self) -> None:
        self.sock.close()
