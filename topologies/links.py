"""Emulated links for kernels without netem: the concast-linkemu daemon (one per network)
and a Mininet link class whose two ends are TAP devices the daemon joins.

    emu = LinkEmulator(run_dir, tag).start()
    net.addLink(h1, s1, cls=EmuLink, emu=emu, delay="10ms", loss=1, bw=10, max_queue_size=50)
    ...
    emu.set(link_id, params={"delay": "20ms"})    # live, without rebuilding anything
    emu.stop()

Design, protocol and figures: docs/linkemu.md.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from mininet.link import Intf, Link

from concast import tools

BINARY = tools.binary_or_build_path("concast-linkemu")   # the one lookup (concast.tools)
EMULATED = ("delay", "loss", "max_queue_size")   # what TCLink could only do with netem
PARAMS = ("delay", "loss", "bw", "max_queue_size")
# SCHED_FIFO priority of the emulator's loop: on this 2-core machine, under load, a normal
# thread wakes up for a due frame up to milliseconds late (docs/linkemu.md, jitter).
REALTIME = int(os.environ.get("CONCAST_LINKEMU_RT", "5"))
# Where the receiving stack runs for frames the emulator writes: "inline" (inside the
# emulator's write; the daemon's default) or "napi" (a kernel thread per TAP). docs/linkemu.md.
RX_MODE = os.environ.get("CONCAST_LINKEMU_RX") or None
# The longest poll for frames before the emulator's loop sleeps, µs ("0": sleep at once);
# unset: the daemon's default. docs/linkemu.md, "The event loop".
SPIN_US = os.environ.get("CONCAST_LINKEMU_SPIN_US") or None
# How the emulator moves TAP frames: "uring" (batches over io_uring) or "syscalls" (one
# read/write per frame); unset: the daemon's default. docs/linkemu.md, "Batched TAP I/O".
IO = os.environ.get("CONCAST_LINKEMU_IO") or None
# The control socket lives in a short runtime directory of its own, never under the result
# folder: a Unix socket's path must fit sun_path (108 bytes), which a long --out passed.
RUNTIME_ROOT = Path("/run/concast/linkemu") if os.geteuid() == 0 \
    else Path(f"/tmp/concast-linkemu-{os.getuid()}")
SUN_PATH_MAX = 107      # sun_path is 108 bytes, one for the terminating NUL


def runtime_dir(tag: str) -> Path:
    """The one place the emulator's runtime directory (its control socket) is defined."""
    return RUNTIME_ROOT / tag


def control_socket(tag: str) -> Path:
    path = runtime_dir(tag) / "control.sock"
    if len(str(path).encode()) > SUN_PATH_MAX:
        raise ValueError(f"linkemu control socket {path}: longer than a Unix socket's "
                         f"{SUN_PATH_MAX} bytes (tag {tag!r} too long)")
    return path


class LinkEmuError(RuntimeError):
    """The emulator refused a request (its reason is the message) or is not there."""


def needs_emulation(params: dict) -> bool:
    return any(params.get(k) not in (None, 0, "0", "0ms") for k in EMULATED)


def split_mtu(params: dict) -> tuple[dict, int | None]:
    """A link's params without `mtu`, and the MTU (None: leave the default). Mininet's
    TCLink has no MTU parameter (it would ignore it), so it is set after the link is up."""
    rest = {k: v for k, v in params.items() if k != "mtu"}
    if "mtu" not in params or params["mtu"] is None:
        return rest, None
    try:
        mtu = int(params["mtu"])
    except (TypeError, ValueError):
        raise ValueError(f"link mtu={params['mtu']!r}: not a number") from None
    if not 68 <= mtu <= 65535:
        raise ValueError(f"link mtu={mtu}: must be 68..65535 (IPv4's minimum to its maximum)")
    return rest, mtu


def set_mtu(link, mtu: int) -> None:
    """Both ends of a Mininet link get `mtu`, each in its own node's namespace."""
    for intf in (link.intf1, link.intf2):
        out = intf.node.cmd(f"ip link set dev {intf.name} mtu {mtu}").strip()
        if out:
            raise RuntimeError(f"cannot set mtu {mtu} on {intf.name}: {out}")


def netem_available() -> bool:
    """Whether this kernel has netem (concast.netns.netem_available; meta.json records it)."""
    from concast.netns import netem_available as probe
    return probe()


