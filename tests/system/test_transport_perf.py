"""`concast perf`'s bookkeeping without a network: which cases a run measures, what a row
takes from the JSON records, and the ratios to the peers measured in the same run."""
from __future__ import annotations

import pytest

from concast import perf, perfrun
from concast.perfpath import Path


def _run(mode, proto, server, client, what=None, loss=0.0, flows=1):
    r = {"mode": mode, "proto": proto, "loss": loss, "flows": flows, "server": server,
         "client": client, "errors": []}
    if proto == "tcp":
        r["cc"] = what
    elif proto == "ctp":
        r["composite"], r["cc"] = what.split("/")
    return r


def test_cases_pair_every_ctp_composite_with_tcp_and_udp():
    cs = perf.cases(["bulk", "pingpong"], ["Minimal", "Bulk"], ["newreno", "vegas"], ["cubic"])
    bulk = [c for c in cs if c["mode"] == "bulk"]
    assert [(c["proto"], c.get("composite"), c.get("cc")) for c in bulk] == [
        ("tcp", None, "cubic"), ("udp", None, None), ("ctp", "Minimal", "newreno"),
        ("ctp", "Bulk", "newreno"), ("ctp", "Bulk", "vegas")]
    assert [c["size"] for c in bulk] == [65536, 65536, 1400, 65536, 65536]
    assert all(c["size"] == 64 for c in cs if c["mode"] == "pingpong")


def test_late_fairness_reads_only_the_last_third_of_each_flows_samples():
    # one flow took the link first, the other caught up: equal shares at the end only
    a = {"samples": [5, 30, 30, 30, 30, 10, 10, 99]}
    b = {"samples": [5, 0, 0, 0, 0, 10, 10, 0]}
    assert perfrun.fairness_late([a, b]) == pytest.approx(1.0)
    assert perfrun.jain([130.0, 20.0]) == pytest.approx(150.0 ** 2 / (2 * (130.0 ** 2 + 20.0 ** 2)))
    # unequal at the end: the index says so
    assert perfrun.fairness_late([a, {"samples": [0, 0, 0, 0, 0, 5, 5, 0]}]) == pytest.approx(225 / 250)
    assert perfrun.fairness_late([a, {"samples": [1]}]) is None


def test_rows_take_receiver_throughput_and_compute_ratios_and_fairness():
    runs = [
        _run("bulk", "tcp", [{"mbps": 1000.0}], [{"secs": 5, "cpu_secs": 2.5}], "cubic"),
        _run("bulk", "udp", [{"mbps": 500.0}], [{"secs": 5, "cpu_secs": 5}]),
        _run("bulk", "ctp", [{"mbps": 300.0}, {"mbps": 100.0}],
             [{"secs": 5, "cpu_secs": 1}, {"secs": 5, "cpu_secs": 3}], "Bulk/newreno", flows=2),
        _run("bulk", "tcp", [{"mbps": 200.0}, {"mbps": 200.0}], [{"secs": 5}, {"secs": 5}],
             "cubic", flows=2),
        _run("pingpong", "udp", [], [{"rtt": {"median_us": 40.0, "p99_us": 90.0}, "lost": 0}]),
        _run("pingpong", "ctp", [], [{"rtt": {"median_us": 65.0, "p99_us": 99.0}, "lost": 0}],
             "Minimal/newreno"),
    ]
    rows = [perf.summarize(r) for r in runs]
    perf.add_ratios(rows)
    tcp, udp, ctp2, tcp2, ping_udp, ping_ctp = rows
    assert (tcp["vs_tcp"], tcp["vs_udp"], udp["vs_tcp"]) == (1.0, 2.0, 0.5)
    assert tcp["cpu_per_flow"] == 0.5
    # two flows are compared with two flows of TCP, not with one
    assert ctp2["mbps"] == 400.0 and ctp2["vs_tcp"] == 1.0 and "vs_udp" not in ctp2
    assert ctp2["fairness"] == pytest.approx(400.0 ** 2 / (2 * (300.0 ** 2 + 100.0 ** 2)))
    assert ctp2["cpu_per_flow"] == pytest.approx(0.4)
    assert ping_ctp["plus_us_udp"] == 25.0 and "plus_us_tcp" not in ping_ctp
    text = perf.table(rows)
    assert "Bulk/newreno" in text and " 2.000" in text and "+us/UDP" in text


