"""The multiplex service through a fault (#15 item 3, docs/reliability.md): `concast exp
mplex`'s dumbbell (eight clients download 12 MB each from sv with their ACKs multiplexed),
and in the middle of the downloads r1's routerd is killed with SIGKILL, bypassed by the
control plane, and restarted. Every ACK a client's kernel sent is matched against sv's captures:
none may reach sv's TCP twice or unsent, every download must be intact (TCP recovers
what was lost), and what was lost is counted and explained.

On every data plane this machine has (OVS, Linux, BMv2; BMv2 skips without p4c-bm2-ss and
simple_switch_grpc on PATH); each bypasses in its own way (`disable_diversion`: OVS flows,
tc rules, or the P4 divert entries deleted over P4Runtime).

Writes its row to results/reliability/faults-mplex.md (-linux, -bmv2).
"""
from __future__ import annotations

import dataclasses
import threading
import time

import pytest
from hostdtools import HOLD, kill, wait_for
from reliability import routerd_answers, write_table

from concast.controller import routerdmgmt as routerd
from concast.topologies.experiments import mplex

pytestmark = pytest.mark.mininet
SETTINGS = mplex.Settings(clients=8, size=12_000_000, max_local_delay_ms=2.0,
                          max_total_delay_ms=10.0)


def r1_merged_in(net) -> int:
    return int(routerd.query(net.routerd_socket("r1"), "stats")["counters"]["merged_in"])


TABLE = {"ovs": "faults-mplex", "linux": "faults-mplex-linux", "bmv2": "faults-mplex-bmv2"}


@pytest.mark.parametrize("dataplane", list(TABLE))
def test_acks_through_a_routerd_killed_mid_download_arrive_at_most_once(tmp_path, dataplane):
    why = mplex.missing_prerequisites()
    if not why and dataplane == "bmv2":
        from concast.controller.p4.switch import tools_missing
        why = tools_missing()
    if why:
        pytest.skip(why)
    if dataplane == "bmv2":
        from bmv2tools import ensure_p4_build
        ensure_p4_build()
    tb = mplex.Testbed(dataclasses.replace(SETTINGS, dataplane=dataplane), run_dir=tmp_path / "run")
    fault: dict = {}

    def crash_r1() -> None:
        """Once r1 bundles ACKs: kill -9, bypass (the control plane's part), restart."""
        net = tb.net
        try:
            wait_for(lambda: r1_merged_in(net) > 200, 60, "r1 never bundled")
            daemon = next(d for d in net.daemons.running if d.router == "r1" and d.name == "routerd")
            fault["merged_before"] = r1_merged_in(net)
            t0 = time.monotonic()
            kill(daemon)
            net.daemons.running.remove(daemon)
            wait_for(lambda: not routerd_answers(net, "r1"), 5, "r1's routerd still answers")
            t_seen = time.monotonic()
            net["r1"].disable_diversion()
            fault["bypass_s"] = time.monotonic() - t0
            fault["removal_s"] = time.monotonic() - t_seen
            time.sleep(0.5)
            net.start_concast(hold=float(HOLD), routers=["r1"], hosts=(), timeout=10)
            net["r1"].enable_diversion()
            t1 = time.monotonic()
            # It bundles again once a REFRESH rebuilds the flow, if the downloads last.
            deadline = t1 + 30
            while time.monotonic() < deadline and r1_merged_in(net) == 0:
                time.sleep(0.05)
            fault["resumed_s"] = time.monotonic() - t1 if r1_merged_in(net) else None
        except Exception as e:          # reported by the main thread
            fault["error"] = repr(e)

    try:
        tb.start()
        crasher = threading.Thread(target=crash_r1, daemon=True)
        crasher.start()
        phase = tb.run_phase("on", tb.net.run_dir / "pcap" / "mplex-crash")
        crasher.join(timeout=60)
    finally:
        tb.stop()
    assert "error" not in fault and "resumed_s" in fault, fault
    acc = phase.accounting
    write_table(TABLE[dataplane], [
        "fault (mid-download)", "ACKs sent", "reached sv's TCP", "twice or unsent",
        "lost in the network", "downloads intact", "bypassed after", "bundling resumed after"],
        [["routerd on r1: kill -9, bypass, restart", acc["sent"], acc["arrived"], acc["extra"],
          acc["lost_in_network"], f"{phase.intact} of {len(phase.downloads)}",
          f"{fault['bypass_s']:.2f} s (removal {fault['removal_s'] * 1000:.0f} ms)",
          "not before the downloads ended" if fault["resumed_s"] is None
          else f"{fault['resumed_s']:.2f} s after the restart"]],
        note="Lost in the network: ACKs diverted to r1's CPU port between the kill and the "
             "bypass, which no routerd read, and those r1 held in open bundles when it died; "
             "TCP needs none of them back (a later cumulative ACK covers each).")
    assert not phase.capture_drops, f"tcpdump lost packets: {phase.capture_drops}"
    assert phase.intact == len(phase.downloads), "every download intact"
    assert acc["extra"] == 0, f"an ACK reached sv twice or without being sent: {acc['extra_keys']}"
    assert acc["lost_at_sv"] == phase.expired(), acc
    assert acc["sent"] > 0 and acc["arrived"] + acc["missing"] == acc["sent"], acc
