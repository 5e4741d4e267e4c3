"""The transit-stub generator and saved networks (no root, nothing started)."""
from __future__ import annotations

import collections
import json

import pytest

from concast.topologies import ConcastNet, netfile, transit_stub, transitstub, tree


def components(nodes, links) -> int:
    adj = collections.defaultdict(set)
    for a, b, *_ in links:
        adj[a].add(b)
        adj[b].add(a)
    left, n = set(nodes), 0
    while left:
        n += 1
        todo = [left.pop()]
        while todo:
            for m in adj[todo.pop()]:
                if m in left:
                    left.remove(m)
                    todo.append(m)
    return n


def test_default_is_the_ack_study_network():
    net = transit_stub()
    t = net.topo
    assert len(t.routers) == 220
    assert len(t.hosts) == 201
    assert sum(r.startswith("t") for r in t.routers) == 4
    assert sum(r.startswith("s") for r in t.routers) == 216
    domains = collections.Counter(net.meta["domains"].values())
    assert sorted(d for d in domains if d.startswith("S")) == sorted(f"S{i}" for i in range(1, 25))
    assert all(domains[f"S{i}"] == 9 for i in range(1, 25))
    assert domains["T1"] == 4
    assert components(t.routers, [(ln.a, ln.b) for ln in t.links]) == 1


@pytest.mark.parametrize("model", ["pure", "waxman"])
@pytest.mark.parametrize("seed", range(6))
def test_every_domain_connected(model, seed):
    p = transitstub.Params(seed=seed, edge_model=model, stub_p=0.05, transit_p=0.05,
                           transits=3, stubs_per_transit=2, stub_nodes=6, domain_p=0.0,
                           stub_var=3, clients=10)
    g = transitstub.generate_graph(p)
    assert components(g.routers, g.links) == 1
    for dom in g.transit + g.stubs:
        inside = [ln for ln in g.links if ln[0] in dom and ln[1] in dom]
        assert components(dom, inside) == 1
    for dom, parent in zip(g.stubs, g.stub_parent):
        up = [ln for ln in g.links if ln[2] == "transit-stub" and
              {ln[0], ln[1]} & set(dom)]
        assert len(up) == 1 and parent in up[0][:2]
    assert all(3 <= len(d) <= 9 for d in g.stubs)
    assert len({len(d) for d in g.stubs}) > 1


def test_same_seed_same_network_other_seed_differs():
    a, b = transit_stub(seed=7), transit_stub(seed=7)
    assert netfile.to_dict(a) == netfile.to_dict(b)
    assert a.plan() == b.plan()
    c = transit_stub(seed=8)
    assert [(ln.a, ln.b) for ln in a.topo.links] != [(ln.a, ln.b) for ln in c.topo.links]


def test_link_classes_and_params():
    net = transit_stub(core={"delay": "5ms", "bw": 100}, edge={"delay": "7ms", "bw": 10},
                       access={"bw": 50})
    classes = net.meta["link_classes"]
    assert len(classes) == len(net.topo.links)
    assert set(classes) == {"transit", "transit-stub", "stub"}
    for ln, kind in zip(net.topo.links, classes):
        want = {"delay": "5ms", "bw": 100} if kind in ("transit", "transit-stub") \
            else {"delay": "7ms", "bw": 10}
        assert ln.params == want
        doms = net.meta["domains"]
        if kind == "stub":
            assert doms[ln.a] == doms[ln.b] and doms[ln.a].startswith("S")
        elif kind == "transit":
            assert doms[ln.a].startswith("T") and doms[ln.b].startswith("T")
        else:
            assert {doms[ln.a][0], doms[ln.b][0]} == {"T", "S"}
    assert all(h.params == {"bw": 50} for h in net.topo.hosts.values())


def test_default_link_params_are_the_papers():
    net = transit_stub()
    for ln, kind in zip(net.topo.links, net.meta["link_classes"]):
        bw = 100.0 if kind != "stub" else 10.0
        assert ln.params == {"delay": "10ms", "bw": bw, "max_queue_size": 20}


def test_clients_spread_over_every_stub_domain():
    net = transit_stub()
    doms = net.meta["domains"]
    per_router = collections.Counter(h.router for n, h in net.topo.hosts.items() if n != "sv")
    assert max(per_router.values()) == 1          # 200 clients, 216 stub routers
    per_stub = collections.Counter(doms[r] for r in per_router.elements())
    assert len(per_stub) == 24 and max(per_stub.values()) - min(per_stub.values()) <= 1
    assert all(doms[r].startswith("S") for r in per_router)
    assert doms[net.topo.hosts["sv"].router].startswith("S")
    few = transit_stub(clients=5, placement="round-robin")
    assert len({few.meta["domains"][h.router] for n, h in few.topo.hosts.items()
                if n != "sv"}) == 5


