"""Path MTU from CSP on the Linux and OVS data planes (docs/protocol.md 2.3, docs/multiplex.md
"Bundle size"): h1 - r1 - r2 - r3 (oblivious) - sv, every link 9000 bytes but r2 - r3, whose MTU
the module parameter sets. sv serves group 7 with the multiplex spec (group 1 is hostd's
multiplex service, which joins only for captured ACKs); h1 joins (sv, 7) and sends 300
one-record MplexPkts, each one ACK of its own flow, at once; r1 and r2 bundle them, holding
up to 400 ms.

- r2 - r3 at 1000: r2 learns 1000 from its own link toward R (R's JOIN_ACK said 9000, r3
  cannot tell), r1 learns it from r2. Every bundle reaching sv is at most 1000 bytes and
  every ACK arrives (with bundles sized for 1500, r2's kernel would drop them at that link).
- r2 - r3 at 9000: the bundles reaching sv are larger than 4096 bytes.

A SPEC_CHUNK datagram is 1104 bytes (1024 of data), more than a 1000-byte link passes, so a
spec cannot be fetched across one (docs/protocol.md 2.3). The routers therefore fetch it in a
first join while the link is still 9000 bytes; the link then shrinks and h1 joins again,
the routers using the spec they cached by hash (section 2.5).
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from hostdtools import PYTHON, SPECS, concast_network, router_flow, wait_for

from concast.hosts import Client
from concast.scapy import mplex_records
from concast.topologies import ConcastNet
from concast.netmodel import naming
from concast.topologies import links
from concast.topologies.capture import Capture

pytestmark = pytest.mark.mininet

ACKS = 300
GROUP = 7
HOLD_US = 400_000
SENDER = Path(__file__).with_name("mplexsend.py")


def line(dataplane: str) -> ConcastNet:
    return (ConcastNet(dataplane=dataplane)
            .routers("r1", "r2").router("r3", capable=False)
            .host("h1", router="r1", mtu=9000).host("sv", router="r3", mtu=9000)
            .link("r1", "r2", mtu=9000).link("r2", "r3", mtu=9000))


@pytest.fixture(scope="module", params=[("linux", 1000), ("linux", 9000), ("ovs", 1000),
                                        ("ovs", 9000)], ids=lambda p: f"{p[0]}-{p[1]}")
def run(request, tmp_path_factory):
    dataplane, small = request.param
    for n in concast_network(line(dataplane), tmp_path_factory.mktemp(f"path-mtu-{small}")):
        sv = n.ip("sv")
        with Client(n.hostd_socket("sv")) as rx:
            rx.install_spec(GROUP, SPECS / "multiplex.wasm")
        with Client(n.hostd_socket("h1")) as h1:
            join(n, h1)                 # every node fetches and caches the spec
            h1.leave(sv, GROUP)
            wait_for(lambda: all(router_flow(n, r, GROUP) is None for r in ("r1", "r2")), 15,
                     "the routers did not forget the flow after h1 left")
            links.set_mtu(mininet_link(n, "r2", "r3"), small)
            join(n, h1)
            flows = h1.flows()["flows"]
        with Capture(n["sv"], "sv-eth0", n.run_dir / "sv.pcap", "ip proto 254") as cap:
            sent = n["h1"].popen([PYTHON, str(SENDER), "--dst", sv, "--count", str(ACKS),
                                  "--max-local-delay-us", str(HOLD_US), "--group", str(GROUP)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = sent.communicate(timeout=60)
            assert sent.returncode == 0 and out.strip() == str(ACKS), err
            deadline = time.monotonic() + 10 * HOLD_US / 1e6
            while time.monotonic() < deadline and received(cap) < ACKS:
                time.sleep(0.2)
        yield {"small": small, "net": n, "packets": cap.packets(), "h1_flows": flows,
               "r1": router_flow(n, "r1", GROUP), "r2": router_flow(n, "r2", GROUP)}


def mininet_link(n, a: str, b: str):
    """The Mininet link between routers a and b (found by a's port name)."""
    port = next(p.ofport for p in n.plan.routers[a].ports if p.peer == b)
    name = naming.port_iface(n.tag, a, port)
    return next(ln for ln in n.mn.links if name in (ln.intf1.name, ln.intf2.name))


def join(n, h1: Client) -> None:
    """h1 joins (sv, GROUP), diverting every datagram to sv; r1 and r2 go active."""
    h1.join(n.ip("sv"), GROUP, selector="0/0")
    ev = h1.wait_settled(n.ip("sv"), GROUP, 15)
    assert ev and ev["event"] == "active", f"h1 did not join: {ev}"
    wait_for(lambda: all((router_flow(n, r, GROUP) or {}).get("state") == "active"
                         for r in ("r1", "r2")), 15, "r1 and r2 did not activate")


def received(cap: Capture) -> int:
    return sum(len(mplex_records(bytes(p.payload))) for p in cap.packets())


def bundles(run) -> list[tuple[int, int]]:
    """(IPv4 total length, records) of every MplexPkt that reached sv."""
    return [(len(p.payload), len(mplex_records(bytes(p.payload)))) for p in run["packets"]]


def test_routers_learn_the_smallest_mtu_toward_r(run):
    assert run["r2"]["path_mtu"] == run["small"], "r2's own link toward R is the small one"
    assert run["r1"]["path_mtu"] == run["small"], "r1 learns it from r2's JOIN_ACK"


def test_every_ack_arrives_exactly_once(run):
    got = bundles(run)
    assert sum(n for _, n in got) == ACKS, got


def test_bundles_fit_the_path(run):
    got = bundles(run)
    print(f"link {run['small']}: bundles at sv (bytes, records): {got}")
    assert got and max(size for size, _ in got) <= run["small"], got
    if run["small"] == 1000:
        assert len(got) >= ACKS * 29 // 1000, f"split to fit 1000 bytes: {got}"
    else:
        assert max(size for size, _ in got) > 4096, f"jumbo bundles: {got}"


def test_the_sending_host_learns_it_too(run):
    flow = next(f for f in run["h1_flows"] if f.get("group") == GROUP)
    assert flow["path_mtu"] == run["small"]
