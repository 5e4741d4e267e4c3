"""The host transport from Python: a ctypes binding of the C ABI in hosts/transport/src/ffi.rs
(the crate concast-transport is built as a cdylib, libconcast_transport.so).

    from concast.hosts import ctp
    with ctp.Server("127.0.0.1:0", composite="Bulk") as srv:
        with ctp.Client(f"127.0.0.1:{srv.port}", composite="Bulk", cc="newreno") as cli:
            cli.send(b"hello")
            peer, msg = srv.recv(timeout=2)
            srv.send(peer, b"hi")
            print(cli.recv(timeout=2), cli.stats())

Every failure raises CtpError with the Rust side's reason (an invalid composite, a refusal by
the server, a closed session, a timeout). The endpoint makes progress only inside a call
(send, recv, flush, wait_open, close): a sender that stops calling does not resend or pace,
and a receiver that stops calling acknowledges nothing, so call flush() after the last send
when nothing else will be called for a while. One endpoint per thread at a time; the calls
release the GIL while they wait.
"""
from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

from concast import tools

URGENT = 1
_ERR = 512


class CtpError(RuntimeError):
    """The transport refused or failed; the message is the Rust side's reason."""


def library_path() -> Path:
    """$CONCAST_CTP_LIB, else concast.tools' lookup ($CONCAST_BIN, then the checkout's
    target/release)."""
    env = os.environ.get("CONCAST_CTP_LIB")
    if env:
        return Path(env)
    try:
        return tools.library("libconcast_transport.so")
    except tools.MissingTool as e:
        raise CtpError(str(e)) from None


_lib = None


def _load() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(str(library_path()))
        c, vp, sz, u32, i = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int
        for name in ("ctp_client", "ctp_server"):
            getattr(lib, name).argtypes = [c, c, c, sz, c, sz]
            getattr(lib, name).restype = vp
        lib.ctp_port.argtypes = [vp, c, sz]
        lib.ctp_port.restype = i
        lib.ctp_wait_open.argtypes = [vp, u32, c, sz]
        lib.ctp_wait_open.restype = i
        lib.ctp_send.argtypes = [vp, c, ctypes.c_char_p, sz, i, u32, c, sz]
        lib.ctp_send.restype = i
        lib.ctp_recv.argtypes = [vp, u32, ctypes.POINTER(sz), c, sz, c, sz]
        lib.ctp_recv.restype = ctypes.POINTER(ctypes.c_uint8)
        lib.ctp_free_buf.argtypes = [ctypes.POINTER(ctypes.c_uint8), sz]
        lib.ctp_free_buf.restype = None
        lib.ctp_flush.argtypes = [vp, u32, c, sz]
        lib.ctp_flush.restype = i
        lib.ctp_close.argtypes = [vp, u32, c, sz]
        lib.ctp_close.restype = i
        lib.ctp_stats.argtypes = [vp]
        lib.ctp_stats.restype = ctypes.c_void_p  # freed with ctp_free_str, so not c_char_p
        lib.ctp_free_str.argtypes = [ctypes.c_void_p]
        lib.ctp_free_str.restype = None
        lib.ctp_free.argtypes = [vp]
        lib.ctp_free.restype = None
        lib.ctp_check_composite.argtypes = [c, c, sz]
        lib.ctp_check_composite.restype = i
        _lib = lib
    return _lib


def _ms(timeout: float) -> int:
    if timeout < 0:
        raise ValueError(f"timeout must be >= 0 seconds, got {timeout}")
    return min(int(timeout * 1000), 2**32 - 1)


def check_composite(composite: str) -> None:
    """Raise CtpError with the reason if `composite` is not a valid composite."""
    err = ctypes.create_string_buffer(_ERR)
    if _load().ctp_check_composite(composite.encode(), err, _ERR) != 0:
        raise CtpError(err.value.decode())


