"""Workload generators without root: page content, result aggregation, pair choice,
and the real server/fetcher/cross-traffic processes on loopback (own namespace)."""
from __future__ import annotations

import hashlib
import time

import pytest

from concast import procs

from concast.topologies import dumbbell, star
from concast.topologies.workload import cross, page, pairs, stats, web
from concast.topologies.workload.tcpsettings import TcpSettings, _replace_command


def test_page_is_deterministic_per_seed_and_exact_in_size():
    a, b = page.content(4096, 7), page.content(4096, 7)
    assert a == b and len(a) == 4096
    assert page.content(4096, 8) != a
    assert page.content(100, 7) == a[:100]          # a prefix: size does not reseed
    assert page.sha256(4096, 7) == hashlib.sha256(a).hexdigest()
    with pytest.raises(ValueError):
        page.content(-1)


def test_response_framing_round_trip_and_short_body():
    body = page.content(1000, 1)
    status, got = page.split_response(page.response_head(1000) + body)
    assert (status, got) == (200, body)
    with pytest.raises(page.BadResponse, match="short body"):
        page.split_response(page.response_head(1000) + body[:999])
    with pytest.raises(page.BadResponse):
        page.split_response(b"garbage")


def _rec(start, last, ok=True, body=4096, error=None):
    return {"ok": ok, "connect_start_ns": start, "last_byte_ns": last if ok else None,
            "body_bytes": body if ok else 0, "error": error}


def test_summary_counts_times_and_throughput():
    recs = [_rec(0, 10_000_000), _rec(1_000_000, 21_000_000), _rec(0, 40_000_000),
            _rec(0, None, ok=False, error="connect: ECONNREFUSED"),
            _rec(0, None, ok=False, error="timeout: response")]
    s = stats.summarize(recs)
    assert (s["clients"], s["completed"], s["failed"]) == (5, 3, 2)
    assert s["errors"] == {"connect: ECONNREFUSED": 1, "timeout: response": 1}
    assert s["completion_ms"]["max"] == 40 and s["completion_ms"]["min"] == 10
    assert s["completion_ms"]["median"] == 20
    assert s["completion_ms"]["mean"] == pytest.approx(70 / 3)
    assert s["session_ms"] == 40
    assert s["aggregate_mbps"] == pytest.approx(3 * 4096 * 8 / 40e-3 / 1e6)
    assert s["per_client_mbps"]["min"] == pytest.approx(4096 * 8 / 40e-3 / 1e6)


def test_percentile_nearest_rank():
    assert stats.percentile(list(range(1, 101)), 95) == 95
    assert stats.percentile([5], 95) == 5
    assert stats.percentile([], 50) is None


def test_tcp_settings_validate_and_keep_the_route():
    with pytest.raises(ValueError):
        TcpSettings(initcwnd=0)
    with pytest.raises(ValueError):
        TcpSettings(cc="reno; rm")
    route = {"dst": "default", "gateway": "10.1.1.1", "dev": "c1-eth0",
             "metrics": [{"initcwnd": 4}, {"mtu": 1400}]}
    cmd = _replace_command(route, TcpSettings(advmss=960, quickack=True).route_options())
    assert cmd.split() == ["route", "replace", "default", "via", "10.1.1.1", "dev",
                           "c1-eth0", "initcwnd", "4", "mtu", "1400", "advmss", "960",
                           "quickack", "1"]


def test_root_namespace_settings_are_refused():
    with pytest.raises(ValueError, match="root namespace"):
        web.fetch_all({"c1": None}, "127.0.0.1", 1, tcp=TcpSettings(cc="reno"))


def test_pairs_are_seeded_far_enough_apart_and_grouped():
    plan = dumbbell(clients=6).plan()
    a = pairs.choose_pairs(plan, 5, seed=3)
    assert a == pairs.choose_pairs(plan, 5, seed=3)
    assert a != pairs.choose_pairs(plan, 5, seed=4)
    for s, d in a:
        assert plan.hosts[s].router != plan.hosts[d].router     # min_hops=1
    assert all("sv" in p for p in a)    # only sv is on the other router
    with pytest.raises(ValueError, match="only 12"):
        pairs.choose_pairs(plan, 13, seed=0)
    assert len(pairs.choose_pairs(plan, 20, seed=0, reuse=True)) == 20
    grouped = pairs.choose_pairs(star(6).plan(), 6, seed=1, min_hops=0,
                                 group_of=lambda h: int(h[1:]) % 2 if h != "sv" else 9)
    assert all(int(s[1:]) % 2 != int(d[1:]) % 2 for s, d in grouped if "sv" not in (s, d))
    with pytest.raises(ValueError, match="not a host"):
        pairs.choose_pairs(plan, 1, hosts=["nope"])