def link_kind(emulate: bool | str | None, all_params: list[dict]) -> str:
    """Which links a network gets: "emu" (concast-linkemu) or "tclink" (Mininet's TCLink).
    emulate=True: always emu; False: TCLink; "netem": TCLink, for a kernel with netem (error
    otherwise); None: emu when any link asks for delay, loss or max_queue_size."""
    if emulate == "netem":
        if not netem_available():
            raise RuntimeError("emulate='netem': this kernel has no netem; use emulate=True")
        return "tclink"
    if emulate is None:
        return "emu" if any(needs_emulation(p) for p in all_params) else "tclink"
    return "emu" if emulate else "tclink"


def _jsonable(params: dict) -> dict:
    out = {}
    for k, v in params.items():
        if k not in PARAMS:
            raise ValueError(f"unknown link parameter {k!r} (one of {', '.join(PARAMS)})")
        if k == "loss" and isinstance(v, str):
            v = float(v.rstrip("%"))
        out[k] = v
    return out


class LinkEmulator:
    """One concast-linkemu process and a client of its control socket."""

    def __init__(self, run_dir: Path | str, tag: str, daemons=None, binary: Path = BINARY,
                 slots: int = 4096, realtime: int = REALTIME, rx_mode: str | None = RX_MODE,
                 spin_us: str | int | None = SPIN_US, io: str | None = IO) -> None:
        self.run_dir = Path(run_dir)           # its log (when not started through daemons)
        self.socket_path = control_socket(tag)
        self.state_path = Path(f"/dev/shm/concast-linkemu-{tag}")
        self.daemons = daemons
        self.binary = Path(binary)
        self.slots = slots
        self.realtime = realtime
        self.rx_mode = rx_mode      # None: the daemon's default
        self.spin_us = spin_us      # None: the daemon's default
        self.io = io                # None: the daemon's default
        self.daemon = None          # a controller.daemons.Daemon when started through Daemons
        self.popen: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._rfile = None
        self.slot_of_iface: dict[str, int] = {}   # interface -> slot of what it transmits

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def start(self, timeout: float = 10.0) -> "LinkEmulator":
        if not self.binary.exists():
            raise LinkEmuError(f"{self.binary} is missing: run `make build`")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.socket_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)    # a stale one of a killed run of this tag
        argv = [str(self.binary), "--control", str(self.socket_path), "--state",
                str(self.state_path), "--slots", str(self.slots), "--realtime", str(self.realtime)]
        if self.rx_mode:
            argv += ["--rx-mode", self.rx_mode]
        if self.spin_us is not None:
            argv += ["--spin-us", str(self.spin_us)]
        if self.io:
            argv += ["--io", self.io]
        if self.daemons is not None:
            self.daemon = self.daemons.start("net", argv, name="linkemu")
            self.popen = self.daemon.popen
        else:
            log = open(self.run_dir / "linkemu.log", "ab")
            self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
            log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.popen.poll() is not None:
                raise LinkEmuError(f"concast-linkemu exited with {self.popen.returncode}; "
                                   f"see its log in {self.run_dir}")
            try:
                self.ping()
                return self
            except (OSError, LinkEmuError):
                if time.monotonic() > deadline:
                    raise LinkEmuError(f"concast-linkemu did not answer on {self.socket_path}")
                time.sleep(0.02)

    def stop(self) -> None:
        self._close()
        if self.daemon is not None and self.daemons is not None:
            self.daemons.stop(self.daemon)
        elif self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, 15)       # the session it leads: nothing else
            try:
                self.popen.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, 9)
                self.popen.wait()
        self.state_path.unlink(missing_ok=True)
        self.socket_path.unlink(missing_ok=True)
        try:
            self.socket_path.parent.rmdir()         # ours: made by start()
        except OSError:
            pass

    def _close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = self._rfile = None

    # --- the control protocol ----------------------------------------------------------------
    def call(self, cmd: str, **fields) -> dict:
        if self._sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(str(self.socket_path))
            self._sock, self._rfile = s, s.makefile("rb")
        try:
            self._sock.sendall(json.dumps({"cmd": cmd, **fields}).encode() + b"\n")
            line = self._rfile.readline()
        except OSError:
            self._close()
            raise
        if not line:
            self._close()
            raise LinkEmuError("concast-linkemu closed the control connection")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise LinkEmuError(f"{cmd}: {reply.get('error')}")
        return reply

    def ping(self) -> dict:
        return self.call("ping")

    def add(self, link_id: str, a: dict, b: dict, params: dict | None = None,
            ab: dict | None = None, ba: dict | None = None, seed: int | None = None,
            tap_queue: int | None = None) -> tuple[int, int]:
        """Create the two TAPs (a and b: {"netns": PID|path|name|None, "name", "mac"}) and
        join them; returns the state slots of a->b and b->a. `tap_queue`: both TAPs' transmit
        queue in frames (default: a quarter second at the rate each end sends at, at least
        the kernel's 1,000; docs/linkemu.md)."""
        req = {"id": link_id, "a": a, "b": b}
        for key, p in (("params", params), ("ab", ab), ("ba", ba)):
            if p:
                req[key] = _jsonable(p)
        if seed is not None:
            req["seed"] = seed
        if tap_queue is not None:
            req["tap_queue"] = tap_queue
        slots = tuple(self.call("add", **req)["slots"])
        self.slot_of_iface[a["name"]] = slots[0]
        self.slot_of_iface[b["name"]] = slots[1]
        return slots

    def set(self, link_id: str, params: dict | None = None, ab: dict | None = None,
            ba: dict | None = None) -> dict:
        req = {key: _jsonable(p) for key, p in (("params", params), ("ab", ab), ("ba", ba)) if p}
        return self.call("set", id=link_id, **req)

    def down(self, link_id: str) -> None:
        self.call("down", id=link_id)

    def up(self, link_id: str) -> None:
        self.call("up", id=link_id)

    def delete(self, link_id: str) -> dict:
        return self.call("del", id=link_id)["stats"]

    def stats(self, link_id: str | None = None, taps: bool = False):
        """One link's counters, or a list of every link's. A link's ends carry their TAP's
        `tx_dropped` (frames lost to its full queue before the emulator read them): always for
        one link, with `taps` for all (a thread into each namespace)."""
        if link_id is not None:
            return self.call("stats", id=link_id)["stats"]
        return self.call("stats", taps=True)["links"] if taps else self.call("stats")["links"]


