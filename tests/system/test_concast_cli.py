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
     "no such file"),
    (["spec", "upload", "--group", "7", "/nonexistent.wasm"], "no such file"),
    (["router", "dance", "r1"], "invalid choice"),
])
def test_bad_command_lines_exit_2_and_say_why(args, message):
    r = concast(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr


@pytest.mark.parametrize("args, message", [
    (["router", "stats", "nosuchrouter"], "no running concast network has a router named 'nosuchrouter'"),
    (["host", "stats", "nosuchhost"], "no running concast network has a host named 'nosuchhost'"),
    (["host", "stats", "/nonexistent/hostd.sock"], "no hostd answers at /nonexistent/hostd.sock"),
])
def test_no_network_or_no_daemon_is_a_missing_prerequisite(args, message):
    """docs/cli.md: exit 3 and what to do, not a usage error (2) nor a failure (1)."""
    r = concast(*args)
    assert r.returncode == 3 and message in r.stderr, (r.returncode, r.stderr)
    assert "start a network first" in r.stderr, r.stderr


def test_aggregate_payload_matches_the_specs_layout():
    # mergespecs/README.md's example datagram: UDP header, then key 1, count 1, value 5.
    udp = bytes.fromhex("0fa0138800200000" "434101000000000100000001000000000000000000000005")
    assert aggregate.encode(1, 5) == udp[8:]
    assert aggregate.decode(udp[8:]) == aggregate.Contribution(key=1, count=1, value=5)
    assert aggregate.decode(b"XX" + udp[10:]) is None
    assert aggregate.decode(udp[8:20]) is None
    assert aggregate.decode(aggregate.encode(9, -3, count=0)).count == 1   # 0 reads as 1
