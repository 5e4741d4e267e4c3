"""The page a web server sends, and the HTTP/1.0 framing around it.

Content: SHAKE-256 of "concast-page/<seed>" stretched to `size` bytes, so a client
knows the expected bytes (and their SHA-256) from (size, seed) alone and any
corruption or truncation shows up as a hash mismatch.
"""
from __future__ import annotations

import hashlib

DEFAULT_SIZE = 4096
MAX_SIZE = 64 << 20
MAX_HEADER = 4096


def content(size: int = DEFAULT_SIZE, seed: int = 0) -> bytes:
    if not 0 <= size <= MAX_SIZE:
        raise ValueError(f"page size {size}: must be 0..{MAX_SIZE} bytes")
    return hashlib.shake_256(f"concast-page/{seed}".encode()).digest(size) if size else b""


def sha256(size: int = DEFAULT_SIZE, seed: int = 0) -> str:
    return hashlib.sha256(content(size, seed)).hexdigest()


def request(path: str = "/") -> bytes:
    return f"GET {path} HTTP/1.0\r\n\r\n".encode()


def response_head(size: int) -> bytes:
    return (f"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: {size}\r\nConnection: close\r\n\r\n").encode()


class BadResponse(ValueError):
    pass


def split_response(data: bytes) -> tuple[int, bytes]:
    """(status, body) of a complete HTTP/1.0 response, the body cut to Content-Length.
    Raises BadResponse for a missing or malformed head or a short body."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        raise BadResponse("no end of header")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise BadResponse(f"bad status line {lines[0][:60]!r}")
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            if not value.strip().isdigit():
                raise BadResponse(f"bad Content-Length {value.strip()[:20]!r}")
            length = int(value)
    if length is not None:
        if len(body) < length:
            raise BadResponse(f"short body: {len(body)} of {length} bytes")
        body = body[:length]
    return int(parts[1]), body


def request_complete(data: bytes) -> bool:
    return b"\r\n\r\n" in data or b"\n\n" in data
