"""The multiplex service end to end (docs/multiplex.md) on dumbbell(clients=8): routerd on
r1 and r2, hostd on every host, real kernel TCP. Eight clients download a page from sv at
once with ACK multiplexing on (turned on through `concast mplex`), and the test checks that
routers combine ACKs, that every ACK each client's kernel sent reaches sv's kernel exactly
once (or is accounted for by the TTL rule), and that every download is intact.

The downloads run once (module fixture, `concast exp mplex`'s own phase); the tests then
read its captures and counters.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from concast import ROOT
from concast.topologies.experiments import mplex, pcapread

pytestmark = pytest.mark.mininet
PYTHON = sys.executable
SETTINGS = mplex.Settings(clients=8, size=400_000, max_local_delay_ms=2.0, max_total_delay_ms=10.0)
CLIENTS = [f"c{i}" for i in range(1, 9)]


def cli(node, *args: str) -> subprocess.CompletedProcess:
    """`concast ...` inside a host's namespace (it finds that host's hostd by itself)."""
    p = node.popen([PYTHON, "-m", "concast.cli", *args], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True, cwd=str(ROOT))
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(args, p.returncode, out, err)


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    why = mplex.missing_prerequisites()
    if why:
        pytest.skip(why)
    tb = mplex.Testbed(SETTINGS, run_dir=tmp_path_factory.mktemp("mplex"))
    try:
        tb.start()
        # As a person would: the receiver and one sender through the command line.
        tb.cli_receiver = cli(tb.net["sv"], "mplex", "on", "--role", "receiver")
        tb.cli_sender = cli(tb.net["c1"], "mplex", "on", "--role", "sender", "--to", tb.sv,
                            "--max-local-delay", "2", "--max-total-delay", "10")
        tb.cli_status = cli(tb.net["c1"], "mplex", "status", "--json")
        # The rest (idempotent for sv and c1), the downloads, then everything off again.
        tb.phase = tb.run_phase("on", tb.net.run_dir / "pcap" / "mplex-on")
        yield tb
    finally:
        tb.stop()


def test_the_command_line_turns_multiplexing_on(bed):
    assert bed.cli_receiver.returncode == 0, bed.cli_receiver.stderr
    assert "receiving: group 1, injecting into mplex0" in bed.cli_receiver.stdout
    assert bed.cli_sender.returncode == 0, bed.cli_sender.stderr
    assert bed.cli_sender.stdout.startswith("capturing"), bed.cli_sender.stdout
    status = json.loads(bed.cli_status.stdout)
    (flow,) = status["senders"]
    assert (flow["receiver"], flow["group"], flow["state"]) == (bed.sv, 1, "capturing")
    assert (flow["max_local_delay_us"], flow["max_total_delay_us"]) == (2000, 10_000)
    assert "--queue-bypass" in flow["rule"] and "SYN,FIN,RST,ACK ACK" in flow["rule"]


def test_every_download_is_intact(bed):
    p = bed.phase
    assert p.intact == len(CLIENTS), {h: vars(d) for h, d in p.downloads.items()}


def test_routers_combine_acks_of_several_clients(bed):
    p = bed.phase
    for r in ("r1", "r2"):
        c = p.routers[r]
        assert c["merged_in"] > 0, (r, c)
    assert p.routers["r1"]["merged_in"] > p.routers["r1"]["merged_out"], p.routers
    # Every ACK crossed each link inside an MplexPkt; some packets carried several.
    for link in ("access", "r1-r2", "r2-sv"):
        c = p.links[link]
        assert (c.records, c.plain_acks) == (p.acks_sent, 0), (link, c)
    for link in ("r1-r2", "r2-sv"):
        c = p.links[link]
        assert max(c.sizes) >= 2 and c.mplex < c.records, (link, c)
    assert set(p.links["access"].sizes) == {1}, "hosts send one record per MplexPkt"
    # Bundles mix clients: some MplexPkt on r2→sv holds ACKs of two different sources.
    mixed = 0
    for path in p.pcaps["r2-sv"]:
        for _, ip in pcapread.datagrams(path):
            recs = pcapread.mplex_records(ip)
            if recs and len({r.src for r in recs}) >= 2:
                mixed += 1
    assert mixed > 0


def test_every_ack_reaches_the_servers_tcp_exactly_once(bed):
    p = bed.phase
    assert not p.capture_drops, f"tcpdump lost packets, the comparison would be wrong: {p.capture_drops}"
    # The NFLOG captures saw every ACK the queues took (the capture itself lost none).
    captured = sum(p.hostd[h]["senders"][0]["counters"]["captured"] for h in CLIENTS)
    assert p.acks_sent == captured > 100 * len(CLIENTS) // 4
    acc = p.accounting
    assert acc["extra"] == 0, f"ACKs at sv that no client sent, or duplicates: {acc['extra_keys']}"
    assert acc["lost_in_network"] == 0, f"lost between the clients and sv's interface: {acc}"
    assert acc["lost_at_sv"] == acc["missing"] == p.expired(), \
        f"{acc['missing']} ACKs lost, {p.expired()} dropped by the TTL rule: {acc}"


def test_counters_add_up(bed):
    p = bed.phase
    sent = 0
    for h in CLIENTS:
        c = p.hostd[h]["senders"][0]["counters"]
        assert c["captured"] == c["sent"] + c["passed_untouched"] + c["send_errors"], (h, c)
        assert c["send_errors"] == 0, (h, c)
        sent += c["sent"]
    (rx,) = p.hostd["sv"]["receivers"]
    c = rx["counters"]
    assert c["records"] == sent == p.acks_sent
    assert c["delivered"] + c["expired_ttl"] + c["inject_errors"] == c["records"]
    assert c["malformed_dropped"] == 0 and c["inject_errors"] == 0
    assert c["mplex_received"] == p.links["r2-sv"].mplex


def test_turning_off_leaves_no_rule_and_no_device(bed):
    for h in ("c1", "c2"):
        rules = bed.net[h].cmd("iptables -S OUTPUT")
        assert "concast-mplex" not in rules and "NFQUEUE" not in rules, rules
    assert "mplex0" not in bed.net["sv"].cmd("ip -o link")
    status = json.loads(cli(bed.net["sv"], "mplex", "status", "--json").stdout)
    assert status["receivers"] == [] and status["senders"] == []


def test_without_a_receiver_the_sender_falls_back_and_captures_nothing(bed):
    r = cli(bed.net["c2"], "mplex", "on", "--role", "sender", "--to", bed.net.ip("c3"),
            "--max-local-delay", "1", "--max-total-delay", "5", "--timeout", "10")
    assert r.returncode == 1 and "fell back" in r.stdout, (r.stdout, r.stderr)
    assert "NFQUEUE" not in bed.net["c2"].cmd("iptables -S OUTPUT")
    off = cli(bed.net["c2"], "mplex", "off", "--role", "sender", "--to", bed.net.ip("c3"))
    assert off.returncode == 0, off.stderr


def test_bad_requests_are_refused_with_the_reason(bed):
    own = cli(bed.net["c1"], "mplex", "on", "--role", "sender", "--to", bed.net.ip("c1"),
              "--max-local-delay", "1", "--max-total-delay", "5")
    assert own.returncode == 1 and "this host" in own.stderr, (own.stdout, own.stderr)
    not_on = cli(bed.net["sv"], "mplex", "off", "--role", "receiver", "--group", "9")
    assert not_on.returncode == 1 and "not on for group 9" in not_on.stderr, not_on.stderr
    bad = cli(bed.net["c1"], "mplex", "on", "--role", "sender", "--to", bed.sv,
              "--max-local-delay", "20", "--max-total-delay", "5")
    assert bad.returncode == 2 and "exceeds" in bad.stderr