class EmuLink(Link):
    """A Mininet link whose ends are TAPs joined by concast-linkemu instead of a veth pair.
    Takes TCLink's delay= ('10ms' or ms), loss= (percent), bw= (Mbit/s) and max_queue_size=
    (packets), applied to both directions; everything else (Intf objects, MACs, IPs) is
    Mininet's as usual."""

    def __init__(self, node1, node2, port1=None, port2=None, intfName1=None, intfName2=None,
                 addr1=None, addr2=None, emu: LinkEmulator | None = None,
                 link_id: str | None = None, delay=None, loss=None, bw=None,
                 max_queue_size=None, **params) -> None:
        if emu is None:
            raise ValueError("EmuLink needs emu=LinkEmulator(...)")
        self.emu = emu
        self.link_id = link_id
        self.emu_params = {k: v for k, v in (("delay", delay), ("loss", loss), ("bw", bw),
                                             ("max_queue_size", max_queue_size))
                           if v is not None}
        self.slots: tuple[int, int] | None = None
        for k in ("txo", "rxo", "gro", "jitter", "use_htb", "use_hfsc", "use_tbf"):
            params.pop(k, None)     # TCIntf knobs; TAPs here never offload anyway
        params["intf"] = Intf       # Mininet passes its default (maybe TCIntf): plain here
        super().__init__(node1, node2, port1=port1, port2=port2, intfName1=intfName1,
                         intfName2=intfName2, addr1=addr1, addr2=addr2, **params)

    @staticmethod
    def _end(node, name: str, mac: str | None) -> dict:
        return {"netns": node.pid if node is not None and node.inNamespace else None,
                "name": name, "mac": mac}

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None,
                     node2=None, deleteIntfs=True):
        self.link_id = self.link_id or f"{intfname1}:{intfname2}"
        self.slots = self.emu.add(self.link_id, self._end(node1, intfname1, addr1),
                                  self._end(node2, intfname2, addr2), params=self.emu_params)

    def delete(self) -> None:
        try:
            self.emu.delete(self.link_id)       # closing the TAPs removes the interfaces
        except (OSError, LinkEmuError):
            pass                                # emulator already gone: so are the TAPs
        self.intf1.node.delIntf(self.intf1)
        self.intf2.node.delIntf(self.intf2)
        self.intf1 = self.intf2 = None
