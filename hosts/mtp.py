"""MTP transactions from Python: a ctypes binding of the C ABI in
hosts/transport/src/ffi_mtp.rs (the same libconcast_transport.so as concast.hosts.ctp).

    from concast.hosts import mtp
    with mtp.MtpServer("127.0.0.1:0") as srv:            # answers on its own thread
        srv.put("hello", b"hi there")                    # besides size:N and dir= files
        with mtp.MtpClient(window="mtp", link="ethernet") as cli:
            data = cli.get(f"127.0.0.1:{srv.port}", "hello", timeout=10)
            print(cli.stats()["window"], cli.stats()["counters"]["repeats"])
            pages = cli.get_many(f"127.0.0.1:{srv.port}", ["hello", "size:5000"])  # at once
        srv.set_channel(7, "hello")                      # the server names "hello" by channel 7
        data = cli.get(addr, "hello"); cli.last_channel  # -> 7, to reuse: get(..., channel=7)
        cli.stats()["watch_cuts"], cli.stats()["rcvbuf_drops"]   # the receive-buffer watch

Every failure raises a subclass of MtpError carrying the Rust side's reason and its code:
MtpRefused (the server refused: no such object ...), MtpExpired (no reply for the expire
time), MtpTimeout (the call's own timeout passed; the transaction is destroyed), MtpTooLarge
(over the client's max_object), MtpAborted, and MtpError itself for bad arguments, socket
errors and caught panics. A client is used by one thread at a time; get() releases the GIL
while it waits, so several clients (and a server) can run in threads of one process.
"""
from __future__ import annotations

import ctypes
import json
import os

from concast.hosts import ctp

_ERR = 512

# ffi_mtp.rs's MTP_E_* and MTP_SINGLE
E_ARG, E_EXPIRED, E_TIMEOUT, E_REFUSED, E_TOO_LARGE, E_ABORTED, E_IO, E_PANIC = range(-1, -9, -1)
SINGLE = 1


class MtpError(RuntimeError):
    """MTP refused or failed; the message is the Rust side's reason, `code` its MTP_E_* code."""

    code = E_ARG

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code


class MtpExpired(MtpError):
    """No reply at all for the transaction's expire time (mtp.h ERR_NET_EXPIRE)."""
    code = E_EXPIRED


class MtpTimeout(MtpError):
    """The call's timeout passed before the object was whole; the transaction was destroyed."""
    code = E_TIMEOUT


class MtpRefused(MtpError):
    """The server refused the request (no object of that name, an unreadable file, ...)."""
    code = E_REFUSED


class MtpTooLarge(MtpError):
    """The object is larger than the client's max_object."""
    code = E_TOO_LARGE


class MtpAborted(MtpError):
    """The transaction ended without the whole object."""
    code = E_ABORTED


_BY_CODE = {c.code: c for c in (MtpExpired, MtpTimeout, MtpRefused, MtpTooLarge, MtpAborted)}


def _raise(code: int, err: ctypes.Array) -> None:
    raise _BY_CODE.get(code, MtpError)(err.value.decode(errors="replace"), code)


_lib = None


