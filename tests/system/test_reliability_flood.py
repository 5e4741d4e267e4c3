"""Malformed-packet floods beside good traffic (#15 item 2, #28 item 4, docs/reliability.md),
on every data plane this machine has (OVS, Linux, BMv2; BMv2 skips without p4c/BMv2): on
tree(levels=2, fanout=2, senders=8), s5 (behind r2) runs concast-flood — bad Concast ID
options and first fragments to rx's concast flow port, truncated CSP to rx, truncated
MplexPkts to r2 itself — while s1-s4 merge `sum` rounds and s7 sends a TCP stream to rx
through the same router. The good traffic must arrive exact (every round whole, the TCP
bytes and their SHA-256), routerd must stay up, and every malformed frame sent must be
either counted by routerd under its error name or counted as lost before it, where the data
plane counts losses:

- OVS: `concast router stats` → dataplane.not_forwarded (frames the bridge received and
  sent out of no port) and routerd's CPU-port socket (cpu_port_kernel_drops);
- Linux: the kernel's own counters of the path s5 → r2 → routerd: the veth drops of s5's
  interface and r2's ports (a full backlog), the tc diversion rules' action drops, the CPU
  port's veth drops, routerd's socket drops, and r2's IP statistics (/proc/net/snmp in its
  namespace: header errors and discards, for anything tc did not divert).
- BMv2: the P4 program counts the bad Concast ID options itself (its parser drops them:
  `malformed`, by kind), so they count as counted there; lost = what simple_switch lost
  silently, counted as differences: at its intake (kernel rx of a port less the P4
  `received` count) and at its egress queues (the program's sends less the kernel's tx;
  `Bmv2Router.intake`/`egress`, docs/dataplane-bmv2.md "Intake loss"). The flood's books on
  s5's port must balance: sent = intake loss + parsed, parsed = counted by kind (+ the CPU
  port's egress loss and routerd's socket drops).

Once at full speed, once paced to a rate the data plane keeps up with, where routerd's
counters must equal what was sent when no loss is reported.

Writes results/reliability/flood.md (OVS) and flood-linux.md (the tables of
docs/reliability.md).
"""
from __future__ import annotations

import json
import subprocess
import time

import pytest
from hostdtools import HOLD, PYTHON, missing_builds, router, tolerant, wait_for
from reliability import RoundFeeder, Tally, judge_rounds, merged_count, routerd_answers, write_table
from systools import HOSTTCP

from concast import ROOT, tools
from concast.controller.ovs import portstats
from concast.netmodel.naming import CPU_OFPORT
from concast.topologies import tree

pytestmark = pytest.mark.mininet
FLOOD = tools.binary_or_build_path("concast-flood")
FOUR = ["s1", "s2", "s3", "s4"]
NAMES = {"option": "concast_option_bad_length", "csp": "csp_truncated",
         "mplex": "mplex_truncated_header"}
TCP_BYTES = 8 << 20
# Rounds sent this long before the flood may still be inside the network when it starts
# (sender hostd, r2, r1: up to a 200 ms round timeout each): they count as during it.
IN_FLIGHT = 0.6
# The IP statistics (/proc/net/snmp, per namespace) under which a Linux router's kernel
# drops a datagram it received itself (not diverted by tc).
KERNEL_IP_DROPS = ("InHdrErrors", "InAddrErrors", "InUnknownProtos", "InDiscards",
                   "ReasmFails", "OutDiscards", "OutNoRoutes")
TABLE = {"ovs": "flood", "linux": "flood-linux", "bmv2": "flood-bmv2"}
HEADER = ["flood", "frames sent", "rate (frames/s)", "counted by routerd",
          "lost in the data plane", "lost at routerd's socket", "good rounds whole",
          "good contributions lost", "TCP bytes exact", "routerd up"]
ROWS: dict[str, list[list]] = {k: [] for k in TABLE}


def _bmv2_missing() -> str | None:
    from concast.controller.p4.switch import tools_missing
    return tools_missing()


