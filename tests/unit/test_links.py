"""topologies/links.py and linkstate.py: which links a network gets, parameter checks, and
(root only) the daemon's control protocol and state file as the Python side sees them, with
TAPs in a namespace this test creates and no traffic."""
from __future__ import annotations

import os
import struct
import subprocess

import pytest

from concast.netns import Scratch
from concast.topologies import links
from concast.topologies.linkstate import StateReader


def test_which_links_a_network_gets():
    assert links.link_kind(None, [{}, {"bw": 10}]) == "tclink"
    assert links.link_kind(None, [{}, {"delay": "5ms"}]) == "emu"
    assert links.link_kind(None, [{"loss": 1}]) == "emu"
    assert links.link_kind(None, [{"max_queue_size": 20}]) == "emu"
    assert links.link_kind(None, [{"delay": "0ms"}]) == "tclink"
    assert links.link_kind(True, [{}]) == "emu"
    assert links.link_kind(False, [{"delay": "5ms"}]) == "tclink"


def test_netem_choice_fails_loudly_without_netem():
    if links.netem_available():
        assert links.link_kind("netem", [{"delay": "5ms"}]) == "tclink"
    else:
        with pytest.raises(RuntimeError, match="no netem"):
            links.link_kind("netem", [{}])


def test_parameters_are_checked_before_sending():
    assert links._jsonable({"loss": "5%", "delay": "10ms"}) == {"loss": 5.0, "delay": "10ms"}
    with pytest.raises(ValueError, match="unknown link parameter 'jitter'"):
        links._jsonable({"jitter": "1ms"})


def test_reader_rejects_other_files(tmp_path):
    bad = tmp_path / "x"
    bad.write_bytes(b"NOTCCLQ!" + bytes(56))
    with pytest.raises(ValueError, match="not a linkemu state file"):
        StateReader(bad)
    short = tmp_path / "y"
    short.write_bytes(b"CCLQ0001" + struct.pack("<II", 1, 10) + bytes(48))
    with pytest.raises(ValueError, match="shorter"):
        StateReader(short)


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not links.BINARY.exists(),
                                reason=f"needs root and {links.BINARY}")


@pytest.fixture
def emu(tmp_path):
    with Scratch() as scratch:
        ns = scratch.add(f"lemunit-{os.getpid()}")
        e = links.LinkEmulator(tmp_path, f"u{os.getpid()}", slots=8, realtime=0).start()
        try:
            yield e, ns
        finally:
            e.stop()


def iface_exists(ns: str, name: str) -> bool:
    return subprocess.run(["ip", "-n", ns, "link", "show", name], capture_output=True).returncode == 0


@needs_root
def test_daemon_slots_and_state_file(emu):
    e, ns = emu
    end = lambda name, mac=None: {"netns": ns, "name": name, "mac": mac}  # noqa: E731
    assert e.add("l1", end("x0", "02:00:00:00:00:aa"), end("y0"), params={"bw": 2},
                 ba={"max_queue_size": 7}) == (0, 1)
    mac = subprocess.run(["ip", "-n", ns, "-br", "link", "show", "x0"], capture_output=True,
                         text=True).stdout
    assert "02:00:00:00:00:aa" in mac
    with StateReader(e.state_path) as st:
        assert st.slot_count == 8
        ab, ba = st.read(0), st.read(1)
        assert (ab.rate_bps, ab.queue_limit_pkts) == (2_000_000, 1000)
        assert (ba.rate_bps, ba.queue_limit_pkts) == (2_000_000, 7)
        assert ab.seq % 2 == 0 and ab.backlog_pkts == 0
        e.set("l1", ab={"bw": 0, "max_queue_size": 3})
        assert (st.read(0).rate_bps, st.read(0).queue_limit_pkts) == (0, 3)
        assert st.read(1).rate_bps == 2_000_000          # set touched only a->b
        with pytest.raises(IndexError):
            st.read(8)
        # A failed add (b's name is taken) leaves nothing behind: a's TAP and the slots go.
        with pytest.raises(links.LinkEmuError, match="tap y0"):
            e.add("l2", end("x1"), end("y0"))
        assert not iface_exists(ns, "x1")
        stats = e.delete("l1")
        assert stats["ab"]["frames_in"] == 0 and not iface_exists(ns, "x0")
        assert st.read(0).queue_limit_pkts == 0          # released slots are zeroed
        assert e.add("l3", end("x2"), end("y2")) == (0, 1)
    assert e.ping()["links"] == 1


