"""Network namespaces from one process: the ones a test or a benchmark makes for itself
(`Scratch`: namespaces, veth pairs between them, removed again), and sockets and sysctls
inside named namespaces.

A socket belongs to the namespace its creating thread was in, for good; so a worker
thread hops into each namespace (setns), creates what is asked, and the sockets are
then used from any thread. The hopping happens on a throw-away thread so the caller's
own thread never leaves its namespace, whatever fails. (os.setns is Python 3.12+;
Debian 12 has 3.11, hence ctypes.)
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import subprocess
import threading
from pathlib import Path
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
_libc = ctypes.CDLL(None, use_errno=True)


def path_of(netns: str) -> Path:
    """A /run/netns name, or a path to a namespace file (e.g. /proc/PID/ns/net)."""
    p = Path(netns) if "/" in netns else NETNS_DIR / netns
    if not p.exists():
        raise FileNotFoundError(f"network namespace {netns!r} not found ({p})")
    return p


def _enter(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def run_in(jobs: Sequence[tuple[str | None, Callable[[], T]]]) -> list[T]:
    """Run each `fn` inside its namespace (None: the caller's), in order, on one worker
    thread; return their results. The first exception is raised in the caller."""
    paths = [None if ns is None else path_of(ns) for ns, _ in jobs]
    out: list = []
    failure: list[BaseException] = []

    def work() -> None:
        own = f"/proc/self/task/{threading.get_native_id()}/ns/net"
        home = os.open(own, os.O_RDONLY | os.O_CLOEXEC)
        current = None
        try:
            for path, (_, fn) in zip(paths, jobs):
                if path != current:
                    if path is None:
                        _enter_fd(home)
                    else:
                        _enter(path)
                    current = path
                out.append(fn())
        except BaseException as e:          # handed to the caller below
            failure.append(e)
        finally:
            os.close(home)

    t = threading.Thread(target=work, name="netns-hop")
    t.start()
    t.join()
    if failure:
        raise failure[0]
    return out


def call_in(netns: str | None, fn: Callable[[], T]) -> T:
    """fn() run inside one namespace (see run_in); e.g. a socket that stays there."""
    return run_in([(netns, fn)])[0]


def _enter_fd(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns(back home): {os.strerror(err)}")


def sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def read_sysctl(key: str) -> str:
    """Read in the calling thread's namespace (/proc/sys/net follows the thread)."""
    return sysctl_path(key).read_text().strip()


def write_sysctl(key: str, value: str) -> None:
    sysctl_path(key).write_text(f"{value}\n")


def room_for_files(n: int, spare: int = 64) -> None:
    """Raise the soft open-files limit (up to the hard one) so `n` more sockets fit:
    the default 1024 is near a few hundred clients plus the interpreter's own files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + spare + len(os.listdir("/proc/self/fd"))
    if want > soft:
        if hard != resource.RLIM_INFINITY and want > hard:
            raise OSError(f"{n} sockets need {want} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def ip(*args: str, check: bool = True) -> str:
    """`ip ARGS...`; its stdout. A failure raises CalledProcessError with ip's message."""
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True).stdout


def link_counters(netns: str | None, dev: str) -> dict[str, int]:
    """The kernel's counters of one interface (`ip -s link`): rx_packets, rx_dropped,
    tx_packets, tx_dropped. (The link emulator reports its own TAPs' tx_dropped in its
    link stats.)"""
    where = ("-n", netns) if netns else ()
    st = json.loads(ip(*where, "-j", "-s", "link", "show", "dev", dev))[0]["stats64"]
    return {f"{d}_{k}": int(st[d][k]) for d in ("rx", "tx") for k in ("packets", "dropped")}


#: What the counters say about a TCP sender's recovery: its timeouts (and the spurious ones
#: F-RTO undid), fast retransmits, loss probes and every retransmitted segment.
TCP_RECOVERY_COUNTERS = {"timeouts": "TcpExt.TCPTimeouts", "spurious_rtos": "TcpExt.TCPSpuriousRTOs",
                         "fast_retrans": "TcpExt.TCPFastRetrans", "reno_recovery": "TcpExt.TCPRenoRecovery",
                         "sack_recovery": "TcpExt.TCPSackRecovery", "loss_probes": "TcpExt.TCPLossProbes",
                         "retrans_segs": "Tcp.RetransSegs", "out_segs": "Tcp.OutSegs"}


def parse_net_counters(text: str) -> dict[str, int]:
    """`/proc/net/netstat` and `/proc/net/snmp` (any order, concatenated) as
    {"TcpExt.TCPTimeouts": n, "Tcp.RetransSegs": n, "Udp.RcvbufErrors": n, ...} (TCP and UDP
    only): each is a header line of names followed by a line of values with the same prefix."""
    out, lines = {}, text.splitlines()
    for head, vals in zip(lines, lines[1:]):
        hw, vw = head.split(), vals.split()
        if hw and vw and hw[0] == vw[0] and hw[0] in ("TcpExt:", "Tcp:", "Udp:") and not vw[1].isalpha():
            out.update({f"{hw[0][:-1]}.{k}": int(v) for k, v in zip(hw[1:], vw[1:]) if v.lstrip("-").isdigit()})
    return out


def net_counters(netns: str | None) -> dict[str, int]:
    """The kernel's TCP and UDP counters in a named namespace (None: this process's)."""
    where = ["ip", "netns", "exec", netns] if netns else []
    return parse_net_counters(subprocess.run([*where, "cat", "/proc/net/netstat", "/proc/net/snmp"],
                                             check=True, capture_output=True, text=True).stdout)


def tcp_recovery(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """TCP_RECOVERY_COUNTERS' growth between two `net_counters` readings."""
    return {name: after.get(k, 0) - before.get(k, 0) for name, k in TCP_RECOVERY_COUNTERS.items()}


class Scratch:
    """Namespaces this process makes for itself, and veth pairs between them; close() (or
    leaving the `with`) deletes exactly those, and with them every interface inside.

        with Scratch() as s:
            a, b = s.add("t-a"), s.add("t-b")
            s.veth(a, "va", b, "vb", mtu=1500)
    """

    def __init__(self) -> None:
        self.made: list[str] = []

    def __enter__(self) -> "Scratch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, name: str) -> str:
        """A new namespace with its loopback up."""
        ip("netns", "add", name)
        self.made.append(name)
        ip("-n", name, "link", "set", "lo", "up")
        return name

    def veth(self, ns_a: str, dev_a: str, ns_b: str, dev_b: str, mtu: int | None = None,
             up: bool = True) -> None:
        """A veth pair, `dev_a` in `ns_a` and `dev_b` in `ns_b` (may be the same one)."""
        if ns_a == ns_b:
            ip("-n", ns_a, "link", "add", dev_a, "type", "veth", "peer", "name", dev_b)
        else:
            ip("link", "add", dev_a, "netns", ns_a, "type", "veth", "peer", "name", dev_b,
               "netns", ns_b)
        for ns, dev in ((ns_a, dev_a), (ns_b, dev_b)):
            if mtu is not None:
                ip("-n", ns, "link", "set", dev, "mtu", str(mtu))
            if up:
                ip("-n", ns, "link", "set", dev, "up")

    def close(self) -> None:
        while self.made:
            ip("netns", "del", self.made.pop(), check=False)


def netem_available() -> bool:
    """Whether this kernel has netem (Linux tc's delay and loss), tried in a throwaway
    namespace (touches nothing). Needs root: without it the answer is False."""
    try:
        r = subprocess.run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem",
                            "delay", "1ms"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0
