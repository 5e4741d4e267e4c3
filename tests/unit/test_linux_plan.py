"""The Linux data plane's pure parts (no root): diversion programs, tc command lines and
parsing, and what a router is programmed with."""
from __future__ import annotations

from ipaddress import IPv4Address

import pytest

from concast.controller.linux import tc
from concast.controller.linux.bpf import divert_program
from concast.controller.linux.dataplane import LinuxDataplane
from concast.controller.routes import all_routes
from concast.topologies import mixed, tree

# The same vector routerd's tc.rs is tested with: `tcpdump -ddd 'ip dst 10.1.1.2 and udp dst
# port 5000'`, returning 0xffffffff on a match.
VECTOR = ("13,40 0 0 12,21 0 10 2048,32 0 0 30,21 0 8 167837954,48 0 0 23,21 0 6 17,"
          "40 0 0 20,69 4 0 8191,177 0 0 14,72 0 0 16,21 0 1 5000,6 0 0 4294967295,6 0 0 0")


def insns(program: str) -> list[dict]:
    words = program.split(",")[1:]
    return [dict(zip(("code", "jt", "jf", "k"), map(int, w.split()))) for w in words]


def test_programs_match_the_shared_vector():
    assert divert_program("10.1.1.2", 17, 5000) == VECTOR
    assert divert_program(None, 253) == "6,40 0 0 12,21 0 3 2048,48 0 0 23,21 0 1 253,6 0 0 4294967295,6 0 0 0"
    assert divert_program("10.1.1.2", 254, 9) == divert_program("10.1.1.2", 254), "port needs TCP/UDP"
    with pytest.raises(ValueError):
        divert_program("10.1.1.2", 300)


@pytest.mark.parametrize("match", [("10.1.1.2", 17, 5000), ("10.1.1.2", 6, 0), (None, 253, 0),
                                   ("10.0.0.3", 0, 0)])
def test_a_program_reads_back_as_its_match(match):
    assert tc.match_of(insns(divert_program(*match))) == match


def test_filter_dump_parses_into_rules_with_counts():
    dump = [{"protocol": "ip", "pref": 30, "kind": "bpf", "chain": 0},
            {"protocol": "ip", "pref": 30, "kind": "bpf", "chain": 0, "options": {
                "handle": "0x10000", "bytecode": {"length": 13, "insns": insns(VECTOR)},
                "actions": [{"kind": "mirred", "to_dev": "ccxxr1-cpu",
                             "stats": {"bytes": 120, "packets": 2}}]}}]
    assert tc.parse_filters(dump) == [{"pref": 30, "handle": 0x10000, "dst": "10.1.1.2",
                                       "proto": 17, "dport": 5000, "n_packets": 2,
                                       "n_bytes": 120, "to": "ccxxr1-cpu"}]


def test_a_capable_router_gets_addresses_routes_neighbours_and_static_rules():
    plan = tree(levels=2, fanout=2, senders=2, dataplane="linux").plan()
    dp = LinuxDataplane("xx", plan)
    r1 = dp.routers["r1"]
    cmds = r1.ip_cmds(all_routes(plan)["r1"])
    assert "address add 10.0.0.1/32 dev lo" in cmds
    assert any(c.startswith("link add ccxxr1-cpu address 02:cc:0a:00:00:01 mtu 65535 type veth") for c in cmds)
    for p in r1.plan.ports:
        dev = f"ccxxr1-{p.ofport}"
        assert f"link set dev {dev} address {r1.mac}" in cmds, "every port has the router MAC"
        assert f"neigh replace {p.peer_address} lladdr {p.peer_mac} dev {dev} nud permanent" in cmds
    # A leaf's subnet is reached through the leaf's link address, never a connected route.
    leaf = plan.hosts["s1"]
    assert any(c.startswith(f"route replace {leaf.subnet} via 172.16.") for c in cmds)
    assert not any(c.startswith(f"route replace {plan.hosts['rx'].subnet}") for c in cmds)
    t = r1.tc_cmds()
    assert sum(c.startswith("qdisc add dev ccxxr1-") for c in t) == len(r1.plan.ports)
    own = [IPv4Address(a) for a in r1.plan.own_addresses()]
    assert len([c for c in t if " pref 10 " in c]) == len(own)
    assert len([c for c in t if " pref 20 " in c]) == 1
    assert "net.ipv4.conf.ccxxr1-cpu.accept_local=1" in r1.sysctls()


def test_an_oblivious_router_has_no_cpu_port_and_no_rules():
    plan = mixed(levels=3, fanout=2, senders=8, dataplane="linux").plan()
    r2 = LinuxDataplane("xx", plan).routers["r2"]
    assert not r2.capable and r2.tc_cmds() == []
    assert not any("cpu" in c for c in r2.ip_cmds(all_routes(plan)["r2"]))