@pytest.fixture(scope="module", params=["ovs", "linux", "bmv2"])
def net(request, tmp_path_factory):
    dataplane = request.param
    why = missing_builds() or (None if FLOOD.exists() else
                               f"{FLOOD} is not built (cargo build --release)")
    if not why and dataplane == "bmv2":
        why = _bmv2_missing()
    if why:
        pytest.skip(why)
    n = tree(levels=2, fanout=2, senders=8, dataplane=dataplane).start(
        run_dir=tmp_path_factory.mktemp(f"flood-{dataplane}"))
    try:
        n.start_concast(hold=float(HOLD), hostd_args=["--join-retry-ms", "300"])
        yield n
    finally:
        n.stop()
    if ROWS[dataplane]:
        write_table(TABLE[dataplane], HEADER + {
            "linux": ["lost where (r2's kernel counters); fragments at rx"],
            "bmv2": ["the flood's books at r2's intake (kernel rx of s5's port against the "
                     "frames the P4 parser saw)"]}.get(dataplane, []),
                    ROWS[dataplane])


# --- what each data plane counts -------------------------------------------------------

def ovs_view(net) -> dict:
    """r2's bridge as `concast router stats` shows it: port counters and `not_forwarded`."""
    counters = router(net, "r2")["counters"]
    bridge = portstats.bridge_of(net.routerd_socket("r2"))
    return {"counters": counters, "dp": portstats.dataplane_stats(bridge, counters)}


def _ns_text(net, netns: str, argv: list[str]) -> str:
    return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True,
                          text=True, timeout=30, check=True).stdout


def snmp_ip(text: str) -> dict[str, int]:
    """The `Ip:` lines of /proc/net/snmp as {field: value}."""
    rows = [line.split()[1:] for line in text.splitlines() if line.startswith("Ip:")]
    return {k: int(v) for k, v in zip(rows[0], rows[1])} if len(rows) == 2 else {}


