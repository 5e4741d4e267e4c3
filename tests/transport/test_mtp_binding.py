"""The Python binding of MTP (concast.hosts.mtp over the crate's C ABI, ffi_mtp.rs), over
loopback UDP: objects served from memory, a directory and size:N come back byte-exact, each
failure is its own exception with the Rust side's reason, stats are filled, two clients at
once. Needs libconcast_transport.so (`make build` or `cargo build --release --workspace`).
No timing assertions: timeouts here only bound how long a failure may take."""
from __future__ import annotations

import hashlib
import socket
import threading

import pytest

from concast.hosts import mtp

MB = 1 << 20


def pattern_bytes(n: int) -> bytes:
    """n bytes that differ at every offset a misplaced datagram could land on."""
    out = b"".join(hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range((n + 31) // 32))
    return out[:n]


BIG = pattern_bytes(MB)
SMALL = pattern_bytes(700)[::-1]


@pytest.fixture
def server():
    with mtp.MtpServer("127.0.0.1:0") as srv:
        srv.put("big", BIG)
        srv.put(b"small", SMALL)
        yield srv, f"127.0.0.1:{srv.port}"


def test_a_multi_datagram_and_a_single_datagram_object_arrive_byte_exact(server):
    srv, addr = server
    with mtp.MtpClient() as cli:
        big = cli.get(addr, "big", timeout=60)
        s = cli.stats()
        small = cli.get(addr, "small", timeout=20)
        single = cli.get(addr, "small", timeout=20, single=True)
        after = cli.stats()
    assert len(big) == MB and hashlib.sha256(big).digest() == hashlib.sha256(BIG).digest()
    assert small == SMALL and single == SMALL
    # the dissertation's window (per transaction), sampled while the 1 MiB one ran
    assert s["cc"] == "mtp"
    assert s["window"] >= 1 and s["peak_window"] >= s["window"], s
    assert 512 <= s["datagram_size"] <= 1400, s
    assert s["window_bytes"] >= s["datagram_size"], s
    assert s["window"] == pytest.approx(s["window_bytes"] / s["datagram_size"]), s
    assert s["min_rtt_us"] > 0 and s["mean_rtt_us"] >= s["min_rtt_us"], s
    assert s["transit_bytes"] is not None and s["transit_bytes"] >= 0, s
    assert s["repeat_interval_us"] >= 500_000, s  # the floor (ch. V)
    c = s["counters"]
    # a request fetches up to a window of datagrams (ch. V "Mechanisms"): the first, the
    # initial window's 104 (half of 212992 bytes over 1024)
    assert c["replies"] >= MB // 1400 and c["requests"] + 100 <= c["replies"], c
    assert s["losses"] == c["timeouts"] + c["fast_repeats"]
    assert (after["gets"], after["done"], after["failed"]) == (3, 3, 0)
    assert after["bytes"] == MB + 2 * len(SMALL)
    assert after["window"] == 1  # the single-datagram transaction has no window
    assert srv.stats()["queries"] >= c["requests"]


def test_files_of_a_directory_and_generated_objects(tmp_path):
    body = pattern_bytes(5000)
    (tmp_path / "file.bin").write_bytes(body)
    with mtp.MtpServer("127.0.0.1:0", dir=tmp_path) as srv, mtp.MtpClient(link="ethernet") as cli:
        addr = f"127.0.0.1:{srv.port}"
        assert cli.get(addr, "file.bin", timeout=20) == body
        assert cli.get(addr, "size:4000", timeout=20) == mtp.generated(4000)
        with pytest.raises(mtp.MtpRefused, match="not a plain file name"):
            cli.get(addr, "../etc/passwd", timeout=20)
        assert cli.stats()["link"] == "ethernet"


def test_a_missing_object_is_refused_with_the_servers_reason(server):
    srv, addr = server
    with mtp.MtpClient() as cli:
        with pytest.raises(mtp.MtpRefused, match='no object named "nothing"') as e:
            cli.get(addr, "nothing", timeout=20)
        assert e.value.code == mtp.E_REFUSED
        srv.remove("small")
        with pytest.raises(mtp.MtpRefused):
            cli.get(addr, "small", timeout=20)
        with pytest.raises(mtp.MtpError, match="no object named"):
            srv.remove("small")
        st = cli.stats()
    assert st["failed"] == 2 and "refused" in st["last_error"]
    assert srv.stats()["refused"] >= 2


def test_silence_expires_and_the_calls_timeout_destroys():
    # a UDP socket that never answers: requests go nowhere
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mute:
        mute.bind(("127.0.0.1", 0))
        mute.settimeout(5)
        addr = f"127.0.0.1:{mute.getsockname()[1]}"
        with mtp.MtpClient(expire=30) as cli:
            with pytest.raises(mtp.MtpExpired, match="expired") as e:
                cli.get(addr, "size:10", timeout=30, expire=0.3)
            assert e.value.code == mtp.E_EXPIRED
            with pytest.raises(mtp.MtpTimeout, match="timed out") as e:
                cli.get(addr, "size:10", timeout=0.3)
            assert e.value.code == mtp.E_TIMEOUT
            st = cli.stats()
        assert mute.recv(2048)[:1] == b"\xc9", "the requests did reach the socket"
    assert (st["done"], st["failed"]) == (0, 2)
    assert st["counters"]["replies"] == 0 and st["counters"]["requests"] >= 2


def test_get_many_fetches_at_once_and_reports_each_failure(server):
    srv, addr = server
    with mtp.MtpClient() as cli:
        got = cli.get_many(addr, ["big", "nothing", b"small", "size:3000"], timeout=60)
        st = cli.stats()
        with pytest.raises(mtp.MtpError, match="no names"):
            cli.get_many(addr, [])
    assert len(got) == 4
    assert got[0] == BIG and got[2] == SMALL and got[3] == mtp.generated(3000)
    assert isinstance(got[1], mtp.MtpRefused) and got[1].code == mtp.E_REFUSED
    assert 'no object named "nothing"' in str(got[1])
    assert (st["gets"], st["done"], st["failed"]) == (4, 3, 1)
    assert st["bytes"] == MB + len(SMALL) + 3000


def test_an_object_over_max_object_is_too_large(server):
    _, addr = server
    with mtp.MtpClient(max_object=10_000) as cli:
        with pytest.raises(mtp.MtpTooLarge, match="larger than max_object") as e:
            cli.get(addr, "big", timeout=20)
        assert e.value.code == mtp.E_TOO_LARGE
        assert cli.get(addr, "small", timeout=20) == SMALL


def test_two_clients_at_once_each_get_the_whole_object(server):
    srv, addr = server
    start = threading.Barrier(2)
    got: dict = {}

    def fetch(k: int) -> None:
        try:
            with mtp.MtpClient(window="mtp" if k == 0 else "mtp-cubic") as cli:
                start.wait(timeout=10)
                got[k] = (cli.get(addr, "big", timeout=60), cli.stats())
        except Exception as e:  # reported below, not lost in the thread
            got[k] = e

    threads = [threading.Thread(target=fetch, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for k in range(2):
        assert not isinstance(got.get(k), Exception), got.get(k)
        data, st = got[k]
        assert data == BIG, f"client {k}"
        assert st["window"] >= 1 and st["counters"]["replies"] > 0
    assert {got[0][1]["cc"], got[1][1]["cc"]} == {"mtp", "mtp-cubic"}
    assert got[0][1]["server"] == got[1][1]["server"] == addr
    assert srv.stats()["queries"] >= 2 * (MB // 1400)


def test_the_servers_response_limit_and_a_bound_client(server):
    _, addr = server
    with mtp.MtpServer("127.0.0.1:0", limit=500) as lim:
        lim.put("big", BIG)
        with mtp.MtpClient(bind="127.0.0.1:0") as cli:
            assert cli.get(f"127.0.0.1:{lim.port}", "big", timeout=60) == BIG
            st = cli.stats()
            assert st["counters"]["server_limited"] > 0
            assert st["counters"]["replies"] >= MB // 500
            assert cli.get(addr, "small", timeout=20) == SMALL  # port 0: any number of servers
        assert lim.stats()["limit"] == 500
    with pytest.raises(mtp.MtpError, match="bind address"):
        mtp.MtpClient(bind="localhost")


def test_bad_arguments_raise_with_the_reason():
    with pytest.raises(mtp.MtpError, match='unknown window rule "warp"'):
        mtp.MtpClient(window="warp")
    with pytest.raises(mtp.MtpError, match="unknown link type"):
        mtp.MtpClient(link="pigeon")
    with pytest.raises(mtp.MtpError, match="rcvbuf"):
        mtp.MtpClient(rcvbuf=100)
    with pytest.raises(mtp.MtpError, match="not a directory"):
        mtp.MtpServer("127.0.0.1:0", dir="/nonexistent/mtp-dir")
    with pytest.raises(mtp.MtpError):
        mtp.MtpServer("no-such-host.invalid:0")
    with mtp.MtpClient() as cli:
        with pytest.raises(mtp.MtpError, match="1 to 1024 bytes, got 0"):
            cli.get("127.0.0.1:9", "", timeout=1)
        with pytest.raises(mtp.MtpError, match="timeout must be >= 0"):
            cli.get("127.0.0.1:9", "x", timeout=-1)
        with pytest.raises(mtp.MtpError, match="address"):
            cli.get("not an address", "x", timeout=1)
    with pytest.raises(mtp.MtpError, match="already freed"):
        cli.get("127.0.0.1:9", "x", timeout=1)


def test_a_stopped_server_keeps_its_counters(server):
    srv, addr = server
    with mtp.MtpClient() as cli:
        assert cli.get(addr, "small", timeout=20) == SMALL
    srv.stop()
    st = srv.stats()
    assert st["running"] is False
    assert st["final"]["replies"] >= 1 and st["final"]["requests"] == st["queries"]
    srv.stop()  # twice is harmless


def test_channels_the_server_names_come_back_and_name_less_requests_use_them(server):
    # ch. V "Channel Identifiers" / "Payload Suppression": the server names "big" by channel
    # 7; the client hands the channel back (last_channel) and its later subrequests go without
    # the name (the server's by_channel count); once the server forgets the channel, a request
    # on it names the object and gets the object, with the request's channel back
    srv, addr = server
    srv.set_channel(7, "big")
    assert srv.stats()["channels"] == {"7": "big"}
    with mtp.MtpClient() as cli:
        assert cli.last_channel is None
        assert cli.get(addr, "big", timeout=60) == BIG
        assert cli.last_channel == 7 and cli.stats()["channel"] == 7
        assert cli.get(addr, "small", timeout=20, channel=3) == SMALL
        assert cli.last_channel == 3  # named by no channel: the request's own comes back
        srv.set_channel(7, None)
        assert srv.stats()["channels"] == {}
        assert cli.get(addr, "big", timeout=60, channel=7) == BIG
        assert cli.last_channel == 7
    srv.stop()
    final = srv.stats()["final"]
    assert final["by_channel"] >= MB // 1400 // 2, final
    with mtp.MtpClient() as cli:
        for bad in (-1, 256, "7"):
            with pytest.raises(mtp.MtpError, match="channel must be 0..255"):
                cli.get(addr, "big", timeout=1, channel=bad)
    for bad in (0, 256):
        with pytest.raises(mtp.MtpError, match="channel must be 1..255"):
            srv.set_channel(bad, "big")
    with pytest.raises(mtp.MtpError, match="must not be empty"):
        srv.set_channel(5, "")


def test_stats_show_the_receive_buffer_watch(server):
    # the socket's view of ch. V's receive-buffer watch: the buffer the kernel gave (Linux
    # doubles what is asked, capped by rmem_max), its overflow drops and the watch's cuts
    _, addr = server
    with mtp.MtpClient(rcvbuf=100_000) as cli:
        assert cli.get(addr, "big", timeout=60) == BIG
        st = cli.stats()
    rmem_max = int(open("/proc/sys/net/core/rmem_max").read())
    assert st["kernel_rcvbuf"] == 2 * min(100_000, rmem_max), st
    assert st["rcvbuf_drops"] >= 0 and st["watch_cuts"] >= 0, st
    assert st["watch_cuts"] == st["counters"]["overflow_cuts"], st
