"""concast.netns's kernel TCP and UDP counters, the one reader of /proc/net/netstat and /proc/net/snmp:
parsed by name, differenced, read inside the namespace asked for, and put in ccc2's rows."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from concast import netns
from concast.topologies.experiments.ctp import ccc_long

SNMP = """Ip: Forwarding DefaultTTL
Ip: 1 64
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 586 384 9 19 0 1146014 1135689 179 0 93 0
Udp: InDatagrams NoPorts
Udp: 5 0
"""
NETSTAT = """TcpExt: SyncookiesSent TCPTimeouts TCPSpuriousRTOs TCPFastRetrans TCPLossProbes
TcpExt: 0 12 3 40 7
IpExt: InNoRoutes InOctets
IpExt: 0 123456
"""


def test_counters_are_read_by_name_from_both_files():
    c = netns.parse_net_counters(NETSTAT + SNMP)
    assert c["Tcp.RetransSegs"] == 179 and c["Tcp.OutSegs"] == 1135689 and c["Tcp.MaxConn"] == -1
    assert (c["TcpExt.TCPTimeouts"], c["TcpExt.TCPSpuriousRTOs"], c["TcpExt.TCPFastRetrans"]) == (12, 3, 40)
    assert c["Udp.InDatagrams"] == 5 and not any(k.startswith("Ip") for k in c), "Tcp, TcpExt and Udp only"


def test_recovery_is_the_counters_growth():
    a = {"TcpExt.TCPTimeouts": 3, "Tcp.RetransSegs": 10}
    b = {"TcpExt.TCPTimeouts": 5, "Tcp.RetransSegs": 17, "TcpExt.TCPFastRetrans": 4}
    r = netns.tcp_recovery(a, b)
    assert (r["timeouts"], r["retrans_segs"], r["fast_retrans"], r["spurious_rtos"]) == (2, 7, 4, 0)


def test_ccc2_rows_take_kernel_counters_for_kernel_tcp_and_perf_stats_for_ctcp():
    k = ccc_long.recovery({"timeouts": 2, "spurious_rtos": 1, "retrans_segs": 30, "fast_retrans": 5,
                           "loss_probes": 4, "out_segs": 900}, [])
    assert k == {"timeouts": 2, "spurious_timeouts": 1, "retransmits": 30, "tcp_fast_retrans": 5,
                 "tcp_loss_probes": 4}
    c = ccc_long.recovery(None, [{"timeouts": 1, "spurious_timeouts": 0, "retransmits": 8},
                                 {"timeouts": 2, "spurious_timeouts": 1, "retransmits": 3}])
    assert c == {"timeouts": 3, "spurious_timeouts": 1, "retransmits": 11, "tcp_fast_retrans": None,
                 "tcp_loss_probes": None}
    assert set(ccc_long.recovery(None, [{}])) == set(k), "every row has the same columns (one CSV header)"
    assert ccc_long.recovery(None, [{}])["timeouts"] is None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"), reason="needs root and iproute2")
def test_counters_are_the_namespaces_own():
    with netns.Scratch() as s:
        ns = s.add(f"ctcpc{os.getpid()}")
        netns.ip("-n", ns, "link", "set", "lo", "up")
        before = netns.net_counters(ns)
        assert before["Tcp.OutSegs"] == 0, "a new namespace has sent nothing"
        talk = ("import socket; s = socket.create_server(('127.0.0.1', 0)); "
                "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.sendall(b'x' * 1000); "
                "assert a.recv(2000)")
        subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", talk], check=True, timeout=20)
        grown = netns.tcp_recovery(before, netns.net_counters(ns))
        assert grown["out_segs"] >= 4, grown          # SYN, SYN-ACK, ACK, data at least
