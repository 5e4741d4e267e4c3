"""A concast network over two emulated servers (ConcastNet.servers, docs/cluster.md): stub
domains whole, transit links as VXLAN, every namespace on its own server, nothing left."""
from __future__ import annotations

import subprocess

import pytest

pytestmark = pytest.mark.mininet

@pytest.fixture(scope="module")
def servers(emulated_servers):
    return emulated_servers


def small_net():
    from concast.topologies import transit_stub
    # Three transit routers, a two-router stub domain off each, four clients and the
    # server; no link parameters (plain veth/VXLAN links; emulated ones: test_cluster_ack_study).
    return transit_stub("linux", seed=3, transits=1, transit_nodes=3, stubs_per_transit=1,
                        stub_nodes=2, clients=4, core={}, edge={})


@pytest.fixture(scope="module")
def net(servers):
    desc = small_net().servers(["a", "b"], state_dir=servers.state.state_dir)
    n = desc.start()
    try:
        yield n
    finally:
        n.stop()


def netns_on(servers, name: str) -> set[str]:
    out = servers.ssh(name, "ip netns list").stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_every_host_reaches_the_server_across_servers(net):
    where = net.placement
    assert net.crossing, "the test needs a path across servers"
    for h in net.plan.hosts:
        assert net.mn[h].cmd("hostname").strip() == where[h]
        r = net.ping(h, "sv", count=1, timeout=3)
        assert r.ok, f"{h} on {where[h]} -> sv on {where['sv']}"


def test_namespaces_live_on_their_servers_only(net, servers):
    local = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for s in ("a", "b"):
        names = netns_on(servers, s)
        mine = {f"cc{net.tag}-{n}" for n, srv in net.placement.items() if srv == s}
        assert names == {x for x in names if x in mine} and names, (s, names, mine)
    assert f"cc{net.tag}-" not in local


def test_placement_is_saved_and_reused(net, servers, tmp_path):
    from concast.topologies import ConcastNet
    desc = small_net().servers(["a", "b"], state_dir=servers.state.state_dir)
    path = desc.save(tmp_path / "net.json")
    again = ConcastNet.load(path).servers(["a", "b"], state_dir=servers.state.state_dir)
    assert again.cluster["placement"] == desc.cluster["placement"] == net.placement
    domains = desc.meta["domains"]
    for d in {d for d in domains.values() if d.startswith("S")}:
        assert len({net.placement[r] for r, dd in domains.items() if dd == d}) == 1


def test_routerd_and_hostd_run_on_their_servers(net, servers):
    from concast.controller import routerdmgmt as routerd
    from concast.hosts.client import Client
    rd, hd = net.start_concast(hold=3, timeout=90)
    assert set(hd) == set(net.plan.hosts) and rd
    for r in rd:
        assert routerd.query(net.routerd_socket(r), "status", timeout=5)
    for h in hd:
        with Client(net.hostd_socket(h), timeout=5) as c:
            assert c.status()
    # Each daemon runs on its node's server only (its PID is that server's).
    for s in ("a", "b"):
        ps = servers.ssh(s, "ps -e -o comm=").stdout.split()
        want = sum(1 for n in list(rd) + list(hd) if net.placement[n] == s)
        got = sum(1 for c in ps if c.startswith("concast-"))
        assert got == want, (s, got, want)
    logs = list((net.run_dir / "logs").glob("*-hostd.log"))
    assert len(logs) == len(hd)
    concast_sums_arrive_exactly(net)
    net.stop_daemons()
    for s in ("a", "b"):
        assert not [c for c in servers.ssh(s, "ps -e -o comm=").stdout.split()
                    if c.startswith("concast-")]


def concast_sums_arrive_exactly(net):
    """Every client joins a sum flow to sv (CSP and the spec cross servers hop by hop) and
    sends one contribution per key; sv's sums and counts must be exact: every delivery
    checked, with the routers merging on both servers."""
    from hostdtools import collect, tolerant
    from concast.hosts import aggregate
    from concast.hosts.client import Client
    group, keys, sv = 9, [1, 2, 3], net.ip("sv")
    clients = [h for h in net.plan.hosts if h != "sv"]
    assert {net.placement[c] for c in clients} == {"a", "b"}
    with Client(net.hostd_socket("sv"), timeout=10) as rx:
        rx.install_spec(group, tolerant("sum"))
        rx.subscribe(group, port=5000)
        conns = {c: Client(net.hostd_socket(c), timeout=10) for c in clients}
        try:
            for c, cl in conns.items():
                cl.join(sv, group, dport=5000)
            for c, cl in conns.items():
                ev = cl.wait_settled(sv, group, timeout=30)
                assert ev and ev["event"] == "active", (c, ev)
            for k in keys:
                for i, (c, cl) in enumerate(conns.items()):
                    cl.send(sv, group, aggregate.encode(k, 100 * (i + 1) + k), dport=5000)
            sums, counts, _ = collect(rx, group, {k: len(clients) for k in keys}, timeout=20)
        finally:
            for cl in conns.values():
                cl.close()
    assert counts == {k: len(clients) for k in keys}
    assert sums == {k: sum(100 * (i + 1) + k for i in range(len(clients))) for k in keys}


def test_stop_leaves_nothing_on_the_servers(servers, net):
    """Last: stops the module's network (stop() is idempotent)."""
    from clustertools import net_leftovers
    assert netns_on(servers, "a") and netns_on(servers, "b")
    net.stop()
    assert net_leftovers(net.tag) == []
    for s in ("a", "b"):
        assert netns_on(servers, s) == set()
        links = servers.ssh(s, "ip -o link show").stdout
        assert {ln.split(":")[1].strip().split("@")[0] for ln in links.splitlines()} \
            == {"lo", "eth0"}, links
        # Nothing of the network's still running on the server (only its init and sshd).
        ps = servers.ssh(s, "ps -e -o comm=").stdout.split()
        assert set(ps) <= {"bash", "sshd", "ps"}, ps
