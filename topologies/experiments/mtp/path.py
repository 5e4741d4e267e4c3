"""The emulated path of `concast exp mtp`'s real-network scenarios (michelle, wan, third-party):
`concast exp transport`'s testbed (two Mininet hosts, HTB rate each way, the link emulator's
delay, random loss at both hosts' input) with what the dissertation's tests needed besides:

- loss that ICMP suffers too, so a concurrent fast ping measures it as the dissertation's
  tclient did (section 7.2); the loss is set per direction and the ping sees both;
- TCP profiles set inside the two hosts' namespaces only (never on the machine): `linux`
  (the namespace's own settings) and `1999` (as close to the TCP of 1999 as Linux allows);
- the kernel's TCP counters (timeouts, fast retransmits) of a namespace, to say why TCP moved
  what it moved.
"""
from __future__ import annotations

import math
import re
import signal
import subprocess

from concast.netns import parse_net_counters
from concast.topologies.experiments.transport.testbed import Testbed

#: "1999" TCP (issue #22): what Linux lets us take away that the TCP of 1999 did not have.
#: SACK and D-SACK (RFC 2018/2883), RACK (tcp_recovery bit 1), tail-loss probes and early
#: retransmit (tcp_early_retrans), F-RTO (tcp_frto), timestamps (RFC 1323, rare in 1999);
#: tcp_fack is a no-op on kernels from 4.15 and is set where the file exists. Fast retransmit
#: and (New)Reno recovery stay: Linux cannot turn them off, and 1999's Reno had them (RFC 2001).
TCP_1999_SYSCTLS = {"net.ipv4.tcp_sack": "0", "net.ipv4.tcp_dsack": "0", "net.ipv4.tcp_fack": "0",
                    "net.ipv4.tcp_recovery": "0", "net.ipv4.tcp_early_retrans": "0",
                    "net.ipv4.tcp_frto": "0", "net.ipv4.tcp_timestamps": "0"}
#: Every profile: each connection starts without what earlier ones cached (ssthresh, RTT)
#: in the namespace's TCP metrics, as each of the dissertation's tests did.
COMMON_SYSCTLS = {"net.ipv4.tcp_no_metrics_save": "1"}
#: The receive buffer sysctl a profile may cap (on the client, the receiver).
RMEM = "net.ipv4.tcp_rmem"
#: The 1999 profile's minimum retransmission timeout (the route's rto_min): BSD-derived
#: stacks of the time could not time out in less than about a second (two 500 ms ticks),
#: which RFC 2988 (2000) wrote down as its 1 s floor. Linux's own is 200 ms.
RTO_MIN_1999_MS = 1000
#: Its initial window: 2 segments (RFC 2414, 1998, allowed up to about 4 KB; stacks of 1999
#: started at 1 or 2). Linux's own is 10.
INITCWND_1999 = 2
#: The `1999-8k` profile's receive window: Appendix D's TCP moved 36.22 KB/s at 0 % loss over a
#: path of about 110 ms (its MTP RTT column) where MTP moved 398: about 4 KB per round trip,
#: a window-bound TCP; 8 KB was a common socket buffer of the time (the dissertation does
#: not say which its hosts had: an inference, stated as one).
RCVWND_1999_BYTES = 8 * 1024
PROFILES = ("linux", "1999", "1999-8k")


def per_direction(round_trip_loss_pct: float) -> float:
    """The loss each direction needs so that a round trip (ping) loses `round_trip_loss_pct` %:
    1 - (1 - p)^2 = L. The dissertation's loss rates are its pings', round trips."""
    if not 0 <= round_trip_loss_pct < 100:
        raise ValueError(f"loss {round_trip_loss_pct} % is not in [0, 100)")
    return 100 * (1 - math.sqrt(1 - round_trip_loss_pct / 100))


_PING = re.compile(r"(\d+) packets transmitted, (\d+) received")