def _load() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        try:
            path = ctp.library_path()
        except ctp.CtpError as e:
            raise MtpError(str(e)) from None
        lib = ctypes.CDLL(str(path))
        c, vp, sz, u32, i = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int
        u8p = ctypes.POINTER(ctypes.c_uint8)
        lib.mtp_server_new.argtypes = [c, c, sz, c, sz]
        lib.mtp_server_new.restype = vp
        lib.mtp_server_port.argtypes = [vp, c, sz]
        lib.mtp_server_port.restype = i
        lib.mtp_server_put.argtypes = [vp, c, sz, c, sz, c, sz]
        lib.mtp_server_put.restype = i
        lib.mtp_server_channel.argtypes = [vp, u32, c, sz, c, sz]
        lib.mtp_server_channel.restype = i
        lib.mtp_server_remove.argtypes = [vp, c, sz, c, sz]
        lib.mtp_server_remove.restype = i
        lib.mtp_server_stop.argtypes = [vp, c, sz]
        lib.mtp_server_stop.restype = i
        lib.mtp_client_new.argtypes = [c, c, sz, sz, u32, u32, u32, c, c, sz]
        lib.mtp_client_new.restype = vp
        lib.mtp_get.argtypes = [vp, c, c, sz, u32, u32, u32, ctypes.POINTER(u8p), ctypes.POINTER(sz), c, sz]
        lib.mtp_get.restype = i
        lib.mtp_get_channel.argtypes = [vp, c, c, sz, u32, u32, u32, u32, ctypes.POINTER(u8p),
                                        ctypes.POINTER(sz), ctypes.POINTER(u32), c, sz]
        lib.mtp_get_channel.restype = i
        lib.mtp_get_many.argtypes = [vp, c, ctypes.POINTER(c), ctypes.POINTER(sz), sz, u32, u32, u32,
                                     ctypes.POINTER(u8p), ctypes.POINTER(sz), ctypes.POINTER(i),
                                     ctypes.POINTER(vp), c, sz]
        lib.mtp_get_many.restype = i
        lib.mtp_free_buf.argtypes = [u8p, sz]
        lib.mtp_free_buf.restype = None
        for name in ("mtp_server_stats", "mtp_client_stats"):
            getattr(lib, name).argtypes = [vp]
            getattr(lib, name).restype = vp  # freed with mtp_free_str, so not c_char_p
        lib.mtp_free_str.argtypes = [vp]
        lib.mtp_free_str.restype = None
        for name in ("mtp_server_free", "mtp_client_free"):
            getattr(lib, name).argtypes = [vp]
            getattr(lib, name).restype = None
        _lib = lib
    return _lib


def generated(n: int) -> bytes:
    """The bytes of the server's generated object `size:N` (docs/transport.md: byte i is the
    low byte of splitmix64's output for i), computed here in Python so that a fetched object
    can be checked against something that is not the server's own Rust code."""
    m = (1 << 64) - 1
    out = bytearray(n)
    for i in range(n):
        x = (i + 0x9E3779B97F4A7C15) & m
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
        out[i] = (x ^ (x >> 31)) & 0xFF
    return bytes(out)


def _ms(seconds: float | None, what: str) -> int:
    """Seconds to the ABI's milliseconds; None is 0 (the default)."""
    if seconds is None:
        return 0
    if seconds < 0:
        raise MtpError(f"{what} must be >= 0 seconds, got {seconds}")
    return min(int(seconds * 1000), 2**32 - 1)


def _name(name: str | bytes) -> bytes:
    return name.encode() if isinstance(name, str) else bytes(name)


def _json(lib: ctypes.CDLL, p: int | None) -> dict:
    if not p:
        raise MtpError("handle already freed")
    try:
        return json.loads(ctypes.string_at(p).decode())
    finally:
        lib.mtp_free_str(p)


