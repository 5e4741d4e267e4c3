"""The ACK study's crash fault (ackstudy/faults.py, `--kill-routerd N@T`): the option's
parsing, and how a kill's losses are booked: under their own cause when the residual is
within what the dead routers could have held, else still unaccounted."""
from __future__ import annotations

import argparse
import random

import pytest

from concast.topologies.experiments.ackstudy import faults


class FakeDaemons:
    def of(self, router):
        return []


class FakeRouter:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def enable_diversion(self):
        self.log.append(("divert", self.name))


class FakeNet:
    """What Killer.repair uses of a running network, recorded."""

    def __init__(self):
        self.log = []
        self.daemons = FakeDaemons()

    def start_concast(self, hold, routers, hosts, timeout):
        self.log.append(("start", tuple(routers)))

    def __getitem__(self, name):
        return FakeRouter(self.log, name)


def killed(victims, frames, open_bundles, net=None):
    k = faults.Killer(net or FakeNet(), faults.KillPlan(len(victims), 0.5), victims,
                      random.Random(1))
    k.victims, k.frames_to_dead_port, k.open_bundles, k.fired_at = list(victims), frames, \
        open_bundles, 0.5
    return k


R_BEFORE = {"receiver": {"bundle_sizes": {"1": 10, "4": 2}}}
R_AFTER = {"receiver": {"bundle_sizes": {"1": 30, "4": 2, "6": 5}}}


@pytest.fixture(autouse=True)
def receiver_counters(monkeypatch):
    from concast.topologies.experiments.ackstudy import mplexctl
    monkeypatch.setattr(mplexctl, "receiver_counters", lambda status: status["receiver"])


def test_the_plan_is_routers_at_seconds():
    assert faults.parse_plan("2@0.5") == faults.KillPlan(2, 0.5)
    for bad in ("2", "x@1", "0@1", "1@-1", "2@0.5@1"):
        with pytest.raises(argparse.ArgumentTypeError):
            faults.parse_plan(bad)


def test_the_largest_bundle_is_the_largest_that_grew():
    assert faults.max_bundle({"1": 10, "4": 2}, {"1": 30, "4": 2, "6": 5}) == 6
    assert faults.max_bundle({}, {}) == 0


def test_a_residual_within_what_the_dead_routers_held_is_the_kills():
    net = FakeNet()
    row = {"acks_unaccounted": 40}
    out = faults.settle(killed(["r3", "r7"], frames=5, open_bundles=2, net=net), row, "on",
                        R_BEFORE, R_AFTER)
    # bound: (5 frames + 2 open bundles) x 6 records, the largest bundle R saw in the run
    assert out["kill_bound_records"] == 42
    assert out["acks_lost_routerd_kill"] == 40 and out["acks_unaccounted"] == 0
    assert out["routerd_killed"] == 2 and out["kill_routers"] == "r3 r7"
    # the victims got routerd back, and their diversion
    assert net.log == [("start", ("r3", "r7")), ("divert", "r3"), ("divert", "r7")]


def test_more_missing_than_the_dead_routers_could_hold_stays_unaccounted():
    out = faults.settle(killed(["r3"], frames=1, open_bundles=0), {"acks_unaccounted": 7},
                        "on", R_BEFORE, R_AFTER)
    assert out["kill_bound_records"] == 6
    assert out["acks_lost_routerd_kill"] == 0 and "acks_unaccounted" not in out


def test_a_negative_residual_is_never_the_kills():
    out = faults.settle(killed(["r3"], frames=9, open_bundles=9), {"acks_unaccounted": -2},
                        "on", R_BEFORE, R_AFTER)
    assert out["acks_lost_routerd_kill"] == 0 and "acks_unaccounted" not in out


def test_without_multiplexing_nothing_is_booked_and_without_a_plan_nothing_happens():
    out = faults.settle(killed(["r3"], frames=9, open_bundles=9), {"acks_unaccounted": 3},
                        "off", R_BEFORE, R_AFTER)
    assert out["acks_lost_routerd_kill"] == 0
    assert faults.settle(None, {"acks_unaccounted": 3}, "on", R_BEFORE, R_AFTER) == {}



def test_the_summary_names_the_kills_and_their_cost():
    rows = [{"routerd_killed": 2, "acks_lost_routerd_kill": 8, "kill_bypass_ms": 243.2},
            {"routerd_killed": 2, "acks_lost_routerd_kill": 0, "kill_bypass_ms": 198.0},
            {"mode": "on"}]
    line = faults.summary(rows)
    assert "in 2 runs (4 kills, bypassed within 243 ms): 8 ACKs lost" in line
    assert faults.summary([{"mode": "on"}]) is None
