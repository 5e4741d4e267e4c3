"""`concast exp ctp`'s scenarios on concast-linkemu paths, short (root; about a minute in
all): Table I over the 413 ms wide-area path, Figure 5's audio streams under loss, UDT/CCC
Table 2's parallel flows over 110 ms, and the UDP Blast / streaming-merge checks. Asserts
counts, the books (every packet sent is on time, late or never delivered; losses were real),
that the emulated delay is in the round trip, that the receiver's rate message lowered the
blasters' rate, and that CSV, JSON and PNG were written; never a speed.
"""
from __future__ import annotations

import csv
import json
import subprocess

import pytest

from concast.topologies.experiments import ctp as exp
from concast.topologies.experiments.ctp import blast, ccc_long, fig5
from concast.topologies.experiments.ctp.emupath import EmuPath


def _missing() -> str | None:
    from concast import perfrun
    from concast.topologies.links import BINARY
    return exp.missing_prerequisites() or (None if BINARY.exists() else "concast-linkemu is not built")


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")

META = {"git": {"rev": "test"}, "machine": {"cpus": 2, "loadavg_at_start": (0, 0, 0)},
        "loadavg_at_end": (0, 0, 0), "secs": 0}


def test_emupath_cleans_up_after_itself():
    with EmuPath(delay_ms=1, tag="tcln") as p:
        ns = list(p.ns.values())
        assert all(n in subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout for n in ns)
    left = subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout
    assert not any(n in left for n in ns)


def test_a_tap_queue_the_emulator_does_not_read_counts_its_drops():
    """Frames a host sends while the emulator is not reading wait in its TAP's queue
    (txqueuelen, set by the emulator) and past it are dropped: the emulator's link stats
    report the kernel's count, which is where ccc2 and blast find that loss."""
    import os
    import signal
    import socket
    from concast.netns import call_in
    with EmuPath(delay_ms=1, tag="ttap", tap_queue=64) as p:
        assert p.stats()["a"]["tx_dropped"] == 0 and p.tap_queue == 64
        assert "qlen 64" in subprocess.run(["ip", "-n", p.ns["a"], "link", "show", p.dev["a"]],
                                            capture_output=True, text=True).stdout
        os.kill(p.emu.pid, signal.SIGSTOP)
        try:
            def blast():
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    for _ in range(200):
                        s.sendto(b"x" * 100, (p.addr["b"], 9))
            call_in(p.ns["a"], blast)
        finally:
            os.kill(p.emu.pid, signal.SIGCONT)
        dropped = p.stats()["a"]["tx_dropped"]
        # 200 sent into a queue of 64 that nobody read: at least the excess is lost
        assert 200 - 64 <= dropped <= 200, dropped
    # by default a TAP holds 250 ms of frames at the rate its end sends at (the kernel's 1,000
    # at least; the formula's own test is linkemu's params::tests)
    with EmuPath(delay_ms=1, rate_mbit=1000, tag="ttq") as p:
        assert p.tap_queue == 20640 and p.stats()["b"]["tap_queue"] == 20640
        assert "qlen 20640" in subprocess.run(["ip", "-n", p.ns["a"], "link", "show", p.dev["a"]],
                                              capture_output=True, text=True).stdout


def test_table_one_wide_area_short(tmp_path):
    s = exp.Settings(runs=1, count=2, secs=1.0, protocols=["UDP", "CTP-Bulk"])
    rows = exp.table1(s, say=lambda m: None, wide=True)
    assert [(r["table"], r["protocol"]) for r in rows] == [("I-wide", "UDP"), ("I-wide", "CTP-Bulk")]
    for r in rows:
        assert not r["errors"], r
        # the emulated 206.5 ms each way is in every round trip
        assert r["latency_ms"] >= 0.99 * exp.WIDE_RTT_MS, r
        assert r["bandwidth_mbps"] > 0, r
        assert r["paper_latency_ms"] == exp.PAPER_TABLE1_WIDE[r["protocol"]][0][0]
    paths = exp.save(rows, exp.metadata(s, "I-wide") | META, tmp_path)
    assert all(p.stat().st_size > 0 for p in paths)


def test_figure_five_short(tmp_path):
    s = fig5.Fig5Settings(runs=1, packets=100, losses=[10], paths=["wide"])
    rows = fig5.run(s, say=lambda m: None)
    assert sorted(r["protocol"] for r in rows) == sorted(fig5.PROTOCOLS)
    for r in rows:
        assert not r["errors"], r
        assert 99 <= r["sent"] <= 101, r   # the sender streams for packets / rate seconds
        assert sum(r[f"n_{i}"] for i in range(len(fig5.LATENESS))) == r["sent"], r
    assert rows[0]["emu_dropped_loss"] > 0, "the loss was real"
    udp = next(r for r in rows if r["protocol"] == "UDP")
    assert udp["delivered"] < udp["sent"], "UDP recovers nothing"
    paths = fig5.save(rows, META | {"settings": {}}, tmp_path)
    with open(paths[0]) as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert "| wide | 10 |" in fig5.text(rows)


