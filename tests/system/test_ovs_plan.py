"""The parts of the OVS data plane that need no root: address plan, routes, rules,
selector cookies, counter parsing."""
from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

import pytest

from concast.controller.ovs import counters, pipeline
from concast.controller.ovs import selectors as sel
from concast.controller.routes import all_routes, router_hops
from concast.topologies import ConcastNet, dumbbell, mixed, star, tree


def test_address_plan_is_deterministic_and_documented():
    plan = (ConcastNet().router("r1").router("r2", capable=False)
            .host("h1", router="r1").host("rx", router="r2").link("r1", "r2")).plan()
    r1, r2, h1, rx = plan.routers["r1"], plan.routers["r2"], plan.hosts["h1"], plan.hosts["rx"]
    assert (r1.router_id, r2.router_id) == (IPv4Address("10.0.0.1"), IPv4Address("10.0.0.2"))
    assert (h1.ip, h1.gateway, h1.subnet) == (IPv4Address("10.1.1.2"), IPv4Address("10.1.1.1"),
                                              IPv4Network("10.1.1.0/24"))
    assert rx.ip == IPv4Address("10.2.1.2")
    assert plan.links[0].subnet == IPv4Network("172.16.0.0/30")
    assert (r1.mac, h1.mac, h1.gateway_mac) == ("02:cc:0a:00:00:01", "02:cc:0a:01:01:02",
                                                "02:cc:0a:00:00:01")
    assert [p.ofport for p in r1.ports] == [1, 2] and not r2.capable


def test_prebuilt_shapes():
    t = tree(levels=2, fanout=2, senders=8).plan()
    assert len(t.routers) == 3 and len(t.hosts) == 9
    assert {router_hops(t, f"s{i}", "rx") for i in range(1, 9)} == {2}
    m = mixed().plan()
    assert [r.name for r in m.routers.values() if not r.capable] == ["r2", "r3"]
    assert len(star(clients=5).plan().hosts) == 6
    d = dumbbell(clients=3).plan()
    assert router_hops(d, "c1", "sv") == 2


def test_names_are_checked():
    with pytest.raises(ValueError):
        ConcastNet().router("toolongname")
    with pytest.raises(ValueError):
        ConcastNet().router("r1").host("h1", router="r9")
    with pytest.raises(ValueError):
        ConcastNet().router("r1").host("r1", router="r1")


def test_pipeline_diverts_only_on_capable_routers():
    plan = mixed().plan()
    routes = all_routes(plan)
    capable = pipeline.router_flows(plan.routers["r1"], routes["r1"])
    oblivious = pipeline.router_flows(plan.routers["r2"], routes["r2"])
    assert any("in_port=1000" in f and "priority=1000" in f for f in capable)
    assert any("nw_proto=253" in f and "output:1000" in f for f in capable)
    assert not any("1000" in f for f in oblivious)
    fwd = [f for f in oblivious if "table=1" in f and "dec_ttl" in f]
    assert fwd and all(f"priority={f.split('nw_dst=')[1].split('/')[1].split(',')[0]}" in f
                       for f in fwd)


def test_selector_cookie_round_trip_and_command_lines():
    s = sel.Selector("10.1.1.2", 17, 5000)
    assert s.cookie == 0xCE0A01010211_1388
    assert sel.Selector.from_cookie(s.cookie) == s
    assert s.install_argv("ccabr1") == [
        "ovs-ofctl", "-O", "OpenFlow13", "add-flow", "ccabr1",
        "cookie=0xce0a010102111388,table=0,priority=300,ip,nw_dst=10.1.1.2,nw_proto=17,"
        "tp_dst=5000,actions=output:1000"]
    assert s.remove_argv("ccabr1")[-1] == "cookie=0xce0a010102111388/-1,table=0"
    with pytest.raises(ValueError):
        sel.Selector("10.1.1.2", 1, 80)                 # ports only for TCP and UDP


def test_counter_parsing():
    flows = counters.parse_flows(
        "OFPST_FLOW reply (OF1.3) (xid=0x2):\n"
        " cookie=0xce0a010102111388, duration=1.5s, table=0, n_packets=3, n_bytes=180, "
        "priority=300,udp,nw_dst=10.1.1.2,tp_dst=5000 actions=output:1000\n")
    assert flows[0]["n_packets"] == 3 and flows[0]["priority"] == 300
    assert flows[0]["fields"] == {"udp": True, "nw_dst": "10.1.1.2", "tp_dst": "5000"}
    ports = counters.parse_ports(
        "OFPST_PORT reply (OF1.3) (xid=0x2): 1 ports\n"
        "  port  1: rx pkts=4, bytes=376, drop=0, errs=0, frame=0, over=0, crc=0\n"
        "           tx pkts=5, bytes=466, drop=?, errs=0, coll=0\n"
        "           duration=0.272s\n")
    assert ports["1"]["rx_pkts"] == 4 and ports["1"]["tx_bytes"] == 466
    assert "tx_drop" not in ports["1"]
