"""A client of hostd's API socket: JSON lines both ways (docs/hostd.md, "The socket
protocol"). Requests carry an `id`; the reply with that id answers it, and every other
line is an event (datagrams of subscribed groups, flow state changes), kept in order
until read with events() or next_event()."""
from __future__ import annotations

import collections
import json
import select
import socket
import time
from pathlib import Path
from typing import Callable, Iterator


class HostdError(RuntimeError):
    """hostd refused a request; the message is hostd's."""


class Client:
    def __init__(self, path: str | Path, timeout: float = 5.0) -> None:
        self.path = str(path)
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)
        self.sock.setblocking(False)
        self._poll = select.poll()
        self._poll.register(self.sock, select.POLLIN)
        self._buf = b""
        self._next_id = 1
        self._events: collections.deque[dict] = collections.deque()

    # --- plumbing -------------------------------------------------------------------
    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_line(self, deadline: float) -> dict | None:
        """The next JSON line, waiting until `deadline` (monotonic); None on timeout."""
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            # poll, not select: an experiment may hold hundreds of these sockets open,
            # and select() cannot watch a descriptor numbered 1024 or more.
            if left <= 0 or not self._poll.poll(left * 1000):
                return None
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError(f"hostd closed {self.path}")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def _send_line(self, obj: dict) -> None:
        data = (json.dumps(obj) + "\n").encode()
        self.sock.setblocking(True)
        try:
            self.sock.sendall(data)
        finally:
            self.sock.setblocking(False)

    def request(self, op: str, timeout: float | None = None, **fields) -> dict:
        """Send one request and return its reply; raise HostdError if hostd refused it."""
        rid = self._next_id
        self._next_id += 1
        self._send_line({"op": op, "id": rid, **{k: v for k, v in fields.items() if v is not None}})
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            msg = self._read_line(deadline)
            if msg is None:
                raise TimeoutError(f"no reply from hostd to {op!r}")
            if "event" in msg:
                self._events.append(msg)
                continue
            if msg.get("id") != rid:
                continue        # a reply to a request that timed out earlier
            if not msg.get("ok"):
                raise HostdError(msg.get("error", "refused"))
            return msg

    def next_event(self, timeout: float, match: Callable[[dict], bool] | None = None) -> dict | None:
        """The next event (that `match` accepts; others stay queued), or None after `timeout`."""
        for ev in list(self._events):
            if match is None or match(ev):
                self._events.remove(ev)
                return ev
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_line(deadline)
            if msg is None:
                return None
            if "event" not in msg:
                continue
            if match is None or match(msg):
                return msg
            self._events.append(msg)

    def events(self, timeout: float) -> Iterator[dict]:
        """Events as they come, until none arrives for `timeout` seconds."""
        while (ev := self.next_event(timeout)) is not None:
            yield ev

    # --- the operations -------------------------------------------------------------
    def join(self, receiver: str, group: int, selector: str | None = None,
             dport: int | None = None) -> dict:
        return self.request("join", receiver=receiver, group=group, selector=selector, dport=dport)

    def wait_settled(self, receiver: str, group: int, timeout: float) -> dict | None:
        """After join(): the `active` or `fallback` event of the flow, or None on timeout."""
        def settled(ev: dict) -> bool:
            return (ev.get("event") in ("active", "fallback") and ev.get("receiver") == receiver
                    and ev.get("group") == group)
        return self.next_event(timeout, settled)

    def leave(self, receiver: str, group: int) -> dict:
        return self.request("leave", receiver=receiver, group=group)

    def send(self, receiver: str, group: int, payload: bytes, sport: int | None = None,
             dport: int | None = None, ttl: int | None = None) -> dict:
        return self.request("send", receiver=receiver, group=group, payload=payload.hex(),
                            sport=sport, dport=dport, ttl=ttl)

    def install_spec(self, group: int, spec: bytes | str | Path) -> dict:
        """`spec`: the module's bytes, or a path to it (read here, sent as hex)."""
        data = spec if isinstance(spec, bytes) else Path(spec).read_bytes()
        return self.request("install_spec", group=group, spec_hex=data.hex())

    def remove_spec(self, group: int) -> dict:
        return self.request("remove_spec", group=group)

    def subscribe(self, group: int, port: int | None = None) -> dict:
        return self.request("subscribe", group=group, port=port)

    def unsubscribe(self, group: int) -> dict:
        return self.request("unsubscribe", group=group)

    def status(self) -> dict:
        return self.request("status")

    def flows(self) -> dict:
        return self.request("flows")

    def stats(self) -> dict:
        return self.request("stats")

    # --- the multiplex service (docs/multiplex.md, "Per-flow multiplexing") ---------
    def mplex_flow_on(self, receiver: str, proto: str, max_local_delay_ms: float,
                      max_total_delay_ms: float, sport: int | None = None,
                      dport: int | None = None, size_threshold: int | None = None,
                      group: int | None = None) -> dict:
        """Multiplex one application flow toward `receiver`: its datagrams of `proto`
        ("udp" or "tcp") from this host's port `sport` and/or to R's port `dport`, up to
        `size_threshold` bytes, each held at most `max_local_delay_ms` per node."""
        return self.request("mplex", action="on", role="sender", receiver=receiver, proto=proto,
                            sport=sport, dport=dport, max_local_delay_ms=max_local_delay_ms,
                            max_total_delay_ms=max_total_delay_ms,
                            size_threshold=size_threshold, group=group, timeout=15)

    def mplex_socket_on(self, sock: socket.socket, max_local_delay_ms: float,
                        max_total_delay_ms: float, size_threshold: int | None = None,
                        receiver: str | None = None, group: int | None = None) -> dict:
        """The same for a socket of this script: its protocol and local port name the flow,
        and R is its peer (a connected socket) unless `receiver` is given; a connected
        socket's remote port narrows the flow to that one conversation."""
        proto = {socket.SOCK_DGRAM: "udp", socket.SOCK_STREAM: "tcp"}.get(sock.type)
        if proto is None:
            raise ValueError("only UDP and TCP sockets can be multiplexed")
        sport = sock.getsockname()[1]
        if not sport:
            raise ValueError("bind or connect the socket first: its port names the flow")
        try:
            peer, dport = sock.getpeername()
        except OSError:
            peer, dport = None, None
        receiver = receiver or peer
        if receiver is None:
            raise ValueError("an unconnected socket needs receiver=R")
        return self.mplex_flow_on(receiver, proto, max_local_delay_ms, max_total_delay_ms,
                                  sport=sport, dport=dport if receiver == peer else None,
                                  size_threshold=size_threshold, group=group)

    def mplex_flow_off(self, receiver: str, proto: str | None = None, sport: int | None = None,
                       dport: int | None = None) -> dict:
        """Stops one flow (`proto` and its ports), or every flow toward `receiver`."""
        return self.request("mplex", action="off", role="sender", receiver=receiver,
                            proto=proto, sport=sport, dport=dport, timeout=15)

    def mplex_status(self) -> dict:
        return self.request("mplex", action="status")


def wait_ready(path: str | Path, timeout: float = 10.0) -> None:
    """Wait until a hostd answers on `path` (it was just started)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with Client(path, timeout=1.0) as c:
                c.status()
                return
        except (OSError, TimeoutError) as e:
            last = e
            time.sleep(0.05)
    raise TimeoutError(f"hostd at {path} did not answer within {timeout} s: {last}")
