"""`concast conform --ports` against a device under test on two interfaces (PTF's model).

The device is r1 of a `s1 - r1 - rx` network on the Linux data plane, in its own namespace:
our routerd (must conform) or a plain forwarder (must fail, with the right ids). The host
ends of its two links are moved into a namespace of the test's own, where the suite runs
alone, as it would on a machine cabled to a router. The device's pinned neighbour entries
for the two hosts are deleted, so it must resolve them by ARP, which the suite answers.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
import xml.etree.ElementTree as ET

import pytest
from hostdtools import HOLD, PYTHON, missing_builds

from concast import ROOT
from concast.conform.run import JUNIT_FILE, PCAP_DIR
from concast.netns import Scratch
from concast.topologies import line

pytestmark = pytest.mark.mininet
IFACES = {"s1": "s1-eth0", "rx": "rx-eth0"}
# A cross-section of the router tests (about 30: forwarding and TTL, joins, malformed JOINs,
# signed offers, MplexPkt ageing), to keep CI short; docs/conformance.md gives whole runs.
SUBSET = "(forwarded or join or refresh or aged) and not sender and not receiver"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


@pytest.fixture(params=["ours", "plain"], scope="module")
def device(request, tmp_path_factory):
    """(kind, tester namespace, conform flags) with the device running."""
    why = missing_builds()
    if why:
        pytest.skip(why)
    kind = request.param
    net = line(1, senders=1, capable=(kind == "ours"), dataplane="linux").start(
        run_dir=tmp_path_factory.mktemp(f"dut-{kind}"))
    tester = f"concast-conform-{os.getpid()}-{kind}"
    moved, scratch = [], Scratch()
    try:
        if kind == "ours":
            net.start_concast(hold=float(HOLD), hosts=(), timeout=10)
        plan, r1 = net.plan, net.plan.routers["r1"]
        scratch.add(tester)
        for h, iface in IFACES.items():
            ip("-n", net.netns(h), "link", "set", iface, "netns", tester)
            moved.append(h)
            ip("-n", tester, "link", "set", iface, "up")
            port = next(p for p in r1.ports if p.peer_address == plan.hosts[h].ip)
            from concast.netmodel import naming
            ip("-n", net["r1"].netns, "neigh", "del", str(plan.hosts[h].ip),
               "dev", naming.port_iface(net.tag, "r1", port.ofport))
        flags = ["--ports", ",".join(f"{h}={i}" for h, i in IFACES.items()),
                 "--addr", ",".join(f"{h}={plan.hosts[h].ip}" for h in IFACES),
                 "--dut-addr", ",".join(str(a) for a in r1.own_addresses())]
        yield kind, tester, flags
    finally:
        for h in moved:         # home again, so the network's own teardown finds them
            subprocess.run(["ip", "-n", tester, "link", "set", IFACES[h], "netns",
                            net.netns(h)], capture_output=True, timeout=20)
        scratch.close()
        net.stop()


def conform(tester: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", tester, PYTHON, "-m", "concast.cli", "conform",
                           *args], capture_output=True, text=True, cwd=str(ROOT), timeout=900)


def test_the_suite_on_two_interfaces_tells_a_concast_router_from_a_plain_forwarder(device,
                                                                                  tmp_path):
    kind, tester, flags = device
    junit = tmp_path / JUNIT_FILE
    r = conform(tester, *flags, "-k", SUBSET, "--out", str(tmp_path))
    out = r.stdout + r.stderr
    assert "device on s1=s1-eth0, rx=rx-eth0" in r.stdout, out
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    ran = [c for c in cases if c.find("skipped") is None]
    assert len(ran) >= 25, f"only {len(ran)} tests ran on the device\n{out}"
    if kind == "ours":
        assert r.returncode == 0, out
        assert "the target conforms" in r.stdout
    else:
        assert r.returncode == 1, out
        assert "the target does NOT conform" in r.stdout
        for spec in ("[2.8-1]", "[2.8-2]", "[3.1-1]"):
            assert spec in r.stdout, f"{spec} not among the failures:\n{r.stdout}"
        # a forwarder forwards: the forwarding and TTL tests pass on it
        passed = {c.get("name") for c in ran
                  if c.find("failure") is None and c.find("error") is None}
        assert "test_a_plain_datagram_is_forwarded_with_ttl_lowered_once" in passed
        assert list((tmp_path / PCAP_DIR).glob("*.pcap")), "failed tests saved no pcap"


def test_bad_port_descriptions_are_refused_before_anything_runs(tmp_path):
    r = subprocess.run([PYTHON, "-m", "concast.cli", "conform", "--ports", "s1=nosuch0,rx=lo",
                        "--addr", "s1=10.1.1.2,rx=10.2.1.2", "--dut-addr", "10.0.0.1"],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=60)
    assert r.returncode == 2 and "no interface 'nosuch0' (s1)" in r.stderr, r.stderr


PTF_TESTS = ["test_a_plain_datagram_is_forwarded_with_ttl_lowered_once",
             "test_a_join_for_an_unknown_flow_makes_the_router_join_r_itself",
             "test_records_are_aged_by_the_hops_their_mplexpkt_travelled_and_initial_ttl_is_the_max",
             "test_an_mplexpkt_with_a_malformed_options_area_is_dropped__option_overflow"]


def test_the_same_tests_run_under_ptfs_runner(device, tmp_path):
    """PTF's model: ports given as --interface N@IFACE, the rest as --test-params."""
    ptf = Path(PYTHON).parent / "ptf"
    if not ptf.exists():
        pytest.skip("PyPI ptf is not installed in .venv")
    kind, tester, flags = device
    f = dict(zip(flags[::2], flags[1::2]))
    ifaces = dict(x.split("=") for x in f["--ports"].split(","))
    params = f"addr='{f['--addr']}';dut_addr='{f['--dut-addr']}';pcaps='{tmp_path}'"
    r = subprocess.run(["ip", "netns", "exec", tester, str(ptf), "--test-dir",
                        str(ROOT / "tests" / "conform" / "ptf"), "--interface",
                        f"0@{ifaces['s1']}", "--interface", f"1@{ifaces['rx']}",
                        "--test-params", params, "--log-dir", str(tmp_path),
                        *[f"conform_ptf.{t}" for t in PTF_TESTS]],
                       capture_output=True, text=True, cwd=str(tmp_path), timeout=600)
    out = r.stdout + r.stderr
    ran = re.findall(r"^(conform_ptf\.\w+) \.\.\. (ok|FAIL|ERROR)$", r.stderr, re.M)
    assert len(ran) == len(PTF_TESTS), out
    if kind == "ours":
        assert r.returncode == 0 and all(o == "ok" for _, o in ran), out
    else:
        assert r.returncode == 1, out
        verdict = {name.split(".")[1]: o for name, o in ran}
        assert verdict[PTF_TESTS[0]] == "ok", out          # a forwarder forwards
        assert verdict[PTF_TESTS[1]] == "FAIL" and "[2.8-1]" in out, out
        assert verdict[PTF_TESTS[2]] == "FAIL" and list(tmp_path.glob("*.pcap")), out
