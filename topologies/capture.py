"""A packet capture inside a host's namespace, read back with Scapy: tcpdump into a pcap, or,
for a path ending in .pcapng, dumpcap (Wireshark's capture engine) into a pcapng."""
from __future__ import annotations

import re
import select
import subprocess
import time
from pathlib import Path


class Capture:
    """`with Capture(host, "rx-eth0", path, "ip proto 17") as cap: ...; cap.packets()`.
    Entering returns once the capture is listening, so nothing sent after it is missed."""

    def __init__(self, host, iface: str, path: Path, bpf: str = "", snaplen: int = 0,
                 extra: tuple[str, ...] = ()) -> None:
        self.host, self.iface, self.path, self.bpf = host, iface, Path(path), bpf
        self.snaplen = snaplen
        self.extra = tuple(extra)       # more tcpdump options, e.g. ("-Q", "in")
        self.proc: subprocess.Popen | None = None
        self.kernel_drops: int | None = None     # the capture tool's own count, once stopped
        self.pcapng = self.path.suffix == ".pcapng"

    def start(self, timeout: float = 10.0) -> "Capture":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.pcapng:
            # dumpcap writes each packet as it comes (readable while the capture runs)
            argv = ["dumpcap", "-i", self.iface, "-q", "-w", str(self.path)]
            token, tool = b"Capturing on", "dumpcap"
        else:
            # --immediate-mode: otherwise packets sit in the ring until a 1 s block timeout
            # and a capture stopped sooner loses them.
            argv = ["tcpdump", "-i", self.iface, "-n", "-U", "--immediate-mode", "-Z", "root",
                    "-w", str(self.path)]
            token, tool = b"listening on", "tcpdump"
        if self.snaplen:
            argv += ["-s", str(self.snaplen)]          # the same option in both tools
        argv += self.extra
        if self.bpf:
            argv += ["-f", self.bpf] if self.pcapng else [self.bpf]
        self.proc = self.host.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        seen = b""
        while token not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"{tool} on {self.iface} did not start: {seen.decode()!r}")
            ready, _, _ = select.select([self.proc.stderr], [], [], left)
            if ready:
                seen += self.proc.stderr.read1(4096)
        if self.pcapng and self.path.exists():
            self.path.chmod(0o644)      # dumpcap makes it 0600; tcpdump's are readable too
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(2)                      # SIGINT: flush and exit
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc and self.proc.stderr:
            try:
                tail = self.proc.stderr.read().decode(errors="replace")
            except (OSError, ValueError):
                tail = ""
            self.proc.stderr.close()
            m = (re.search(r"received/dropped on interface .*?: \d+/(\d+)", tail) if self.pcapng
                 else re.search(r"(\d+) packets? dropped by kernel", tail))
            self.kernel_drops = int(m.group(1)) if m else None

    def packets(self):
        import scapy.layers.inet  # noqa: F401  (registers Ethernet, IPv4, UDP, TCP, ICMP)
        from scapy.utils import rdpcap
        return list(rdpcap(str(self.path))) if self.path.exists() else []

    def __enter__(self) -> "Capture":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