class _Handle:
    _h = None
    _free = ""

    def _handle(self) -> int:
        if not self._h:
            raise MtpError("handle already freed")
        return self._h

    def _call(self, fn, *args) -> int:
        err = ctypes.create_string_buffer(_ERR)
        r = fn(self._handle(), *args, err, _ERR)
        if r < 0:
            _raise(r, err)
        return r

    def free(self) -> None:
        if self._h:
            getattr(_load(), self._free)(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __del__(self):
        self.free()


class MtpServer(_Handle):
    """A stateless MTP server answering on its own thread from the moment it is made: objects
    put() by name, the files of `dir` by plain name, and the generated `size:N` objects (N
    pattern bytes). `addr` "host:port"; port 0 picks one (see `port`). `limit`: the server's
    response limit per request, bytes (0: none); the client bounds its later requests by it."""

    _free = "mtp_server_free"

    def __init__(self, addr: str = "127.0.0.1:0", dir: str | os.PathLike | None = None, limit: int = 0):
        if limit < 0:
            raise MtpError(f"limit must be >= 0, got {limit}")
        err = ctypes.create_string_buffer(_ERR)
        h = _load().mtp_server_new(addr.encode(), os.fsencode(dir) if dir is not None else None, limit,
                                   err, _ERR)
        if not h:
            raise MtpError(err.value.decode(errors="replace"))
        self._h = h

    @property
    def port(self) -> int:
        return self._call(_load().mtp_server_port)

    def put(self, name: str | bytes, data: bytes) -> None:
        """Serve `data` as `name` (replacing an object of that name); copied, so later changes
        to `data` are not seen."""
        n, data = _name(name), bytes(data)
        self._call(_load().mtp_server_put, n, len(n), data, len(data))

    def set_channel(self, channel: int, name: str | bytes | None) -> None:
        """Name the object `name` by `channel` (1-255; the dissertation's ch. V "Payload
        Suppression"): replies for it carry the channel, clients take it (MtpClient.last_channel)
        and leave the name out of their later requests. None forgets the channel: a request
        on it then gets a channel error, and the client sends the name again."""
        if not isinstance(channel, int) or not 1 <= channel <= 255:
            raise MtpError(f"channel must be 1..255, got {channel!r}")
        n = _name(name) if name is not None else b""
        if name is not None and not n:
            raise MtpError("name must not be empty (None forgets the channel)")
        self._call(_load().mtp_server_channel, channel, n, len(n))

    def remove(self, name: str | bytes) -> None:
        """Stop serving the object `name` (MtpError if there is none)."""
        n = _name(name)
        self._call(_load().mtp_server_remove, n, len(n))

    def stop(self) -> None:
        """Stop answering; stats() then also has the serving loop's `final` counters."""
        self._call(_load().mtp_server_stop)

    def stats(self) -> dict:
        """addr, running, objects, queries, refused (live); `final` after stop()."""
        lib = _load()
        return _json(lib, lib.mtp_server_stats(self._handle()))

    def __exit__(self, *exc) -> None:
        try:
            if self._h:
                self.stop()
        finally:
            self.free()


class MtpClient(_Handle):
    """An MTP client: fetches whole objects from any number of servers (one socket each).

    window: the window rules, "mtp" (the dissertation's, one window per transaction) or, for
    comparison, "mtp-cubic", "mtp-halve" or a congestion-control name; link: an mtp.h link-type
    hint (unknown, modem, isdn, isdn2, dsl, cable, ethernet, fast); rcvbuf: the receive buffer
    the window caps assume (bytes); max_size: the largest payload asked for per datagram;
    repeat_floor: the repeat interval's floor (seconds; the dissertation's 0.5); expire: the
    default expire time (seconds without any reply); max_object: the largest object accepted;
    bind: the local "ip:port" of its sockets (port 0 picks one; a fixed port allows one server
    per client). None or 0 keeps each default (docs/transport.md, "MTP")."""

    _free = "mtp_client_free"
    #: The channel the server's replies named in the last completed get() (ch. V "Channel
    #: Identifiers": handed back for reuse as get(..., channel=...)); None before any.
    last_channel: int | None = None

    def __init__(self, window: str | None = None, link: str | None = None, rcvbuf: int = 0,
                 max_size: int = 0, repeat_floor: float | None = None,
                 expire: float | None = None, max_object: int = 0, bind: str | None = None):
        for what, v in (("rcvbuf", rcvbuf), ("max_size", max_size)):
            if v < 0:
                raise MtpError(f"{what} must be >= 0, got {v}")
        if not 0 <= max_object < 2**32:
            raise MtpError(f"max_object must be 0..{2**32 - 1}, got {max_object}")
        err = ctypes.create_string_buffer(_ERR)
        h = _load().mtp_client_new(window.encode() if window else None, link.encode() if link else None,
                                   rcvbuf, max_size, _ms(repeat_floor, "repeat_floor"),
                                   _ms(expire, "expire"), max_object,
                                   bind.encode() if bind else None, err, _ERR)
        if not h:
            raise MtpError(err.value.decode(errors="replace"))
        self._h = h

    def get(self, server: str, name: str | bytes, timeout: float = 30.0,
            expire: float | None = None, single: bool = False, channel: int = 0) -> bytes:
        """The whole object `name` from `server` ("host:port"). `expire` (seconds) overrides
        the client's expire time for this transaction; `single` makes it a single-datagram
        transaction (one request, no flow control); `channel` (0-255) is the request's channel
        (one a server handed back before, say). Afterwards `last_channel` is the channel the
        server's replies named. Raises MtpRefused, MtpExpired, MtpTimeout, MtpTooLarge,
        MtpAborted or MtpError."""
        if not isinstance(channel, int) or not 0 <= channel <= 255:
            raise MtpError(f"channel must be 0..255, got {channel!r}")
        lib = _load()
        n = _name(name)
        out = ctypes.POINTER(ctypes.c_uint8)()
        size = ctypes.c_size_t(0)
        named = ctypes.c_uint32(channel)
        err = ctypes.create_string_buffer(_ERR)
        r = lib.mtp_get_channel(self._handle(), server.encode(), n, len(n), channel, _ms(expire, "expire"),
                                SINGLE if single else 0, _ms(timeout, "timeout"), ctypes.byref(out),
                                ctypes.byref(size), ctypes.byref(named), err, _ERR)
        if r < 0:
            _raise(r, err)
        self.last_channel = named.value
        if not out:
            return b""
        try:
            return ctypes.string_at(out, size.value)
        finally:
            lib.mtp_free_buf(out, size.value)

    def get_many(self, server: str, names: list[str | bytes], timeout: float = 30.0,
                 expire: float | None = None, single: bool = False) -> list[bytes | MtpError]:
        """Every object of `names` from `server` at once, one transaction each (each with its
        own window under the dissertation's rules), waiting up to `timeout` for all. Returns one
        entry per name, in order: its bytes, or the MtpError subclass it failed with (not
        raised). Raises MtpError only when nothing could be fetched (a bad argument, a socket
        error)."""
        lib = _load()
        ns = [_name(n) for n in names]
        k = len(ns)
        if k == 0:
            raise MtpError("no names to fetch")
        c_names = (ctypes.c_char_p * k)(*ns)
        c_lens = (ctypes.c_size_t * k)(*(len(n) for n in ns))
        outs = (ctypes.POINTER(ctypes.c_uint8) * k)()
        out_lens = (ctypes.c_size_t * k)()
        codes = (ctypes.c_int * k)()
        reasons = (ctypes.c_void_p * k)()
        err = ctypes.create_string_buffer(_ERR)
        r = lib.mtp_get_many(self._handle(), server.encode(), c_names, c_lens, k, _ms(expire, "expire"),
                             SINGLE if single else 0, _ms(timeout, "timeout"), outs, out_lens, codes,
                             reasons, err, _ERR)
        if r < 0:
            _raise(r, err)
        got: list[bytes | MtpError] = []
        for j in range(k):
            try:
                if codes[j] == 0:
                    got.append(ctypes.string_at(outs[j], out_lens[j]) if outs[j] else b"")
                else:
                    why = ctypes.string_at(reasons[j]).decode(errors="replace") if reasons[j] else ""
                    got.append(_BY_CODE.get(codes[j], MtpError)(why, codes[j]))
            finally:
                if outs[j]:
                    lib.mtp_free_buf(outs[j], out_lens[j])
                if reasons[j]:
                    lib.mtp_free_str(reasons[j])
        return got

    def stats(self) -> dict:
        """The options, gets/done/failed/bytes, the last transaction's flow (window in
        datagrams, window_bytes, datagram_size, flowtimeout_bytes, repeat_interval_us,
        min_rtt_us, mean_rtt_us, transit_bytes), losses declared, the client's counters
        (`counters`: requests, repeats, replies, timeouts, ...) toward the last server, its
        socket's kernel_rcvbuf, rcvbuf_drops (datagrams the kernel dropped for a full receive
        buffer) and watch_cuts (windows the receive-buffer watch cut, ch. V), and `channel`
        (the last completed transaction's, as last_channel)."""
        lib = _load()
        return _json(lib, lib.mtp_client_stats(self._handle()))
