"""Placement over servers (topologies/cluster/placement.py) and the VXLAN MTU rule."""
import pytest

from concast.topologies import line, transit_stub, tree
from concast.topologies.cluster import placement
from concast.topologies.cluster.placement import PlacementError


def test_transit_stub_keeps_stub_domains_whole_and_only_transit_links_cross():
    net = transit_stub("linux", seed=1)            # the paper-sized 220 routers, 201 hosts
    where = placement.place(net.topo, net.meta, ["a", "b", "c", "d"])
    domains = net.meta["domains"]
    for d in {d for d in domains.values() if d.startswith("S")}:     # stub domains
        assert len({where[r] for r, dd in domains.items() if dd == d}) == 1, d
        parent = net.meta["stub_parent"][d]          # with the transit router it hangs off
        assert where[parent] == where[next(r for r, dd in domains.items() if dd == d)]
    for h in net.topo.hosts.values():
        assert where[h.name] == where[h.router]
    kinds = dict(zip([(ln.a, ln.b) for ln in net.topo.links], net.meta["link_classes"]))
    crossing = placement.crossing_links(net.topo, where)
    assert crossing and all(kinds[c] == "transit" for c in crossing)
    assert set(where.values()) == {"a", "b", "c", "d"}


def test_load_is_balanced_within_one_group():
    net = transit_stub("linux", seed=1)            # the paper-sized 220 routers, 201 hosts
    where = placement.place(net.topo, net.meta, ["a", "b", "c"])
    load = {s: sum(1 for v in where.values() if v == s) for s in "abc"}
    biggest = max(sum(1 for n, s in where.items() if n in g or
                      (n in net.topo.hosts and net.topo.hosts[n].router in g)) for g in
                  [set(g) for g in placement.groups(net.topo, net.meta)])
    assert max(load.values()) - min(load.values()) <= biggest


def test_shapes_without_domains_are_cut_into_contiguous_pieces():
    net = line(n_routers=6, senders=2, dataplane="linux")
    where = placement.place(net.topo, net.meta, ["a", "b"])
    order = [where[f"r{i}"] for i in range(1, 7)]
    assert order == sorted(order) and set(order) == {"a", "b"}
    assert len(placement.crossing_links(net.topo, where)) == 1
    one = placement.place(tree(levels=3, dataplane="linux").topo, {}, ["solo"])
    assert set(one.values()) == {"solo"}


def test_bad_server_lists_and_stale_placements_are_refused():
    net = line(n_routers=2, dataplane="linux")
    with pytest.raises(PlacementError):
        placement.place(net.topo, net.meta, [])
    with pytest.raises(PlacementError):
        placement.place(net.topo, net.meta, ["a", "a"])
    where = placement.place(net.topo, net.meta, ["a", "b"])
    with pytest.raises(PlacementError, match="not in"):
        placement.check(net.topo, where, ["a"])
    where["rx"] = "a" if where["r2"] == "b" else "b"
    with pytest.raises(PlacementError, match="rx"):
        placement.check(net.topo, where, ["a", "b"])


def test_vxlan_mtu_rule():
    pytest.importorskip("mininet.examples.cluster")
    from concast.topologies.cluster.links import VXLAN_OVERHEAD, inner_mtu
    assert VXLAN_OVERHEAD == 20 + 8 + 8 + 14
    assert inner_mtu(1550) == 1500 and inner_mtu(9000) == 1500 and inner_mtu(1500) == 1450


def test_more_servers_than_transit_routers_still_keeps_stub_domains_whole():
    net = transit_stub("linux", seed=1)                     # 4 transit routers, 24 stubs
    servers = [f"s{i}" for i in range(8)]
    where = placement.place(net.topo, net.meta, servers)
    assert set(where.values()) == set(servers)
    domains = net.meta["domains"]
    for d in {d for d in domains.values() if d.startswith("S")}:
        assert len({where[r] for r, dd in domains.items() if dd == d}) == 1, d
    kinds = dict(zip([(ln.a, ln.b) for ln in net.topo.links], net.meta["link_classes"]))
    assert {kinds[c] for c in placement.crossing_links(net.topo, where)} <= {
        "transit", "transit-stub"}


def test_more_servers_than_transit_routers_leaves_no_server_empty():
    # The quick ACK study's network: 2 transit routers, 4 stub domains; on 3 servers whole
    # transit groups left the third empty (session 11), stub domains on their own do not.
    from concast.topologies.cluster import placement as P
    from concast.topologies.experiments.ackstudy import settings, testbed
    net = testbed.describe(settings.quick())[0]
    pl = P.place(net.topo, net.meta, ["a", "b", "c"])
    assert set(pl.values()) == {"a", "b", "c"}
    domains = net.meta["domains"]
    for d in {d for d in domains.values() if d.startswith("S")}:
        assert len({pl[r] for r, dd in domains.items() if dd == d}) == 1
