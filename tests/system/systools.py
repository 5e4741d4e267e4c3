"""Helpers for the system tests: raw datagrams from hosts, CPU-port access, TCP."""
from __future__ import annotations

import select
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from concast.inet import checksum_ok

HOSTSEND = Path(__file__).with_name("hostsend.py")
HOSTTCP = Path(__file__).with_name("hosttcp.py")
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def concast_option(group: int) -> str:
    """The Concast ID option padded with EOL to 8 bytes, as senders emit it (hex)."""
    return "9e06" + f"{group:08x}" + "0000"


def send_raw(host, dst: str, **kw) -> str:
    """hostsend.py inside `host`; kw: proto, ttl, options (hex), payload (hex), sport,
    dport, count."""
    args = [f"--dst {dst}"]
    for k, v in kw.items():
        args.append(f"--{k} {v}")
    out = host.cmd(f"{sys.executable} {HOSTSEND} {' '.join(args)}")
    assert "sent" in out, out
    return out


def ip_checksum_ok(header: bytes) -> bool:
    return checksum_ok(header)


class CpuPort:
    """routerd's end of a CPU port, opened the way routerd opens it (AF_PACKET)."""

    def __init__(self, iface: str) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind((iface, 0))
        self.sock.setblocking(False)

    def recv(self, timeout: float = 2.0) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not select.select([self.sock], [], [], left)[0]:
                return None
            frame, addr = self.sock.recvfrom(65535)
            if addr[2] != PACKET_OUTGOING:
                return frame

    def recv_all(self, timeout: float = 0.5) -> list[bytes]:
        frames = []
        while (f := self.recv(timeout)) is not None:
            frames.append(f)
        return frames

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def close(self) -> None:
        self.sock.close()


def wait_listening(host, port: int, proto: str = "t", timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f":{port} " in host.cmd(f"ss -{proto}lnH"):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port} in {host.name}")


def tcp_transfer(net, client: str, server: str, nbytes: int = 2_000_000) -> bool:
    """Send `nbytes` over TCP from client to server; True when the server got exactly
    those bytes (same count, same SHA-256)."""
    srv = net[server].popen([sys.executable, str(HOSTTCP), "serve", "5201"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert srv.stdout.readline().strip() == "listening"
        sent = net[client].cmd(f"timeout 20 {sys.executable} {HOSTTCP} send "
                               f"{net.ip(server)} 5201 {nbytes}").split()
        got = srv.stdout.readline().split()
        return len(sent) == 2 and sent == got and int(got[0]) == nbytes
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait()


def ip_datagram(frame: bytes) -> bytes:
    """The IPv4 datagram of an Ethernet frame, without Ethernet padding."""
    ip = frame[14:]
    total = struct.unpack("!H", ip[2:4])[0]
    return ip[:total]


def udp_datagrams(packets, dport: int) -> list[bytes]:
    """IPv4 datagrams (raw bytes) to UDP port `dport` among captured Scapy packets."""
    out = []
    for p in packets:
        ip = ip_datagram(bytes(p.original))
        ihl = (ip[0] & 0xF) * 4
        if ip[9] == 17 and struct.unpack("!H", ip[ihl + 2:ihl + 4])[0] == dport:
            out.append(ip)
    return out


def options_of(ip: bytes) -> bytes:
    return ip[20:(ip[0] & 0xF) * 4]


# --- bodies shared by the tree tests of every data plane (tree(levels=2), senders s1..s8) ---
def datagram_whose_ttl_runs_out_is_dropped(net) -> None:
    """s2's datagrams cross two routers: TTL 2 expires at the second, TTL 3 arrives with 1."""
    with net.capture("rx", "udp", name="ttl") as cap:
        send_raw(net["s2"], net.ip("rx"), ttl=2, dport=5100)     # expires at the 2nd router
        send_raw(net["s2"], net.ip("rx"), ttl=3, dport=5101)
        net.ping("s2", "rx")
    pkts = cap.packets()
    assert udp_datagrams(pkts, 5100) == []
    assert [ip[8] for ip in udp_datagrams(pkts, 5101)] == [1]


def routers_answer_arp_for_their_port_addresses(net) -> None:
    """With s4's pinned gateway entry gone, ARP resolves the gateway to the plan's MAC."""
    s4, gw = net["s4"], net.plan.hosts["s4"]
    s4.cmd(f"ip neigh del {gw.gateway} dev s4-eth0")
    try:
        assert net.ping("s4", "rx").ok
        entry = s4.cmd(f"ip neigh show {gw.gateway}")
        assert gw.gateway_mac in entry and "PERMANENT" not in entry
    finally:
        s4.cmd(f"ip neigh replace {gw.gateway} lladdr {gw.gateway_mac} dev s4-eth0 nud permanent")
