"""Abusive specs from a live receiver (#15 item 4, docs/reliability.md): on
tree(levels=2, fanout=2, senders=8), rx serves two groups with `sum`: a good one (senders
s1-s4) and one whose spec it replaces mid-run, through hostd's API (SPEC_UPDATE), by a spec
that loops, eats memory, traps, emits oversized or CSP output, breaks the ABI or floods
timers (tests/system/specs/abusive/). For each: every router quarantines that flow only,
the good flow keeps merging at r2 (its merge rate during and after stays above half of
before — a ratio, never a time), rx's hostd hears FLOW_QUARANTINED from every router, and
both groups' sums arrive exact: nothing is lost, merged or not. A spec that fails
validation is refused at upload and the one in force stays.

Writes results/reliability/abuse.md (the table of docs/reliability.md).
"""
from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import pytest
from hostdtools import HOLD, missing_builds, router_flow, tolerant, wait_for, wasm_from_wat
from reliability import Feeder, RateProbe, Tally, merged_count, write_table

from concast.hosts import Client
from concast.hosts.client import HostdError
from concast.topologies import tree

pytestmark = pytest.mark.mininet
HERE = Path(__file__).parent
ABUSIVE = HERE / "specs" / "abusive"
ROUTERS = ["r1", "r2", "r3"]
GOOD = ["s1", "s2", "s3", "s4"]          # s1, s3 behind r2; s2, s4 behind r3
BAD = ["s5", "s6", "s7", "s8"]           # the same routers, other hosts
KEYS = list(range(1, 11))
BUDGET_MS = 200                          # routerd --flow-cpu-ms: the timer flood's stop

# (row name, spec file, how the routers stop it: the fault kind of their quarantine)
CASES = [
    ("endless loop", HERE / "specs" / "loop.wat", "cpu_limit"),
    ("memory bomb (1 MiB per merge)", ABUSIVE / "memory.wat", "memory_limit"),
    ("trap (unreachable)", ABUSIVE / "trap.wat", "trap"),
    ("oversized output (70,000-byte emit)", ABUSIVE / "oversized.wat", "output_limit"),
    ("malformed output (protocol-253 emit)", ABUSIVE / "csp_output.wat", "abi_violation"),
    ("ABI violation (merge returns 7)", ABUSIVE / "bad_return.wat", "abi_violation"),
    ("timer flood (re-armed for now)", ABUSIVE / "timer_flood.wat", "cpu_budget"),
]
# How each fault reads in a router's `quarantine` text (concast_engine::Fault's Display).
FAULT_WORDS = {"cpu_limit": "ran out of CPU time", "memory_limit": "memory limit",
               "trap": "trapped", "output_limit": "output limit",
               "abi_violation": "ABI violation", "cpu_budget": "CPU budget"}
ROWS: list[list] = []


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    why = missing_builds() or (None if shutil.which("wat2wasm") else
                               "wat2wasm is not installed (apt-get install wabt; make setup does)")
    if why:
        pytest.skip(why)
    n = tree(levels=2, fanout=2, senders=8).start(run_dir=tmp_path_factory.mktemp("abuse"))
    try:
        n.start_concast(hold=float(HOLD), routerd_args=["--flow-cpu-ms", str(BUDGET_MS)],
                        hostd_args=["--join-retry-ms", "300"])
        yield n
    finally:
        n.stop()
    if ROWS:
        write_table("abuse", ["spec uploaded mid-run", "how stopped", "time to quarantine at r2 (s)",
                              "… at all 3 routers (s)", "good flow merged/s at r2 before",
                              "during", "after", "routers that told R", "both groups' sums"],
                    ROWS, note="Time to quarantine runs from hostd's reply to the upload to the "
                               "router's flow showing `quarantined`: SPEC_UPDATE, the chunk fetch, "
                               "the next datagram (rounds every 50 ms) and the fault itself.")


def quarantine_of(net, r: str, group: int) -> str | None:
    f = router_flow(net, r, group) or {}
    if f.get("state") != "quarantined":
        return None
    return ((f.get("engine") or {}).get("quarantine")) or "quarantined"