def ping_counts(text: str) -> tuple[int, int]:
    """(sent, answered) from iputils ping's summary line; (0, 0) when there is none."""
    m = _PING.search(text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


class EmulatedPath(Testbed):
    """A Testbed with ICMP loss, a fast ping, TCP profiles and TCP counters."""

    def start(self, objects: dict[str, int]) -> "EmulatedPath":
        super().start(objects)
        self.profile = None
        keys = [*TCP_1999_SYSCTLS, *COMMON_SYSCTLS, RMEM]
        self.own = {h.name: {k: self._sysctl(h, k) for k in keys} for h in (self.client, self.server)}
        self.routes = {h.name: h.cmd(f"ip -4 route show dev {h.defaultIntf().name}").strip().splitlines()[0]
                       for h in (self.client, self.server)}
        for h in (self.client, self.server):
            for k, v in COMMON_SYSCTLS.items():
                self._sysctl(h, k, v)
        return self

    @staticmethod
    def _sysctl(h, key: str, value: str | None = None) -> str | None:
        """Reads (or writes) a sysctl inside host h's namespace; None where it does not exist."""
        path = "/proc/sys/" + key.replace(".", "/")
        if value is None:
            out = h.cmd(f"cat {path} 2>/dev/null").strip()
            return out or None
        out = h.cmd(f"test -e {path} && echo {value} > {path}; echo rc=$?")
        if "rc=0" not in out and "rc=1" not in out:
            raise RuntimeError(f"{h.name}: {key}={value}: {out}")
        return value

    def tcp_profile(self, name: str, rto_min_ms: int = RTO_MIN_1999_MS) -> dict:
        """Sets both namespaces' TCP to `name` (PROFILES); returns what was set. The sysctls
        are read when a connection opens, so this is done between connections."""
        if name not in PROFILES:
            raise ValueError(f"TCP profile {name!r}: one of {PROFILES}")
        applied = {}
        for h in (self.client, self.server):
            want = dict(TCP_1999_SYSCTLS) if name != "linux" else dict(self.own[h.name])
            if name == "1999-8k" and h is self.client:
                # Linux advertises about half of its receive buffer (tcp_adv_win_scale)
                b = 2 * RCVWND_1999_BYTES
                want[RMEM] = f"4096 {b} {b}"
            elif name != "linux":
                want[RMEM] = self.own[h.name][RMEM]
            for k, v in want.items():
                if v is not None and self._sysctl(h, k) is not None:
                    self._sysctl(h, k, v)
                    applied[k] = v
            route, dev = self.routes[h.name], h.defaultIntf().name
            extra = f" rto_min {rto_min_ms}ms initcwnd {INITCWND_1999}" if name != "linux" else ""
            out = h.cmd(f"ip route replace {route} dev {dev}{extra} 2>&1; echo rc=$?")
            if "rc=0" not in out:
                raise RuntimeError(f"{h.name}: ip route replace {route} dev {dev}{extra}: {out}")
        if name != "linux":
            applied.update({"route rto_min": f"{rto_min_ms}ms", "route initcwnd": str(INITCWND_1999)})
        self.profile = name
        return applied

    def set_loss(self, pct: float) -> None:
        """`pct` % of the TCP, UDP and ICMP arriving at either host is dropped: each direction
        loses pct %, a round trip about twice that."""
        per_10k = round(pct * 100)
        for h in (self.client, self.server):
            h.cmd("nft delete table inet ctexp 2>/dev/null")
            if per_10k:
                rule = (f"add table inet ctexp\n"
                        f"add chain inet ctexp input {{ type filter hook input priority 0; policy accept; }}\n"
                        f"add rule inet ctexp input meta l4proto {{ tcp, udp, icmp }} "
                        f"numgen random mod 10000 < {per_10k} counter drop\n")
                p = h.popen(["nft", "-f", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
                _, err = p.communicate(rule, timeout=20)
                if p.returncode:
                    raise RuntimeError(f"{h.name}: nft: {err}")

    def ping_start(self) -> subprocess.Popen:
        """A fast ping from the client: the next echo as soon as the last came back (ping -A,
        adaptive), as the dissertation's fast ping did (section 7.2)."""
        return self.client.popen(["ping", "-A", "-q", "-W", "1", self.server_ip], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)

    @staticmethod
    def ping_stop(p: subprocess.Popen) -> tuple[int, int]:
        """Ends a ping this path started (SIGINT to its PID: it prints its summary)."""
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        try:
            out, _ = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        return ping_counts(out or "")

    def tcp_counters(self, h=None) -> dict[str, int]:
        """The namespace's TCP counters (/proc/net/netstat TcpExt and /proc/net/snmp Tcp)."""
        h = h or self.server
        return parse_net_counters(h.cmd("cat /proc/net/netstat /proc/net/snmp"))