@needs_root
def test_daemon_refuses_bad_requests(emu):
    e, ns = emu
    with pytest.raises(links.LinkEmuError, match="15 characters"):
        e.add("l", {"netns": ns, "name": "an-interface-name-too-long"}, {"netns": ns, "name": "b"})
    with pytest.raises(links.LinkEmuError, match="MAC"):
        e.add("l", {"netns": ns, "name": "a", "mac": "zz"}, {"netns": ns, "name": "b"})
    with pytest.raises(links.LinkEmuError, match="netns /run/netns/nosuch"):
        e.add("l", {"netns": "nosuch", "name": "a"}, {"netns": ns, "name": "b"})
    with pytest.raises(links.LinkEmuError, match="unknown cmd"):
        e.call("jump")
    with pytest.raises(links.LinkEmuError, match="state file full"):
        for i in range(5):
            e.add(f"f{i}", {"netns": ns, "name": f"fa{i}"}, {"netns": ns, "name": f"fb{i}"})
    assert e.ping()["links"] == 4


def test_control_socket_is_short_whatever_the_result_folder(tmp_path):
    deep = tmp_path / ("x" * 200)
    e = links.LinkEmulator(deep, "ab12")
    assert e.socket_path == links.runtime_dir("ab12") / "control.sock"
    assert len(str(e.socket_path).encode()) <= links.SUN_PATH_MAX
    with pytest.raises(ValueError, match="longer than a Unix socket"):
        links.control_socket("t" * 100)


@needs_root
def test_stop_removes_the_runtime_directory(tmp_path):
    e = links.LinkEmulator(tmp_path / ("deep" * 30), f"v{os.getpid()}", slots=8,
                           realtime=0).start()
    assert e.socket_path.exists()
    e.stop()
    assert not e.socket_path.parent.exists()


@pytest.mark.skipif(not links.BINARY.exists(), reason=f"needs {links.BINARY}")
@pytest.mark.parametrize("option, says", [(["--rx-mode", "fast"], "want napi or inline"),
                                          (["--spin-us", "5000"], "spin-us"),
                                          (["--io", "epoll"], "want uring or syscalls")])
def test_a_bad_option_is_refused_with_the_reason(tmp_path, option, says):
    r = subprocess.run([str(links.BINARY), "--control", str(tmp_path / "c.sock"), *option],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and says in r.stderr
    assert "panicked" not in r.stderr


def daemon_argv(tmp_path, monkeypatch, **kw) -> list[str]:
    """The command line LinkEmulator.start() would run with these keywords (stopped at Popen)."""
    seen = {}

    class Started(Exception):
        pass

    def fake_popen(argv, **_):
        seen["argv"] = argv
        raise Started
    monkeypatch.setattr(links.subprocess, "Popen", fake_popen)
    monkeypatch.setattr(links.Path, "exists", lambda self: True)
    e = links.LinkEmulator(tmp_path, f"w{os.getpid()}", **kw)
    try:
        with pytest.raises(Started):
            e.start()
    finally:
        try:
            e.socket_path.parent.rmdir()    # made by start() before the daemon
        except OSError:
            pass
    return seen["argv"]


def test_rx_mode_reaches_the_daemon_argv(tmp_path, monkeypatch):
    assert daemon_argv(tmp_path, monkeypatch, rx_mode="napi")[-2:] == ["--rx-mode", "napi"]
    assert "--rx-mode" not in daemon_argv(tmp_path, monkeypatch, rx_mode=None)


def test_spin_us_reaches_the_daemon_argv(tmp_path, monkeypatch):
    for spin, tail in ((0, ["--spin-us", "0"]), ("20", ["--spin-us", "20"])):
        assert daemon_argv(tmp_path, monkeypatch, rx_mode=None, spin_us=spin)[-2:] == tail
    assert "--spin-us" not in daemon_argv(tmp_path, monkeypatch, rx_mode=None, spin_us=None)


def test_io_reaches_the_daemon_argv(tmp_path, monkeypatch):
    for io in ("uring", "syscalls"):
        assert daemon_argv(tmp_path, monkeypatch, rx_mode=None, spin_us=None, io=io)[-2:] == ["--io", io]
    assert "--io" not in daemon_argv(tmp_path, monkeypatch, rx_mode=None, spin_us=None, io=None)