def tc_action_drops(net, r: str) -> int:
    """Frames the diversion rules matched but could not redirect (mirred's drops)."""
    lr = net[r]
    out = subprocess.run(["tc", "-n", lr.netns, "-s", "-j", "filter", "show", "block", "1"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    drops = 0
    for f in json.loads(out or "[]"):
        for a in (f.get("options") or {}).get("actions") or []:
            drops += a.get("stats", {}).get("drops", 0)
    return drops


def host_iface_stats(net, host: str) -> dict[str, int]:
    iface = net.iface(host)
    out = net[host].cmd(f"cat /sys/class/net/{iface}/statistics/{{tx,rx}}_{{packets,dropped}}")
    tx_p, tx_d, rx_p, rx_d = (int(x) for x in out.split())
    return {"tx_pkts": tx_p, "tx_drop": tx_d, "rx_pkts": rx_p, "rx_drop": rx_d}


def linux_view(net) -> dict:
    """r2's namespace: routerd's counters, its ports' and CPU port's kernel counters, the
    diversion rules' drops and the IP statistics; s5's interface (the flood's first hop)."""
    lr = net["r2"]
    return {"counters": router(net, "r2")["counters"], "ports": lr.ports(),
            "tc_drops": tc_action_drops(net, "r2"),
            "ip": snmp_ip(_ns_text(net, lr.netns, ["cat", "/proc/net/snmp"])),
            "s5": host_iface_stats(net, "s5"),
            # where the fragments end: rx's reassembly (they never complete)
            "rx_ip": snmp_ip(net["rx"].cmd("cat /proc/net/snmp"))}


def bmv2_view(net) -> dict:
    """r2's switch: its interfaces' kernel counters keyed like OVS ports, `not_forwarded`
    as on OVS (frames its ports received that it sent out of none), the P4 counters (the
    Concast ID option errors are counted there: the parser drops them, routerd never sees
    them) and the intake by port (`Bmv2Router.intake`: kernel rx against the frames the P4
    parser handed to ingress; the difference is what simple_switch lost at its intake)."""
    r = net["r2"]
    intake = r.intake(net.tag)
    egress = r.egress(net.tag)
    ports = r.port_counters(net.tag)
    rx = sum(p["rx_pkts"] for p in ports.values())
    tx = sum(p["tx_pkts"] for p in ports.values())
    # the good traffic also crosses r1 and r3: their switches' silent losses, for its books
    good = {name: (net[name].intake(net.tag), net[name].egress(net.tag)) for name in ("r1", "r3")}
    return {"counters": router(net, "r2")["counters"], "p4": r.counters(), "intake": intake,
            "egress": egress, "good_paths": good, "dp": {"ports": ports, "not_forwarded": max(0, rx - tx)}}


def good_traffic_losses(net, v0: dict, v1: dict, where: dict) -> int:
    """Frames the BMv2 switches lost silently, counted, on the good traffic's paths: every
    intake and egress loss at r1 and r3, and r2's except at the flood's own port."""
    flood_port = f"intake port {net.plan.hosts['s5'].ofport}"
    n = sum(v for k, v in where.items() if k != flood_port)
    for name in ("r1", "r3"):
        (i0, e0), (i1, e1) = v0["good_paths"][name], v1["good_paths"][name]
        n += sum(i1[p]["intake_lost"] - i0[p]["intake_lost"] for p in i1 if p in i0)
        n += sum(e1[side]["egress_lost"] - e0[side]["egress_lost"] for side in e1)
    return n


def intake_delta(v0: dict, v1: dict) -> dict[str, dict]:
    """Per port, kernel rx, parsed and intake_lost between two BMv2 views."""
    return {p: {k: v1["intake"][p][k] - v0["intake"][p].get(k, 0) for k in v1["intake"][p]}
            for p in v1["intake"] if p in v0["intake"]}


VIEWS = {"ovs": ovs_view, "linux": linux_view, "bmv2": bmv2_view}


def r2_view(net) -> dict:
    return VIEWS[net.dataplane_name](net)


def losses(net, v0: dict, v1: dict) -> tuple[int, dict]:
    """(frames lost in the data plane before routerd, by where) between two views."""
    if net.dataplane_name == "bmv2":
        # What simple_switch lost at its intake, counted per port (kernel rx - parsed).
        lost = {f"intake port {p}": d["intake_lost"] for p, d in intake_delta(v0, v1).items()
                if d["intake_lost"]}
        # ... and at its egress queues (the program sent it, the kernel never saw it leave)
        for side in ("cpu", "ports"):
            n = v1["egress"][side]["egress_lost"] - v0["egress"][side]["egress_lost"]
            if n:
                lost[f"egress {side}"] = n
        return sum(lost.values()), lost
    if net.dataplane_name != "linux":
        return v1["dp"]["not_forwarded"] - v0["dp"]["not_forwarded"], {}
    cpu = str(CPU_OFPORT)
    p0, p1 = v0["ports"], v1["ports"]
    where = {
        # s5's veth could not hand the frame to r2's port (its backlog was full).
        "s5 veth tx_dropped": v1["s5"]["tx_drop"] - v0["s5"]["tx_drop"],
        "r2 ports rx_dropped": sum(p1[p]["rx_drop"] - p0[p]["rx_drop"] for p in p1 if p != cpu),
        "tc mirred drops": v1["tc_drops"] - v0["tc_drops"],
        "CPU port veth drops": (p1[cpu]["tx_drop"] - p0[cpu]["tx_drop"]
                                + p1[cpu]["rx_drop"] - p0[cpu]["rx_drop"]),
        **{f"r2 IP {k}": v1["ip"].get(k, 0) - v0["ip"].get(k, 0) for k in KERNEL_IP_DROPS},
    }
    return sum(where.values()), {k: n for k, n in where.items() if n}


def flood(net, group: int, seconds: float, rate: int) -> dict:
    h = net.plan.hosts["s5"]
    argv = [str(FLOOD), "--iface", net.iface("s5"), "--dst-mac", h.gateway_mac,
            "--src", str(h.ip), "--dst", net.ip("rx"), "--mplex-dst", net.ip("r2"),
            "--dport", str(5000 + group), "--group", str(group), "--duration", str(seconds),
            "--rate", str(rate)]
    out = net["s5"].cmd(" ".join(argv))
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("rate", [0, 2000], ids=["full-speed", "paced"])
def test_a_malformed_flood_leaves_good_traffic_exact_and_is_accounted_for(net, rate):
    dp = net.dataplane_name
    group = 80 if rate == 0 else 82
    tally = Tally(net, group, tolerant("sum"), port=5000 + group)
    feeder = None
    server = net["rx"].popen([PYTHON, str(HOSTTCP), "serve", "7001"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        feeder = RoundFeeder(net, FOUR, group, 5000 + group, base=1000)
        wait_for(lambda: merged_count(net, "r2", group) > 0, 15, "r2 is not merging")
        v0 = r2_view(net)
        t0 = time.monotonic()
        tcp = net["s7"].popen([PYTHON, str(HOSTTCP), "send", net.ip("rx"), "7001",
                               str(TCP_BYTES)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        sent = flood(net, group, 3.0, rate)
        t1 = time.monotonic()
        sent_tcp, _ = tcp.communicate(timeout=120)
        got_tcp, _ = server.communicate(timeout=60)
        time.sleep(0.5)
        alive = routerd_answers(net, "r2")
        v1 = r2_view(net)
        feeder.finish()
        rounds = feeder.rounds()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            sums, counts = tally.wait_total({k: n for _, k, n, _ in rounds}, timeout=0.5, settle=0)
            if all(counts.get(k, 0) >= n for _, k, n, _ in rounds):
                break
        time.sleep(0.5)
        sums, counts = tally.wait_total({}, timeout=0, settle=0)
    finally:
        if feeder is not None:
            feeder.kill()
        tally.close()
        if server.poll() is None:
            server.kill()
            server.wait()
    c0, c1 = v0["counters"], v1["counters"]
    j = judge_rounds(rounds, sums, counts, (t0 - IN_FLIGHT, t1))
    counted = {k: c1["malformed"].get(n, 0) - c0["malformed"].get(n, 0) for k, n in NAMES.items()}
    if dp == "bmv2":
        # The P4 parser drops a bad Concast ID option and counts it by kind (malformed).
        counted["option"] = (v1["p4"]["malformed"][NAMES["option"]]
                             - v0["p4"]["malformed"][NAMES["option"]])
    if dp in ("linux", "bmv2"):
        # tc (P4: concast_flows, the option is in a first fragment) diverts first fragments of the flow (their port is there) and routerd passes
        # them on unmerged (protocol.md 1.2): counted, not malformed.
        counted["fragment"] = c1["fragments_passed"] - c0["fragments_passed"]
    malformed_sent = sum(sent["sent"][k] for k in counted)
    dp_lost, where = losses(net, v0, v1)
    sock_lost = c1["cpu_port_kernel_drops"] - c0["cpu_port_kernel_drops"]
    whole = j["before_whole"] + j["after_whole"] + j["during_whole"]
    tcp_ok = sent_tcp.split() == got_tcp.split() and sent_tcp.split()[:1] == [str(TCP_BYTES)]
    books = None
    if dp == "bmv2":
        # The flood's own port: every frame s5 sent was parsed or lost at the intake there.
        s5 = intake_delta(v0, v1)[str(net.plan.hosts["s5"].ofport)]
        books = {"sent": sent["total"], "kernel_rx": s5["kernel_rx"], "parsed": s5["parsed"],
                 "intake_lost": s5["intake_lost"], "counted": sum(counted.values()),
                 "cpu_egress_lost": where.get("egress cpu", 0),
                 "good_lost": good_traffic_losses(net, v0, v1, where)}
    ROWS[dp].append([("full speed" if rate == 0 else f"paced at {rate}/s") + ", 3 s: "
                     + ", ".join(f"{k} {n}" for k, n in sent["sent"].items()),
                     sent["total"], f"{sent['rate_pps']:.0f}",
                     ", ".join(f"{k} {n}" for k, n in counted.items()),
                     dp_lost, sock_lost, f"{whole} of {len(rounds)}",
                     f"{j['lost_contributions']} of {j['sent_contributions']}",
                     "yes" if tcp_ok else "NO", "yes" if alive else "NO"]
                    + ([(", ".join(f"{k} {n}" for k, n in where.items()) or "none")
                        + "; rx reassembly: " + ", ".join(
                            f"{k} {v1['rx_ip'].get(k, 0) - v0['rx_ip'].get(k, 0)}"
                            for k in ("ReasmReqds", "ReasmFails", "ReasmTimeout"))]
                       if dp == "linux" else [])
                    + ([f"s5's port: kernel rx {books['kernel_rx']}, parsed {books['parsed']}, "
                        f"lost at the intake {books['intake_lost']}; counted + intake loss = "
                        f"{books['counted'] + books['intake_lost']} of {books['sent']} sent"
                        f" (+ {books['cpu_egress_lost']} lost at the CPU port's egress queue); "
                        f"good traffic's path lost {books['good_lost']} silently, counted; "
                        "lost by where: " + (", ".join(f"{k} {n}" for k, n in where.items())
                                             or "none")]
                       if dp == "bmv2" else []))

    assert alive, "routerd on r2 stopped answering"
    assert tcp_ok, f"TCP: sent {sent_tcp!r}, received {got_tcp!r}"
    assert j["duplicated"] == 0, f"a good round arrived twice: {j}"
    if dp == "bmv2":
        # simple_switch, CPU-bound, also loses good frames at its intake and egress queues,
        # silently but now counted: every good contribution lost (before, during or after
        # the flood) must be within what the switches on its path counted as lost.
        good_lost = good_traffic_losses(net, v0, v1, where)
        assert j["lost_contributions"] <= good_lost, (j, good_lost, where)
        assert j["lost_contributions"] <= 0.25 * j["sent_contributions"], j
    else:
        assert j["before_whole"] + j["after_whole"] == j["sent_rounds_outside"], j
        # Full speed: a saturated data plane also drops some of the good frames (OVS: 0-2 %
        # in the runs so far; the bound leaves room for a busier machine); a short round's
        # count tells R what is missing. Paced: nothing may be lost.
        assert j["lost_contributions"] <= (0.25 * j["sent_contributions"] if rate == 0 else 0), j
    # Everything the data plane put out of the CPU port reached routerd or is counted at
    # its socket (up to the few good frames that pass while the two are read, ms apart).
    cpu = str(CPU_OFPORT)
    ports0 = v0["dp"]["ports"] if "dp" in v0 else v0["ports"]
    ports1 = v1["dp"]["ports"] if "dp" in v1 else v1["ports"]
    diverted = ports1[cpu]["tx_pkts"] - ports0[cpu]["tx_pkts"]
    assert abs(diverted - (c1["frames_in"] - c0["frames_in"]) - sock_lost) <= 20, (diverted, c0, c1)
    for k, n in counted.items():
        assert 0 < n <= sent["sent"][k], f"{k}: routerd counted {n} of {sent['sent'][k]}"
    # Nothing vanishes unreported: every malformed frame is counted by routerd or lost
    # where a counter says so (other traffic's losses can only add to the right side).
    assert sum(counted.values()) + dp_lost + sock_lost >= malformed_sent, \
        (counted, dp_lost, where, sock_lost, sent)
    # Every frame sent reached the data plane's ports (on Linux: or s5's veth counted it
    # as dropped, its peer's backlog being full).
    port_rx = sum(p["rx_pkts"] for p in ports1.values()) - \
        sum(p["rx_pkts"] for p in ports0.values())
    assert port_rx + where.get("s5 veth tx_dropped", 0) >= sent["total"], (port_rx, sent)
    if books is not None:
        # BMv2's books, exact up to routerd's socket drops: s5's port received every frame
        # s5 sent (s5 has static ARP and sends nothing else), and each was either lost at the
        # switch's intake (kernel rx - parsed) or parsed and counted by kind (P4 or routerd),
        # up to what the CPU port's egress queue or routerd's socket lost (good frames too).
        assert books["kernel_rx"] >= books["sent"], books
        assert books["kernel_rx"] - books["sent"] <= 20, books
        assert books["counted"] <= books["parsed"] <= (books["counted"] + sock_lost
                                                       + books["cpu_egress_lost"] + 20), books
    if rate:
        every = {k: sent["sent"][k] for k in counted}
        if dp == "bmv2" and counted != every:
            # simple_switch is CPU-bound beside the TCP stream and loses 14-47 % of every kind
            # alike at its intake (docs/dataplane-bmv2.md), now counted: the books above
            # (counted + intake loss = sent) hold; only this one is excused, and only on BMv2.
            pytest.xfail(f"BMv2 paced flood: counted {counted} of {every} (#28)")
        assert counted == every, "paced: routerd counted every one"


def test_router_stats_show_the_data_planes_own_counters(net):
    """`concast router stats` on an OVS router carries the bridge's port counters."""
    if net.dataplane_name != "ovs":
        pytest.skip("`concast router stats` shows OVS bridges' port counters only; the Linux "
                    "router's counters are read from its namespace above")
    r = subprocess.run([PYTHON, "-m", "concast.cli", "router", "stats", "r2", "--run", net.tag],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=30)
    assert r.returncode == 0, r.stderr
    reply = json.loads(r.stdout)
    dp = reply["dataplane"]
    assert dp["bridge"] == portstats.bridge_of(net.routerd_socket("r2"))
    cpu = dp["ports"][str(CPU_OFPORT)]
    assert cpu["tx_pkts"] > 0, "OVS diverted frames to routerd"
    assert dp["rx_pkts"] == sum(p["rx_pkts"] for p in dp["ports"].values())
    assert dp["not_forwarded"] >= 0 and "cpu_port_kernel_drops" in reply["counters"]
