"""scripts/bench_routerd.py's count check (session 15): every datagram routerd wrote is
accounted for exactly, by content when nothing was lost on the way back, else by the kernel's
counts (the blaster's ring drops, the receiving CPU's backlog drops), with no tolerance."""
from __future__ import annotations

import importlib.util

import pytest

from concast import tools

spec = importlib.util.spec_from_file_location("bench_routerd", tools.ROOT / "scripts" / "bench_routerd.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

# routerd's counters: 4,000 contributions read, merged into 1,000 datagrams.
COUNTERS = {"frames_in": 4000, "merged_in": 4000, "diverted": 4000, "merged_out": 1000,
            "passed_through": 0, "forwarded_unmerged": 0}


def blast(**over) -> dict:
    """The counting blaster's JSON: every merged datagram received, nothing dropped."""
    b = {"returned": 1000, "merged_contributions": 4000, "contributions_back": 4000, "passed": 0,
         "bad_value": 0, "other": 0, "rx_drops": 0, "socket_frames": 1000, "drained_at_start": 0}
    b.update(over)
    return b


def test_nothing_lost_is_checked_by_content():
    ok, note = bench.count_check("sum", blast(), COUNTERS, veth_tx=1000, backlog_drops=0)
    assert ok and note.startswith("by content")
    ok, _ = bench.count_check("sum", blast(merged_contributions=3996, contributions_back=3996), COUNTERS, 1000, 0)
    assert not ok


def test_counted_drops_balance_exactly():
    # 30 dropped at the blaster's ring, 5 at the receiving CPU's backlog: 965 received.
    b = blast(returned=965, rx_drops=30, socket_frames=995, merged_contributions=3860, contributions_back=3860)
    ok, note = bench.count_check("sum", b, COUNTERS, veth_tx=1000, backlog_drops=5)
    assert ok, note
    assert "missing 0" in note


@pytest.mark.parametrize("what, b, veth_tx, backlog", [
    # Session 14's residue: 128 written, neither received nor counted as dropped.
    ("missing", blast(returned=862, rx_drops=10, socket_frames=872), 1000, 0),
    # Frames that reached the socket before it listened and were drained as stale.
    ("stale", blast(returned=990, rx_drops=10, socket_frames=1000, drained_at_start=3), 1000, 0),
    # Frames the socket got that the blaster neither counted nor saw dropped (left unread).
    ("unread", blast(returned=990, rx_drops=10, socket_frames=1004), 1000, 0),
    # routerd's count and the veth's disagree.
    ("veth", blast(returned=990, rx_drops=10, socket_frames=1000), 999, 0),
])
def test_any_unaccounted_datagram_fails_the_check(what, b, veth_tx, backlog):
    ok, note = bench.count_check("sum", b, COUNTERS, veth_tx, backlog)
    assert not ok, what
    if what == "missing":
        assert "missing 128" in note


def test_wrong_values_or_foreign_datagrams_fail_whatever_the_counts():
    assert not bench.count_check("sum", blast(bad_value=1), COUNTERS, 1000, 0)[0]
    assert not bench.count_check("sum", blast(other=2, rx_drops=1, returned=999), COUNTERS, 1000, 0)[0]


def test_plain_checks_passed_back_datagrams():
    c = dict(COUNTERS, merged_in=0, diverted=0, merged_out=0, passed_through=4000)
    b = blast(returned=4000, merged_contributions=0, passed=4000, contributions_back=4000, socket_frames=4000)
    assert bench.count_check("plain", b, c, 4000, 0)[0]
    b = blast(returned=3900, merged_contributions=0, passed=3900, contributions_back=3900, rx_drops=100,
              socket_frames=4000)
    assert bench.count_check("plain", b, c, 4000, 0)[0]