class _Endpoint:
    _h = None

    def __init__(self, handle: int | None, err: ctypes.Array):
        if not handle:
            raise CtpError(err.value.decode())
        self._h = handle

    def _call(self, fn, *args) -> int:
        err = ctypes.create_string_buffer(_ERR)
        r = fn(self._handle(), *args, err, _ERR)
        if r < 0:
            raise CtpError(err.value.decode())
        return r

    def _handle(self) -> int:
        if not self._h:
            raise CtpError("endpoint already freed")
        return self._h

    def _send(self, peer: str | None, data: bytes, urgent: bool, timeout: float) -> None:
        data = bytes(data)
        self._call(_load().ctp_send, peer.encode() if peer else None, data, len(data),
                   URGENT if urgent else 0, _ms(timeout))

    def _recv(self, timeout: float) -> tuple[str, bytes] | None:
        lib = _load()
        n = ctypes.c_size_t(0)
        peer = ctypes.create_string_buffer(64)
        err = ctypes.create_string_buffer(_ERR)
        p = lib.ctp_recv(self._handle(), _ms(timeout), ctypes.byref(n), peer, 64, err, _ERR)
        if not p:
            if err.value:
                raise CtpError(err.value.decode())
            return None
        try:
            return peer.value.decode(), ctypes.string_at(p, n.value)
        finally:
            lib.ctp_free_buf(p, n.value)

    def stats(self) -> dict:
        """Counters and state as a dict (see ffi.rs `stats`)."""
        lib = _load()
        p = lib.ctp_stats(self._handle())
        try:
            return json.loads(ctypes.string_at(p).decode())
        finally:
            lib.ctp_free_str(p)

    def flush(self, timeout: float = 10.0) -> None:
        """Work the socket until everything sent has left (and been acknowledged, when the
        composite acknowledges)."""
        self._call(_load().ctp_flush, _ms(timeout))

    def close(self, timeout: float = 10.0) -> None:
        """Close once everything sent is acknowledged (as the composite defines it)."""
        if self._h:
            self._call(_load().ctp_close, _ms(timeout))

    def free(self) -> None:
        if self._h:
            _load().ctp_free(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self.close()
        finally:
            self.free()

    def __del__(self):
        self.free()


class Client(_Endpoint):
    """One session to a server. `composite`: a preset (Minimal, LossyFIFO, Video, Audio, Bulk)
    or microprotocols joined by '+'; `cc`: a congestion-control algorithm by name."""

    def __init__(self, addr: str, composite: str = "Bulk", cc: str = "newreno", mss: int = 0):
        err = ctypes.create_string_buffer(_ERR)
        h = _load().ctp_client(addr.encode(), composite.encode(), cc.encode(), mss, err, _ERR)
        super().__init__(h, err)

    def wait_open(self, timeout: float = 5.0) -> None:
        """Until the server accepted the session; CtpError with its reason if it refused."""
        self._call(_load().ctp_wait_open, _ms(timeout))

    def send(self, data: bytes, urgent: bool = False, timeout: float = 10.0) -> None:
        """One message (its boundaries are kept); waits while the send buffer is full."""
        self._send(None, data, urgent, timeout)

    def recv(self, timeout: float = 1.0) -> bytes | None:
        """The next message, or None after `timeout` seconds."""
        got = self._recv(timeout)
        return None if got is None else got[1]


class Server(_Endpoint):
    """Sessions from any number of clients on one UDP socket. `composite` None accepts any
    valid composite; a name serves only that one and refuses others with the reason."""

    def __init__(self, addr: str = "127.0.0.1:0", composite: str | None = None,
                 cc: str = "newreno", mss: int = 0):
        err = ctypes.create_string_buffer(_ERR)
        h = _load().ctp_server(addr.encode(), composite.encode() if composite else None,
                               cc.encode(), mss, err, _ERR)
        super().__init__(h, err)

    @property
    def port(self) -> int:
        return self._call(_load().ctp_port)

    def send(self, peer: str, data: bytes, urgent: bool = False, timeout: float = 10.0) -> None:
        self._send(peer, data, urgent, timeout)

    def recv(self, timeout: float = 1.0) -> tuple[str, bytes] | None:
        """(peer "ip:port", message), or None after `timeout` seconds."""
        return self._recv(timeout)