def test_ccc_table_two_long_rtt_short(tmp_path):
    s = ccc_long.CccSettings(flows=[2], rate_mbit=100.0, secs=1.5)
    rows = ccc_long.run(s, say=lambda m: None)
    assert [r["sender"] for r in rows] == list(ccc_long.SENDERS)
    ctcp_spec = ccc_long.SENDERS["CTCP-HS 1p"]
    assert ctcp_spec["cc"] == "ctcp_hs" and ctcp_spec["one_process"], \
        "the table's CTCP: HyStart++, a paced slow start, every flow in one process (#23)"
    assert ccc_long.CTCP_WINDOW_SEGS == 26214, "CTCP's window: kernel TCP's 64 MB at 2,560 B a datagram"
    for r in rows:
        assert not r["errors"], r
        assert r["flows_reported"] == 2 and r["mbps"] > 0, r
        assert 0 < r["fairness"] <= 1.0 + 1e-9, r
        assert r["fairness_late"] is None or 0 < r["fairness_late"] <= 1.0 + 1e-9, r
        assert len(r["flow_mbps"].split()) == 2, r
        assert r["tap_queue"] == 2064 and r["tap_drops_a"] >= 0 and r["tap_drops_b"] >= 0, r
        assert r["udp_rcvbuf_drops_b"] >= 0, r
    ctcp = next(r for r in rows if r["sender"] == "CTCP-HS 1p")
    # the senders' counters reach the rows (the RTO study reads them); Eifel finds a subset
    assert ctcp["retransmits"] is not None and 0 <= ctcp["spurious_timeouts"] <= ctcp["timeouts"], ctcp
    # so do the send path's waits and the loops' longest gaps (CTCP only: kernel TCP has none)
    assert ctcp["send_full"] >= 0 and ctcp["send_wait_ms"] >= 0 and ctcp["turn_gap_max_ms"] > 0, ctcp
    reno = next(r for r in rows if r["sender"] == "TCP reno")
    assert reno["send_full"] is None
    # kernel TCP's recovery from the sender namespace's counters (the path's own namespace)
    assert reno["retransmits"] >= 0 and 0 <= reno["spurious_timeouts"] <= reno["timeouts"], reno
    assert reno["tcp_fast_retrans"] >= 0 and ctcp["tcp_fast_retrans"] is None, (reno, ctcp)
    paths = ccc_long.save(rows, META | {"settings": {"rate_mbit": 100, "secs": 1.5, "runs": 1}}, tmp_path)
    assert json.loads(paths[1].read_text())["summary"]


def test_blast_and_streaming_merge_short(tmp_path):
    s = blast.BlastSettings(rates_mbit=[20], secs=2.0, runs=1, merge_start_mbit=20, merge_total_mbit=5,
                            merge_after=1.5, merge_secs=4.0, rate_mbit=100.0)
    rows = blast.run(s, say=lambda m: None)
    b = next(r for r in rows if r["check"] == "blast")
    m = next(r for r in rows if r["check"] == "merge")
    assert not b["errors"] and not m["errors"], rows
    assert b["received_mbit"] > 0
    # the row says where a shortfall would be: the sender's CPU, its wake-ups, the drops
    assert b["sender_cpu_share"] > 0 and b["poll_late_mean_us"] is not None, b
    assert b["emu_queue_drops"] >= 0 and b["tap_drops_a"] >= 0
    assert m["flows"] == 2
    # the receiver's request took effect: the senders slowed to a fraction of where they were
    assert m["after_total_mbit"] < m["before_total_mbit"] / 2, m
    paths = blast.save(rows, META | {"settings": blast.BlastSettings().__dict__}, tmp_path)
    assert all(p.stat().st_size > 0 for p in paths)


def test_bad_scenario_arguments_are_refused_without_a_traceback(capsys):
    with pytest.raises(SystemExit) as e:
        exp.main(["--tables", "fig5", "--fig5-losses", "150"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        exp.main(["--tables", "nope"])
    assert e.value.code == 2
    from concast.topologies.experiments.ctp import ccc_rto
    assert ccc_rto.main(["/nonexistent/out", "--rules", "20/x"]) == 2
    assert ccc_rto.main(["/nonexistent/out", "--flows", "0"]) == 2