def test_fetch_many_clients_on_loopback(tmp_path):
    srv = web.PageServer(None, port=0, size=5000, seed=9, out=tmp_path / "srv.json")
    try:
        r = web.fetch_all({f"c{i}": None for i in range(40)}, "127.0.0.1", srv.port,
                          size=5000, seed=9, timeout=30)
    finally:
        served = srv.stop()
    assert r.summary["completed"] == 40, r.summary
    assert served["counts"]["served"] == 40
    for c in r.clients:
        assert c["sha256_ok"] and c["body_bytes"] == 5000
        assert c["connect_start_ns"] <= c["connected_ns"] <= c["first_byte_ns"] \
            <= c["last_byte_ns"] <= c["eof_ns"]
    assert not procs.alive(srv.pid, srv.child.started)


def test_wrong_expected_page_is_a_failure_not_a_success(tmp_path):
    srv = web.PageServer(None, port=0, size=4096, seed=1, out=tmp_path / "srv.json")
    try:
        r = web.fetch_all({"c1": None}, "127.0.0.1", srv.port, size=4096, seed=2)
    finally:
        srv.stop()
    assert r.summary["failed"] == 1
    assert r.clients[0]["error"] == "content: sha256 mismatch"


def test_cross_udp_and_tcp_on_loopback(tmp_path):
    flows = [cross.Flow(0, "udp", "a", "b", None, None, "127.0.0.1", 0 + 19500,
                        rate_mbps=2.0, size=1000),
             cross.Flow(1, "tcp", "a", "b", None, None, "127.0.0.1", 19501)]
    ct = cross.CrossTraffic(flows, tmp_path, drain_s=0.3).start()
    pids = ct.pids()
    time.sleep(1.5)
    rep = ct.stop()
    udp, tcp = rep["flows"]
    assert udp["sent"] > 50 and udp["received"] == udp["sent"] and udp["loss_pct"] == 0
    assert tcp["bytes_received"] > 0 and tcp["bytes_received"] <= tcp["bytes_sent"]
    for pid in pids:
        assert procs.start_time(pid) is None
    assert rep["cpu_s"]["sender"] > 0 and rep["cpu_s"]["receiver"] > 0
    assert (tmp_path / "report.json").exists()


def test_flow_validation():
    with pytest.raises(ValueError, match="UDP size"):
        cross.Flow(0, "udp", "a", "b", None, None, "127.0.0.1", 9000, rate_mbps=1, size=20)
    with pytest.raises(ValueError, match="kind"):
        cross.Flow(0, "sctp", "a", "b", None, None, "127.0.0.1", 9000)
    f = cross.Flow(0, "udp", "a", "b", None, None, "127.0.0.1", 9000, rate_mbps=8, size=1000)
    assert f.interval_ns == 1_000_000


def test_pairs_on_a_transit_stub_network_cross_the_core():
    from concast.topologies import transit_stub
    ts = transit_stub(seed=1)
    plan, domains = ts.plan(), ts.meta["domains"]
    chosen = pairs.choose_pairs(ts, 40, seed=7, exclude=["sv"], domains=domains)
    assert len(set(chosen)) == 40
    hops = pairs.router_hops(plan)
    for s, d in chosen:
        ds, dd = domains[plan.hosts[s].router], domains[plan.hosts[d].router]
        assert ds.startswith("S") and dd.startswith("S") and ds != dd
        assert hops[plan.hosts[s].router][plan.hosts[d].router] >= 2
    assert "sv" not in {h for p in chosen for h in p}


def test_room_for_files_raises_the_soft_limit():
    import os
    import resource
    from concast import netns
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 10, hard))
        netns.room_for_files(500)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= in_use + 500
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
