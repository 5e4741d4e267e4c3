"""The host-facing `concast` verbs without a network (no root needed): bad command lines
are refused with exit status 2 and a message naming the problem, before any daemon is
asked; the aggregate payload matches the layout the Rust specs read."""
from __future__ import annotations

import subprocess
import sys

import pytest

from concast import ROOT
from concast.hosts import aggregate


def concast(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concast.cli", *args], capture_output=True,
                          text=True, cwd=str(ROOT), timeout=30)


@pytest.mark.parametrize("args, message", [
    (["send", "--to", "10.1.1.300", "--group", "7", "1"], "not an IPv4 address"),
    (["send", "--to", "224.0.0.5", "--group", "7", "1"], "not a unicast host address"),
    (["send", "--to", "10.1.1.2", "--group", "1", "1"], "reserved for the multiplex service"),
    (["send", "--to", "10.1.1.2", "--group", "4294967296", "1"], "not a 32-bit group ID"),
    (["send", "--to", "10.1.1.2", "--group", "7", "--dport", "0", "1"], "not a port"),
    (["send", "--to", "10.1.1.2", "--group", "7", "k=v"], "not VALUE or KEY=VALUE"),
    (["send", "--to", "10.1.1.2", "--group", "7", "--hex", "abc"], "not hex"),
    (["send", "--group", "7", "1"], "--to"),
    (["recv", "--spec", "x.wasm"], "--group"),
    (["recv", "--group", "7", "--spec", "/nonexistent.wasm", "--socket", "/nonexistent.sock"],
     "No such file"),
    (["spec", "upload", "--group", "7", "/nonexistent.wasm"], "No such file"),
    (["router", "stats", "nosuchrouter"], "nosuchrouter"),
    (["router", "dance", "r1"], "invalid choice"),
    (["host", "stats", "nosuchhost"], "nosuchhost"),
])
def test_bad_command_lines_exit_2_and_say_why(args, message):
    r = concast(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr


def test_an_unreachable_hostd_is_a_failure_not_a_usage_error():
    r = concast("host", "stats", "/nonexistent/hostd.sock")
    assert r.returncode == 1 and "cannot reach hostd" in r.stderr, r.stderr


def test_aggregate_payload_matches_the_specs_layout():
    # mergespecs/README.md's example datagram: UDP header, then key 1, count 1, value 5.
    udp = bytes.fromhex("0fa0138800200000" "434101000000000100000001000000000000000000000005")
    assert aggregate.encode(1, 5) == udp[8:]
    assert aggregate.decode(udp[8:]) == aggregate.Contribution(key=1, count=1, value=5)
    assert aggregate.decode(b"XX" + udp[10:]) is None
    assert aggregate.decode(udp[8:20]) is None
    assert aggregate.decode(aggregate.encode(9, -3, count=0)).count == 1   # 0 reads as 1
