"""The Python binding of the host transport (concast.hosts.ctp over the crate's C ABI), over
loopback UDP: bytes through Bulk end to end, refusals with the Rust side's reason, urgent
messages, stats. Needs libconcast_transport.so (`make build` or
`cargo build --release -p concast-transport`)."""
from __future__ import annotations

import hashlib
import os
import threading

import pytest

from concast.hosts import ctp

MB = 1 << 20


def serve(srv: ctp.Server, want: int, out: dict) -> None:
    """Receive until `want` bytes came, hash them, answer with the hash."""
    h, got, peer = hashlib.sha256(), 0, None
    while got < want:
        r = srv.recv(timeout=20)
        if r is None:
            break
        peer, msg = r
        h.update(msg)
        got += len(msg)
    out.update(bytes=got, sha=h.hexdigest(), peer=peer)
    if peer:
        srv.send(peer, h.hexdigest().encode())


def test_one_megabyte_through_bulk_arrives_identical_at_both_ends():
    data = os.urandom(MB)
    out: dict = {}
    with ctp.Server("127.0.0.1:0", composite="Bulk") as srv:
        t = threading.Thread(target=serve, args=(srv, len(data), out))
        t.start()
        with ctp.Client(f"127.0.0.1:{srv.port}", composite="Bulk", cc="newreno") as cli:
            cli.wait_open(timeout=5)
            for i in range(0, len(data), 60_000):
                cli.send(data[i:i + 60_000])
            reply = cli.recv(timeout=30)
            stats = cli.stats()
        t.join(timeout=60)
        srv_stats = srv.stats()
    assert out["bytes"] == MB
    assert out["sha"] == hashlib.sha256(data).hexdigest()
    assert reply == hashlib.sha256(data).hexdigest().encode(), "the client got the server's hash"
    s = stats["session"]
    assert s["composite"] == "Bulk" and s["bytes_sent"] >= MB and s["srtt_us"] > 0
    assert stats["opened"] and srv_stats["role"] == "server"


def test_an_invalid_composite_raises_with_the_reason():
    with pytest.raises(ctp.CtpError, match="xon-xoff conflicts with rts-cts"):
        ctp.Client("127.0.0.1:9", composite="xon-xoff+rts-cts")
    with pytest.raises(ctp.CtpError, match="reliable-fifo requires"):
        ctp.check_composite("reliable-fifo")
    with pytest.raises(ctp.CtpError, match="unknown congestion control"):
        ctp.Client("127.0.0.1:9", composite="Bulk", cc="warp")
    with pytest.raises(ctp.CtpError, match="negative-ack conflicts with duplicate-ack"):
        ctp.check_composite("Bulk+negative-ack")
    ctp.check_composite("Bulk+out-of-band")  # valid: no exception


def test_the_servers_refusal_reaches_the_client_with_the_reason():
    with ctp.Server("127.0.0.1:0", composite="Bulk") as srv:
        stop = threading.Event()
        t = threading.Thread(target=lambda: [srv.recv(timeout=0.05) for _ in iter(stop.is_set, True)])
        t.start()
        try:
            cli = ctp.Client(f"127.0.0.1:{srv.port}", composite="Minimal")
            with pytest.raises(ctp.CtpError, match="composite mismatch: peer asked for Minimal, this end serves Bulk"):
                cli.wait_open(timeout=5)
                cli.send(b"x")
                cli.recv(timeout=5)
            cli.free()
        finally:
            stop.set()
            t.join()


def test_messages_keep_boundaries_and_an_urgent_one_is_flagged_through():
    got: list = []
    with ctp.Server("127.0.0.1:0") as srv:  # any valid composite
        def take():
            while len(got) < 4 and (r := srv.recv(timeout=10)) is not None:
                got.append(r)
        t = threading.Thread(target=take)
        t.start()
        with ctp.Client(f"127.0.0.1:{srv.port}", composite="Bulk+out-of-band") as cli:
            cli.wait_open(timeout=5)
            for m in (b"one", b"", b"three" * 1000):
                cli.send(m)
            cli.send(b"urgent", urgent=True)
            cli.flush(timeout=10)
            t.join(timeout=20)
            composite = srv.stats()["sessions"][got[0][0]]["composite"]
            cli.close()
            with pytest.raises(ctp.CtpError, match="closed"):
                cli.send(b"after close")
        assert [g[1] for g in got] == [b"one", b"", b"three" * 1000, b"urgent"]
        assert "out-of-band" in composite and "reliable-fifo" in composite
        with pytest.raises(ctp.CtpError, match="already freed"):
            cli.send(b"after free")
