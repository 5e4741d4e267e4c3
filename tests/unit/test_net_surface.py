"""The interactive network's switches and the daemon verbs' exit codes (issue #27, item 3):
--links picks netem only where this kernel has it, --p4/--bmv2-log need BMv2 and p4c (exit 3
here, where they are not installed), a verb with no network up exits 3, `concast decode`
prints one line per packet with the sum payload decoded, spec parameters embed."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from concast import tools
from concast.hosts import aggregate
from concast.topologies import links, up


def concast(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concast.cli", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_links_auto_takes_netem_exactly_where_the_kernel_has_it():
    has = links.netem_available()
    assert up.links_choice("auto", None) == ("netem" if has else None)
    assert up.links_choice("linkemu", None) is True
    if has:
        assert up.links_choice("netem", None) == "netem"
    else:
        with pytest.raises(LookupError, match="no netem"):
            up.links_choice("netem", None)


def test_links_netem_without_netem_is_a_missing_prerequisite():
    if links.netem_available():
        pytest.skip("this kernel has netem")
    r = concast("net", "up", "tree", "--links", "netem", "--dry-run")
    assert r.returncode == 3, r.stderr
    assert "missing prerequisite" in r.stderr and "netem" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args", [["--p4", __file__], ["--bmv2-log"]])
def test_p4_switches_need_bmv2_and_p4c(args):
    r = concast("net", "up", "tree", "--dataplane", "bmv2", *args)
    if shutil.which("p4c-bm2-ss") and shutil.which("simple_switch_grpc"):
        pytest.skip("BMv2 and p4c are installed here")
    assert r.returncode == 3, r.stderr
    assert "missing prerequisite" in r.stderr and "p4c" in r.stderr
    # on another data plane they are a usage error
    r = concast("net", "up", "tree", *args)
    assert r.returncode == 2 and "--dataplane bmv2" in r.stderr


@pytest.mark.parametrize("args", [
    ["send", "--node", "nosuchhost", "--to", "10.1.1.2", "--group", "7", "5"],
    ["send", "--socket", "/nonexistent/hostd.sock", "--to", "rx", "--group", "7", "5"],
    ["recv", "--socket", "/nonexistent/hostd.sock", "--group", "7", "--timeout", "1"],
    ["host", "status", "/nonexistent/hostd.sock"],
    ["router", "status", "/nonexistent/routerd.sock"],
    ["mplex", "status", "--socket", "/nonexistent/hostd.sock"],
], ids=lambda a: " ".join(a[:2]))
def test_no_network_up_is_a_missing_prerequisite(args):
    r = concast(*args)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "missing prerequisite" in r.stderr and "concast net up" in r.stderr
    assert "Traceback" not in r.stderr


def test_decode_prints_one_line_per_packet_with_the_sum_decoded(tmp_path):
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap
    from concast.scapy import IPOption_Concast
    pkt = (Ether() / IP(src="10.0.0.1", dst="10.1.1.2", ttl=63,
                        options=[IPOption_Concast(group=7)])
           / UDP(sport=4000, dport=5000) / aggregate.encode(1, 15, count=2))
    path = tmp_path / "x.pcap"
    wrpcap(str(path), [pkt, pkt])
    r = concast("decode", "--pcap", str(path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    assert "10.0.0.1 > 10.1.1.2 concast group=7" in lines[0]
    assert "udp 4000>5000 sum/aggregate key=1 count=2 value=15" in lines[0]
    v = concast("decode", "-v", "--pcap", str(path))
    assert len(v.stdout.splitlines()) > 10 and "###[ IP ]###" in v.stdout


def test_round_timeout_is_embedded_in_the_spec():
    from concast import hostcli
    try:
        tools.rust_binary("concast-spec")
        plain = hostcli.spec_bytes("sum", [])
    except tools.MissingTool as e:
        pytest.skip(str(e))
    params = hostcli.spec_params(["fanin=2"], 5)
    assert params == ["fanin=2", "timeout_us=5000000"]
    embedded = hostcli.spec_bytes("sum", params)
    assert embedded != plain and b"timeout_us=5000000" in embedded
    with pytest.raises(hostcli.BadUsage):
        hostcli.spec_params(["fanin"], None)


def test_recv_names_the_source_and_where_it_came_from(tmp_path):
    import json
    from concast import hostcli
    for kind, name, cfg in (("hosts", "rx", {"addr": "10.1.1.2"}),
                            ("routers", "r1", {"addr": "10.0.0.1", "addresses": ["172.16.0.1"]})):
        (tmp_path / kind).mkdir(exist_ok=True)
        (tmp_path / kind / f"{name}.json").write_text(json.dumps(cfg))
    names = hostcli.node_names(tmp_path / "hosts" / "rx.sock")
    assert names == {"10.1.1.2": "rx", "10.0.0.1": "r1", "172.16.0.1": "r1"}
    ev = {"kind": "merged", "src": "10.1.1.2", "from": ["10.0.0.1"], "ttl": 62, "dport": 5000,
          "payload": aggregate.encode(1, 15, count=2).hex()}
    line = hostcli.describe_datagram(ev, names)
    assert "src=10.1.1.2(rx) from=10.0.0.1(r1)" in line and "count=2 value=15" in line
    assert "from=" not in hostcli.describe_datagram({**ev, "from": []}, names)


def test_pcap_takes_hosts_links_and_router_links():
    from concast.netmodel import addressing, naming
    from concast.topologies import line
    plan = addressing.plan(line(2, senders=1).topo)
    (ln,) = plan.links
    every = up.capture_points(plan, "t1", "all")
    assert [label for label, _ in every] == [*plan.hosts, f"{ln.a}-{ln.b}"]
    assert (f"{ln.a}-{ln.b}", naming.port_iface("t1", ln.a, ln.port_a)) in every
    host = next(iter(plan.hosts))
    assert up.capture_points(plan, "t1", f"{host},{ln.b}-{ln.a}") == [
        (host, naming.host_iface(host)), (f"{ln.b}-{ln.a}", naming.port_iface("t1", ln.a, ln.port_a))]
    with pytest.raises(ValueError, match="no host or ROUTER-ROUTER link r9-r1"):
        up.capture_points(plan, "t1", "r9-r1")


@pytest.mark.parametrize("dataplane, hint", [("linux", "r1 ip route"),
                                             ("ovs", "sh concast router stats r1"),
                                             ("bmv2", "sh concast router table r1")])
def test_the_banner_never_suggests_pinging_a_router_that_cannot_answer(dataplane, hint):
    """OVS and BMv2 routers divert their own addresses to routerd, which answers no ping
    (found typing the banner at the prompt: 100% loss)."""
    from types import SimpleNamespace
    from concast.netmodel import addressing
    from concast.topologies import tree
    net = SimpleNamespace(plan=addressing.plan(tree(dataplane=dataplane).topo),
                          dataplane_name=dataplane)
    hints = up.examples(net)
    assert hints[:4] == ["nodes", "net", "dump", "pingall"] and hint in hints
    assert not any(h.split()[-1] == "r1" and " ping " in h for h in hints)


def test_router_names_at_the_prompt():
    names, ip = {"r1": "ccabr1"}, {"r1": "10.0.0.1"}.get
    assert up.alias_line("r1 ip route", names, ip) == "ccabr1 ip route"
    assert up.alias_line("s1 ping -c 1 r1", names, ip) == "s1 ping -c 1 10.0.0.1"
    assert up.alias_line("sh concast router stats r1", names, ip) == "sh concast router stats r1"
    assert up.alias_line("s1 concast send --to rx --group 7 5", names, ip).endswith("7 5")
