"""concast end to end on tree(levels=2, fanout=2, senders=8): hostd on every host, routerd on
r1 (root, rx's router), r2 and r3 (leaves, four senders each). The router issue's acceptance
tests: merging with exact sums, fallback, malformed input, a looping spec, a crashed routerd.

Each test uses its own group (and UDP port), so the soft state one leaves behind does not
disturb the next.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hostdtools import (PYTHON, Senders, collect, concast_network, kill, round_lines, router,
                        router_counters, router_flow, start_routerd, tolerant, wait_for,
                        wasm_from_wat)
from systools import options_of, send_raw, udp_datagrams

from concast import ROOT
from concast.hosts import Client, aggregate
from concast.topologies import tree

pytestmark = pytest.mark.mininet
SENDERS = [f"s{i}" for i in range(1, 9)]
FOUR = ["s1", "s2", "s3", "s4"]            # s1, s3 behind r2; s2, s4 behind r3
UNDER_R2 = ["s1", "s3", "s5", "s7"]
ROUTERS = ["r1", "r2", "r3"]
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    yield from concast_network(tree(levels=2, fanout=2, senders=8),
                               tmp_path_factory.mktemp("concast"))


@pytest.fixture
def rx(net):
    with Client(net.hostd_socket("rx")) as c:
        yield c


def cli(net, *args: str) -> subprocess.CompletedProcess:
    """The `concast` command line in the root namespace, naming nodes of this run."""
    return subprocess.run([PYTHON, "-m", "concast.cli", *args], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=30)


def merged_delta(before: dict, after: dict) -> tuple[int, int]:
    return (after["merged_in"] - before["merged_in"], after["merged_out"] - before["merged_out"])


def engine_counter(flow: dict, name: str) -> int:
    return int(flow["engine"]["counters"][name])


def test_eight_senders_get_exact_sums_through_merging_routers(net, rx):
    group, keys = 7, list(range(1, 11))
    rx.install_spec(group, tolerant("sum"))
    rx.subscribe(group, port=5000)
    before = router_counters(net, ROUTERS)
    senders = Senders(net, SENDERS, group)
    try:
        for h in SENDERS:
            assert any('"active"' in e for e in senders.events(h)), senders.output[h]
        with net.capture("rx", "udp dst port 5000 or icmp", name="sum") as cap:
            senders.send(round_lines(SENDERS, keys, lambda i, k: 100 * (i + 1) + k))
            out = senders.finish()
            sums, counts, events = collect(rx, group, {k: 8 for k in keys})
    finally:
        senders.kill()
    assert counts == {k: 8 for k in keys}, "every contribution accounted for once"
    assert sums == {k: sum(100 * (i + 1) + k for i in range(8)) for k in keys}
    for h in SENDERS:
        assert sum("as=merging" in line for line in out[h]) == len(keys), out[h]
    packets = cap.packets()
    arrived = [ip for ip in udp_datagrams(packets, 5000)
               if options_of(ip)[:6] == bytes([0x9E, 6]) + group.to_bytes(4, "big")]
    icmp = [p for p in packets if p.haslayer("ICMP")]
    assert not icmp, f"rx answered with ICMP (hostd holds the port): {icmp[0].summary()}"
    sent = len(SENDERS) * len(keys)
    assert 0 < len(arrived) < sent, f"{len(arrived)} datagrams reached rx for {sent} sent"
    after = router_counters(net, ROUTERS)
    for r in ROUTERS:
        merged_in, merged_out = merged_delta(before[r], after[r])
        assert merged_in > merged_out > 0, (f"{r} did not merge: in {merged_in}, out {merged_out}; "
                                            f"before {before[r]} after {after[r]} flows {router(net, r, 'flows')}")
    assert all(e["kind"] == "merged" for e in events)


def test_router_and_host_verbs_answer_with_json(net, tmp_path):
    r = cli(net, "router", "flows", "r2", "--run", net.tag)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["node"] == net.ip("r2")
    r = cli(net, "host", "stats", "rx", "--run", net.tag)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["counters"]["concast_in"] > 0
    r = cli(net, "router", "stats", "nosuch", "--run", net.tag)
    assert r.returncode == 3 and "nosuch" in r.stderr   # docs/cli.md: not running = 3
    bogus = tmp_path / "bogus.wasm"
    bogus.write_bytes(b"\0asm but not really")
    r = cli(net, "spec", "upload", "--group", "30", str(bogus), "--node", "rx", "--run", net.tag)
    assert r.returncode == 1 and "not a valid WebAssembly module" in r.stderr, r.stderr


def test_spec_replaced_mid_flow_keeps_merging_with_the_new_spec(net, rx):
    group, keys = 17, [1, 2, 3]
    rx.install_spec(group, tolerant("sum"))
    rx.subscribe(group)
    senders = Senders(net, FOUR, group, dport=5017)
    try:
        senders.send(round_lines(FOUR, keys, lambda i, k: 10 * (i + 1) + k))
        sums, counts, _ = collect(rx, group, {k: 4 for k in keys})
        assert counts == {k: 4 for k in keys}
        assert sums == {k: 100 + 4 * k for k in keys}

        r = cli(net, "spec", "upload", "--group", str(group), str(tolerant("max")),
                "--node", "rx", "--run", net.tag)
        assert r.returncode == 0, r.stderr
        assert "replaced" in r.stdout
        new = hashlib.sha256((tolerant("max")).read_bytes()).hexdigest()

        def switched() -> bool:
            if any((router_flow(net, x, group) or {}).get("spec") != new for x in ROUTERS):
                return False
            for h in FOUR:
                with Client(net.hostd_socket(h)) as c:
                    f = next(f for f in c.flows()["flows"] if f["group"] == group)
                    if f["spec"] != new:
                        return False
            return True
        wait_for(switched, 10, "the new spec did not reach every router and sender")

        senders.send(round_lines(FOUR, keys, lambda i, k: 10 * (i + 1) + k))
        _, counts, events = collect(rx, group, {k: 4 for k in keys})
        out = senders.finish()
    finally:
        senders.kill()
    assert counts == {k: 4 for k in keys}
    best: dict[int, int] = {}
    for e in events:
        c = aggregate.decode(bytes.fromhex(e["payload"]))
        best[c.key] = max(best.get(c.key, c.value), c.value)
    assert best == {k: 40 + k for k in keys}, "the second round was merged by max"
    assert any('"spec_changed"' in line for line in out["s1"]), out["s1"]


def test_receiver_without_a_spec_makes_senders_fall_back_to_plain_unicast(net):
    group, port = 9, 5009
    recv = net["rx"].popen([PYTHON, "-m", "concast.cli", "recv", "--group", str(group), "--port",
                            str(port), "--count", "3", "--timeout", "20"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(ROOT))
    try:
        assert recv.stdout.readline().strip() == "ready"
        senders = Senders(net, ["s1"], group, dport=port)
        try:
            fallback = [e for e in senders.events("s1") if '"fallback"' in e]
            assert fallback and "no merge spec" in fallback[0], senders.output["s1"]
            senders.send({"s1": "1=5 2=6 3=7"})
            out = senders.finish()["s1"]
        finally:
            senders.kill()
        got, _ = recv.communicate(timeout=30)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    assert sum("as=plain" in line for line in out) == 3, out
    lines = [line for line in got.splitlines() if line.startswith("datagram")]
    assert len(lines) == 3, got
    assert all("kind=plain" in line and "count=1" in line for line in lines)
    assert {re.search(r"value=(\d+)", line).group(1) for line in lines} == {"5", "6", "7"}
    assert recv.returncode == 0
    for r in ("r1", "r2"):
        assert router_flow(net, r, group) is None, f"{r} kept a flow the receiver refused"


def test_datagrams_of_senders_that_never_joined_still_arrive(net, rx):
    group, port = 10, 5010
    rx.install_spec(group, tolerant("sum"))
    rx.subscribe(group, port=port)
    joined = Senders(net, ["s1"], group, dport=port)   # puts a selector for port 5010 on r2, r1
    try:
        wait_for(lambda: (router_flow(net, "r2", group) or {}).get("state") == "active", 10,
                 "r2 did not activate the flow")
        before = router(net, "r2")["counters"]
        # s3 (behind r2 too) never joins: a plain UDP datagram, caught by r2's selector...
        send_raw(net["s3"], net.ip("rx"), dport=port, payload=aggregate.encode(4, 40).hex())
        # ...and s5 sends concast datagrams without joining, through its hostd.
        out = net["s5"].cmd(f"{PYTHON} -m concast.cli send --to {net.ip('rx')} --group {group} "
                            f"--dport {port} --no-join 5=50")
        assert "as=unmerged (not joined)" in out, out
        sums, counts, events = collect(rx, group, {4: 1, 5: 1})
        joined.finish()
    finally:
        joined.kill()
    assert sums == {4: 40, 5: 50} and counts == {4: 1, 5: 1}
    kinds = {aggregate.decode(bytes.fromhex(e["payload"])).key: e["kind"] for e in events}
    assert kinds[4] == "plain"
    after = router(net, "r2")["counters"]
    assert after["passed_through"] > before["passed_through"], "r2 re-injected the plain datagram"


MALFORMED = {      # error name -> options area (hex), sent as UDP to the flow's port
    "concast_option_bad_length": "9e04000b",
    "option_bad_length": "44010000",
    "option_truncated": "01010194",
    "option_overflow": "9e0c0000000b0000",
}


COPIES = 3      # of each malformed datagram


def malformed_amid_good_traffic(net, rx, counted):
    """s3 sends COPIES of each MALFORMED datagram and of a truncated CSP message while s1
    and s3 merge one good round, which must still arrive whole. Returns the `counted(router)`
    dicts of r1 and r2 before and after (where each data plane counts malformed input)."""
    group, port = 11, 5011
    rx.install_spec(group, tolerant("sum"))
    rx.subscribe(group, port=port)
    senders = Senders(net, ["s1", "s3"], group, dport=port)
    try:
        wait_for(lambda: (router_flow(net, "r2", group) or {}).get("state") == "active", 10,
                 "r2 did not activate the flow")
        before = {r: counted(r) for r in ("r1", "r2")}
        poison = aggregate.encode(9, 1000).hex()
        for opts in MALFORMED.values():
            send_raw(net["s3"], net.ip("rx"), options=opts, dport=port, payload=poison,
                     count=COPIES)
        # A CSP message cut short: Router Alert, then 4 bytes of a 16-byte header.
        send_raw(net["s3"], net.ip("rx"), proto=253, options="94040000", payload="0101002c",
                 count=COPIES)
        senders.send({"s1": "1=1", "s3": "1=2"})
        sums, counts, events = collect(rx, group, {1: 2})
        senders.finish()
    finally:
        senders.kill()
    assert sums == {1: 3} and counts == {1: 2}, "good traffic still merged and delivered"
    assert all(aggregate.decode(bytes.fromhex(e["payload"])).key != 9 for e in events)
    return before, {r: counted(r) for r in ("r1", "r2")}


def test_malformed_packets_are_counted_and_dropped_and_good_traffic_flows(net, rx):
    before, after = malformed_amid_good_traffic(
        net, rx, lambda r: router(net, r)["counters"]["malformed"])
    for name in [*MALFORMED, "csp_truncated"]:
        got = after["r2"].get(name, 0) - before["r2"].get(name, 0)
        assert got == COPIES, f"r2 counted {got} {name} datagrams, {COPIES} were sent"
    assert after["r1"] == before["r1"], "dropped at the first router, never forwarded"


def test_a_looping_spec_is_quarantined_and_other_flows_keep_merging(net, rx, tmp_path):
    if not shutil.which("wat2wasm"):
        pytest.skip("wat2wasm is not installed (apt-get install wabt; make setup does)")
    looping, summing, keys = 12, 13, [1, 2, 3, 4, 5]
    rx.install_spec(looping, wasm_from_wat(HERE / "specs" / "loop.wat", tmp_path))
    rx.install_spec(summing, tolerant("sum"))
    rx.subscribe(looping)
    rx.subscribe(summing)
    a = Senders(net, FOUR, looping, dport=5012)
    b = Senders(net, FOUR, summing, dport=5013)
    try:
        with net.capture("rx", "icmp", name="loop-icmp") as cap:
            a.send(round_lines(FOUR, keys, lambda i, k: i + k))
            b.send(round_lines(FOUR, keys, lambda i, k: i + k))
            loop_sums, loop_counts, loop_events = collect(rx, looping, {k: 4 for k in keys})
            sums, counts, events = collect(rx, summing, {k: 4 for k in keys})
        # No port was subscribed: hostd held 5012 and 5013 from the joins' selectors.
        assert cap.packets() == [], "rx answered concast datagrams with ICMP"
        flows = {r: (router_flow(net, r, looping), router_flow(net, r, summing)) for r in ROUTERS}
        status = {r: router(net, r, "status") for r in ROUTERS}
        outputs = {**a.finish(), **{f"{h}/sum": v for h, v in b.finish().items()}}
    finally:
        a.kill()
        b.kill()
    expected = {k: sum(i + k for i in range(4)) for k in keys}
    assert (loop_counts, loop_sums) == ({k: 4 for k in keys}, expected), "nothing lost"
    assert len(loop_events) == 20, "every datagram of the looping flow arrived on its own"
    assert all(e["kind"] == "fail_open" for e in loop_events)
    assert (counts, sums) == ({k: 4 for k in keys}, expected)
    assert len(events) < 20, "the sum flow was still merged"
    for r, (f, g) in flows.items():
        assert f["state"] == "quarantined", f"{r}: {f}"
        assert "CPU" in f["engine"]["quarantine"], f
        assert status[r]["counters"]["quarantined_flows"] >= 1
        assert g["state"] == "active"
        assert engine_counter(g, "out") < engine_counter(g, "received"), f"{r} stopped merging"
    # The senders ran the spec first, so they saw it fail too, and heard from their router.
    assert any('"quarantined"' in line for line in outputs["s1"]), outputs["s1"]


def test_a_crashed_routerd_is_bypassed_and_rebuilt_from_refreshes(net, rx):
    group, port, keys = 14, 5014, [1, 2, 3]
    hosts = [*UNDER_R2, "s2"]
    rx.install_spec(group, tolerant("sum"))
    rx.subscribe(group)
    senders = Senders(net, hosts, group, dport=port)
    value = lambda i, k: 1000 * k + i   # noqa: E731
    want = {k: sum(value(i, k) for i in range(len(hosts))) for k in keys}
    try:
        senders.send(round_lines(hosts, keys, value))
        sums, counts, _ = collect(rx, group, {k: len(hosts) for k in keys})
        assert sums == want

        kill(net.routerd_daemons["r2"])           # a crash: its selectors stay behind...
        net["r2"].disable_diversion()             # ...until the control plane removes them
        senders.send(round_lines(hosts, keys, value))
        sums, counts, _ = collect(rx, group, {k: len(hosts) for k in keys})
        assert sums == want, "r2 forwarded unmerged while its routerd was down"

        net["r2"].enable_diversion()
        net.routerd_daemons.update(start_routerd(net, ["r2"]))
        wait_for(lambda: len((router_flow(net, "r2", group) or {}).get("children", [])) == 4
                 and router_flow(net, "r2", group)["state"] == "active", 15,
                 "r2's flow was not rebuilt from the senders' refreshes")
        before = router(net, "r2")["counters"]
        senders.send(round_lines(hosts, keys, value))
        sums, counts, _ = collect(rx, group, {k: len(hosts) for k in keys})
        senders.finish()
    finally:
        senders.kill()
    assert sums == want and counts == {k: len(hosts) for k in keys}
    merged_in, merged_out = merged_delta(before, router(net, "r2")["counters"])
    assert merged_in > merged_out > 0, "merging resumed at r2"


def test_routerd_forwards_what_it_writes_straight_out_of_the_port_with_ttl_rules(net, rx):
    """OVS routers get egress_routes: routerd sends out of the port itself (no second OVS
    pass), decrementing TTL like table 1 and dropping what would leave with TTL 0."""
    group, port = 16, 5016
    rx.install_spec(group, tolerant("sum"))
    rx.subscribe(group, port=port)
    joined = Senders(net, ["s1"], group, dport=port)    # selectors for port 5016 on r2, r1
    try:
        wait_for(lambda: (router_flow(net, "r1", group) or {}).get("state") == "active", 10,
                 "r1 did not activate the flow")
        before = router_counters(net, ["r1", "r2"])
        with net.capture("rx", f"udp dst port {port}", name="egress-ttl") as cap:
            # Plain UDP caught by both routers' selectors, passed back by routerd each time.
            send_raw(net["s3"], net.ip("rx"), dport=port, ttl=3, payload="aa" * 8)
            send_raw(net["s3"], net.ip("rx"), dport=port, ttl=2, payload="bb" * 8)
            wait_for(lambda: router(net, "r1")["counters"]["egress_ttl_expired"]
                     > before["r1"]["egress_ttl_expired"], 5, "r1 did not drop the TTL-2 datagram")
        joined.finish()
    finally:
        joined.kill()
    # (first payload byte, TTL) of what reached rx: raw IPv4 datagrams, 20-byte headers.
    got = [(ip[28], ip[8]) for ip in udp_datagrams(cap.packets(), port)]
    assert got == [(0xAA, 1)], got
    after = router_counters(net, ["r1", "r2"])
    for r in ("r1", "r2"):
        assert after[r]["egress_sent"] > before[r]["egress_sent"], f"{r} sent through its CPU port"
        assert after[r]["passed_through"] >= before[r]["passed_through"] + (1 if r == "r1" else 2)