def both_merging(net, good: int, bad: int) -> bool:
    return merged_count(net, "r2", good) > 0 and merged_count(net, "r2", bad) > 0


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[2] + "-" + c[1].stem for c in CASES])
def test_abusive_spec_is_quarantined_for_its_flow_only(net, case, tmp_path):
    name, wat, kind = CASES[case]
    wasm = wasm_from_wat(wat, tmp_path)
    good_g, bad_g = 40 + 2 * case, 41 + 2 * case
    good = Tally(net, good_g, tolerant("sum"))
    bad = Tally(net, bad_g, tolerant("sum"))
    fg = fb = None
    try:
        fg = Feeder(net, GOOD, good_g, dport=5000 + good_g, keys=KEYS)
        fb = Feeder(net, BAD, bad_g, dport=5000 + bad_g, keys=KEYS)
        wait_for(lambda: both_merging(net, good_g, bad_g), 15, "r2 is not merging both flows")
        probe = RateProbe(lambda: merged_count(net, "r2", good_g))
        start = time.monotonic()
        t_before = probe.run_for(2.0)

        with Client(net.hostd_socket("rx")) as c:
            c.install_spec(bad_g, wasm)
        t_up = time.monotonic()
        at: dict[str, float] = {}

        def all_quarantined() -> bool:
            for r in ROUTERS:
                if r not in at and quarantine_of(net, r, bad_g):
                    at[r] = time.monotonic() - t_up
            return len(at) == len(ROUTERS)
        probe.run_for(30.0, until=all_quarantined)
        assert all_quarantined(), f"not quarantined everywhere within 30 s: {at}"
        t_during = probe.run_for(1.0)
        t_after = probe.run_for(2.0)

        reasons = {r: quarantine_of(net, r, bad_g) for r in ROUTERS}
        flows_good = {r: router_flow(net, r, good_g) for r in ROUTERS}
        fg.finish()
        fb.finish()
        want_good, want_bad = fg.want(), fb.want()
        got_good = good.wait_total(want_good[1])
        got_bad = bad.wait_total(want_bad[1])
        wait_for(lambda: len({e["by"] for e in bad.named("upstream_quarantined")}) >= len(ROUTERS),
                 10, "rx's hostd did not hear FLOW_QUARANTINED from every router")
        told = {e["by"] for e in bad.named("upstream_quarantined")}
        with Client(net.hostd_socket("rx")) as c:
            stats = c.stats()["counters"]
    finally:
        for f in (fg, fb):
            if f is not None:
                f.kill()
        good.close()
        bad.close()

    before = probe.rate(start, t_before)
    during = probe.rate(t_up, t_during)
    after = probe.rate(t_during, t_after)
    ROWS.append([name, kind, f"{at['r2']:.2f}", f"{max(at.values()):.2f}", f"{before:.0f}",
                 f"{during:.0f}", f"{after:.0f}", f"{len(told)} of 3",
                 "exact" if (got_good, got_bad) == (want_good, want_bad) else "WRONG"])

    for r, why in reasons.items():
        assert FAULT_WORDS[kind] in why, f"{r} stopped {name} for another reason: {why}"
    for r, f in flows_good.items():
        assert f["state"] == "active" and not f["engine"]["quarantine"], f"{r}: {f}"
    assert told == {net.ip(r) for r in ROUTERS}, told
    assert stats["upstream_quarantines"] >= len(ROUTERS)
    assert got_good == want_good, "the good flow's sums are exact"
    assert got_bad == want_bad, "the abused flow lost or duplicated nothing (fail-open)"
    assert before > 0, "the good flow merged at r2 before the upload"
    assert during > 0.5 * before, f"good flow merge rate fell from {before:.0f}/s to {during:.0f}/s"
    assert after > 0.5 * before, f"good flow merge rate fell from {before:.0f}/s to {after:.0f}/s"


def test_a_spec_that_fails_validation_is_refused_and_the_old_one_stays(net, tmp_path):
    group = 60
    wasm = wasm_from_wat(ABUSIVE / "wasi.wat", tmp_path)
    old = hashlib.sha256(tolerant("sum").read_bytes()).hexdigest()
    tally = Tally(net, group, tolerant("sum"))
    feeder = None
    try:
        feeder = Feeder(net, BAD, group, dport=5000 + group, keys=KEYS)
        wait_for(lambda: merged_count(net, "r2", group) > 0, 15, "r2 is not merging")
        t0 = time.monotonic()
        with Client(net.hostd_socket("rx")) as c, pytest.raises(HostdError) as refused:
            c.install_spec(group, wasm)
        took = time.monotonic() - t0
        before = merged_count(net, "r2", group)
        time.sleep(1.0)
        specs = {r: (router_flow(net, r, group) or {}).get("spec") for r in ROUTERS}
        still = merged_count(net, "r2", group) > before
        feeder.finish()
        sums, counts = tally.wait_total(feeder.want()[1])
    finally:
        if feeder is not None:
            feeder.kill()
        tally.close()
    ROWS.append(["WASI import (fails validation)", "validation: refused at upload",
                 f"{took:.2f} (the refusal)", "never reached a router", "–", "–", "–", "–",
                 "exact" if (sums, counts) == feeder.want() else "WRONG"])
    assert "wasi_snapshot_preview1" in str(refused.value), refused.value
    assert specs == {r: old for r in ROUTERS}, "routers kept the spec in force"
    assert still, "the flow kept merging with the old spec"
    assert (sums, counts) == feeder.want()