def test_bad_path_settings_are_refused():
    with pytest.raises(ValueError, match="loss"):
        Path(loss=1.0)
    with pytest.raises(ValueError, match="rate"):
        Path(rate_mbit=-1)


def test_stability_is_the_spread_of_a_flows_samples_over_their_mean():
    assert perf.stability([5, 10, 10, 10, 3]) == 0.0           # ends left out
    assert perf.stability([1, 10, 20, 1]) == pytest.approx((50 ** 0.5) / 15)
    assert perf.stability([1, 2]) is None and perf.stability([0, 0, 0, 0]) is None
    row = perf.summarize(_run("bulk", "ctp", [{"mbps": 1.0, "samples": [0, 4, 4, 4, 0]}],
                              [{"secs": 1}], "Bulk/newreno"))
    assert row["stability"] == 0.0


def test_aggregate_of_flows_is_all_bytes_over_the_whole_span():
    srv = [{"mbps": 80.0, "bytes": 10_000_000, "first_us": 0, "last_us": 1_000_000},
           {"mbps": 80.0, "bytes": 10_000_000, "first_us": 1_000_000, "last_us": 2_000_000}]
    row = perf.summarize(_run("bulk", "tcp", srv, [{"secs": 2}, {"secs": 2}], "reno", flows=2))
    assert row["mbps"] == pytest.approx(80.0)   # not 160: they took turns


def test_rows_say_which_udp_path_ran_and_why_gso_was_refused():
    io = {"gso": True, "gro": True, "fallback": None, "send_calls": 40, "bytes_sent": 10_000_000}
    fell = {**io, "gso": False, "fallback": "UDP GSO refused: Invalid argument (os error 22)"}
    fast = perf.summarize(_run("bulk", "ctp", [{"mbps": 9.0, "io": {"gro": True}}],
                               [{"secs": 5, "io": io}], "Bulk/newreno"))
    plain = perf.summarize(_run("bulk", "ctp", [{"mbps": 9.0, "io": {"gro": False}}],
                                [{"secs": 5, "io": fell}], "Bulk/newreno"))
    assert (fast["io"], fast["send_calls_per_mb"], "io_fallback" in fast) == ("gso+gro", 4.0, False)
    assert plain["io"] == "sendmmsg+recvmsg" and "os error 22" in plain["io_fallback"]
    tcp = perf.summarize(_run("bulk", "tcp", [{"mbps": 9.0}], [{"secs": 5}], "cubic"))
    assert "io" not in tcp
    assert "gso+gro" in perf.table([fast])


def test_mode_mtp_is_measured_beside_tcp_bulk_and_summarised():
    cs = perf.cases(["mtp"], ["Bulk"], ["newreno"], ["cubic"])
    assert [(c["mode"], c["proto"], c.get("cc")) for c in cs] == [("mtp", "mtp", "mtp"), ("bulk", "tcp", "cubic")]
    assert cs[0]["size"] == 1 << 20
    runs = [_run("mtp", "mtp", [{"role": "server"}],
                 [{"mbit_s": 40.0, "objects": 5, "all_same": True, "stats": {"repeats": 3}}], "Bulk/mtp"),
            _run("bulk", "tcp", [{"mbps": 80.0}], [{"secs": 5}], "cubic")]
    rows = [perf.summarize(r) for r in runs]
    perf.add_ratios(rows)
    m = rows[0]
    assert (m["what"], m["mbps"], m["objects"], m["repeats"], m["vs_tcp"]) == ("mtp", 40.0, 5, 3, 0.5)
    assert "mtp (1 MB objects)" in perf.table(rows)
    silent = perf.summarize(_run("mtp", "mtp", [], [], "Bulk/mtp"))
    assert silent["errors"], "a client that printed nothing is an error, not 0 Mbit/s"


def test_concast_perf_refuses_an_unknown_mode():
    import argparse
    ns = argparse.Namespace(mode="ftp", cc="newreno", composite="Bulk", tcp_cc="cubic", loss="0", flows="1",
                            rate=0.0, duration=1.0, count=1)
    with pytest.raises(ValueError, match="mtp"):
        perf.collect(ns)
