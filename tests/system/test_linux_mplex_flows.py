"""Per-flow multiplexing end to end (docs/multiplex.md, "Per-flow multiplexing") on
dumbbell(clients=3) over the Linux data plane: three clients' UDP flows turned on by port
(two through `concast mplex`, one from a Python script through `Client.mplex_socket_on`),
each client's datagrams bundled first by its own hostd, then by r1 and r2 with the other
clients', and unbundled at sv; a fourth flow left alone. sv's own UDP sockets must receive
every flow byte for byte and in order."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from concast import ROOT
from concast.topologies.experiments import mplex

pytestmark = pytest.mark.mininet
PYTHON = sys.executable
TOOL = str(ROOT / "tests" / "system" / "udpflow.py")
N = 300
FLOW = ["--proto", "udp", "--sport", "5000", "--max-local-delay", "5", "--max-total-delay", "50",
        "--size-threshold", "200"]


def cli(node, *args: str) -> subprocess.CompletedProcess:
    p = node.popen([PYTHON, "-m", "concast.cli", *args], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True, cwd=str(ROOT))
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def tool(node, *args: str) -> subprocess.Popen:
    return node.popen([PYTHON, TOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True, cwd=str(ROOT))


def result(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    why = mplex.missing_prerequisites()
    if why:
        pytest.skip(why)
    settings = mplex.Settings(clients=3, size=10_000, dataplane="linux")
    tb = mplex.Testbed(settings, run_dir=tmp_path_factory.mktemp("mplex-flows"))
    try:
        tb.start()
        net, sv = tb.net, tb.sv
        tb.receiver_on = cli(net["sv"], "mplex", "on", "--role", "receiver",
                             "--max-local-delay", "3")
        tb.senders_on = [cli(net[h], "mplex", "on", "--role", "sender", "--to", sv, *FLOW)
                         for h in ("c1", "c2")]
        rx = tool(net["sv"], "recv", sv, "6000", "6001")
        assert json.loads(rx.stdout.readline())["ready"]
        before = tb.router_counters()
        senders = {
            "c1": tool(net["c1"], "send", sv, "6000", "5000", str(N)),
            "c1-plain": tool(net["c1"], "send", sv, "6001", "5001", str(N)),
            "c2": tool(net["c2"], "send", sv, "6000", "5000", str(N)),
            "c3": tool(net["c3"], "send", sv, "6000", "5000", str(N),
                       "--mplex", str(net.hostd_socket("c3"))),
        }
        tb.sent = {k: result(p) for k, p in senders.items()}
        tb.received = result(rx)
        after = tb.router_counters()
        tb.routers = {r: {k: after[r][k] - before[r][k] for k in ("merged_in", "merged_out")}
                      for r in after}
        tb.status = tb.mplex_status()
        tb.off = cli(net["c1"], "mplex", "off", "--role", "sender", "--to", sv,
                     "--proto", "udp", "--sport", "5000")
        tb.rules_after_off = net["c1"].cmd("iptables -S OUTPUT")
        yield tb
    finally:
        tb.stop()


def test_flows_are_turned_on_from_the_command_line_and_from_python(bed):
    assert bed.receiver_on.returncode == 0, bed.receiver_on.stderr
    assert "ignores --max-local-delay" in bed.receiver_on.stderr
    for r in bed.senders_on:
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("capturing: udp sport 5000 datagrams"), r.stdout
    assert bed.sent["c3"]["mplex"]["state"] == "capturing", bed.sent["c3"]


def test_every_flow_arrives_byte_for_byte_in_order(bed):
    for name, h in (("c1", "c1"), ("c1-plain", "c1"), ("c2", "c2"), ("c3", "c3")):
        key = f"{bed.net.ip(h)}:{bed.sent[name]['sport']}"
        assert bed.received.get(key) == {"count": N, "sha256": bed.sent[name]["sha256"]}, (
            name, bed.received.get(key))


def test_only_the_flows_turned_on_are_multiplexed_and_bundled(bed):
    for h in ("c1", "c2", "c3"):
        (flow,) = bed.status[h]["senders"]
        assert flow["flow"] == "udp sport 5000" and flow["max_local_delay_us"] == 5000, flow
        assert flow["counters"]["sent"] == N, flow
        # Bundled first by the host's own engine (one flow: no two records of it share one).
        assert flow["bundled_here"]["received"] == N, flow
    rx = bed.status["sv"]["receivers"][0]["counters"]
    print("routers", bed.routers, "at sv", rx["bundle_sizes"])
    assert rx["records"] == rx["delivered"] == 3 * N, rx
    # r1 combines records of the three clients: some reach sv several to an MplexPkt.
    assert bed.routers["r1"]["merged_in"] > bed.routers["r1"]["merged_out"] > 0, bed.routers
    combined = sum(int(k) * v for k, v in rx["bundle_sizes"].items() if int(k) > 1)
    assert combined > 0, rx["bundle_sizes"]


def test_turning_one_flow_off_removes_its_rule(bed):
    assert bed.off.returncode == 0, bed.off.stderr
    assert "udp sport 5000" in bed.off.stdout
    assert "concast-mplex" not in bed.rules_after_off, bed.rules_after_off