def test_random_placement_is_seeded():
    a = transit_stub(placement="random", seed=3)
    b = transit_stub(placement="random", seed=3)
    assert {n: h.router for n, h in a.topo.hosts.items()} == \
        {n: h.router for n, h in b.topo.hosts.items()}


def test_extra_links():
    net = transit_stub(extra_transit_stub=5, extra_stub_stub=4, clients=0)
    c = collections.Counter(net.meta["link_classes"])
    assert c["transit-stub"] == 24 + 5 and c["stub-stub"] == 4
    pairs = [frozenset((ln.a, ln.b)) for ln in net.topo.links]
    assert len(pairs) == len(set(pairs))


@pytest.mark.parametrize("kw, message", [
    ({"stub_nodes": 12}, "at most 254 routers"),
    ({"stubs_per_transit": 70, "stub_nodes": 1}, "at most 254 routers"),
    ({"transit_nodes": 30, "stubs_per_transit": 40, "stub_nodes": 10}, "12030 routers"),
    ({"stub_nodes": 11, "stub_var": 2, "seed": 1}, "at most 254 routers"),
    ({"stub_var": 9}, "stub_var"),
    ({"edge_model": "grid"}, "edge_model"),
    ({"stub_p": 1.5}, "stub_p"),
    ({"server_router": "x9"}, "server_router"),
])
def test_limits_raise_clear_errors(kw, message):
    with pytest.raises(ValueError, match=message):
        transit_stub(**kw)


def test_too_many_hosts_on_one_router():
    with pytest.raises(ValueError, match="at most 254 hosts"):
        transit_stub(transit_nodes=1, stubs_per_transit=1, stub_nodes=1, clients=300)


def test_unknown_parameter():
    with pytest.raises(TypeError, match="stubs"):
        transit_stub(stubs=3)


def test_json_round_trip(tmp_path):
    net = transit_stub(seed=5, clients=30, capable=False)
    path = net.save(tmp_path / "ts.json")
    back = ConcastNet.load(path)
    assert netfile.to_dict(back) == netfile.to_dict(net)
    assert back.plan() == net.plan()
    data = json.loads(path.read_text())
    assert data["generator"]["name"] == "transit-stub" and data["generator"]["seed"] == 5
    assert data["routers"][0] == {"name": "t1", "capable": False}
    assert back.meta["link_classes"] == net.meta["link_classes"]
    assert ConcastNet.load(path, dataplane="bmv2").dataplane == "bmv2"


def test_prebuilt_shapes_round_trip(tmp_path):
    net = tree(levels=3, senders=5, oblivious=("r2",))
    back = ConcastNet.load(net.save(tmp_path / "tree.json"))
    assert back.plan() == net.plan()
    assert back.topo.routers["r2"].capable is False


def test_hand_written_file_without_order(tmp_path):
    path = tmp_path / "hand.json"
    path.write_text(json.dumps({
        "format": "concast-net", "version": 1,
        "routers": [{"name": "r1"}, {"name": "r2", "capable": False}],
        "hosts": [{"name": "a", "router": "r1"}, {"name": "b", "router": "r2",
                                                  "params": {"bw": 5}}],
        "links": [{"a": "r1", "b": "r2", "params": {"delay": "10ms"}}]}))
    net = ConcastNet.load(path)
    assert len(net.topo.routers) == 2 and net.topo.hosts["b"].params == {"bw": 5}
    assert net.topo.links[0].params == {"delay": "10ms"}


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(format="other"), "not a saved concast network"),
    (lambda d: d.update(version=99), "version 99"),
    (lambda d: d["order"].pop(), "exactly once"),
    (lambda d: d["order"].append("link 0"), "not an unused"),
    (lambda d: d["hosts"][0].update(router="nowhere"), "unknown router"),
    (lambda d: d["links"][0].pop("b"), "missing 'b'"),
])
def test_bad_files_give_clear_errors(tmp_path, change, message):
    d = netfile.to_dict(tree(levels=2, senders=2))
    change(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=message):
        ConcastNet.load(path)


def test_not_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{nope")
    with pytest.raises(ValueError, match="not JSON"):
        ConcastNet.load(path)
