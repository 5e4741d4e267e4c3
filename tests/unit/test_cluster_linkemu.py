"""Link emulation and the ACK study's host actions over servers, without starting anything
(topologies/cluster/linkemu.py, ackstudy/hostactions.py, --servers on the command lines)."""
from __future__ import annotations

import pytest

from concast.topologies import up
from concast.topologies.cluster.linkemu import EmulatorSet
from concast.topologies.experiments.ackstudy import hostactions, settings
from concast.topologies.workload.tcpsettings import TcpSettings


class FakeEmu:
    def __init__(self, reply):
        self.reply, self.calls = reply, []

    def call(self, cmd, **fields):
        self.calls.append((cmd, fields))
        return self.reply


def end(name):
    return {"name": name, "netns": 1, "mac": None}


def test_a_link_between_servers_is_merged_from_its_two_halves():
    a = FakeEmu({"ok": True, "late_p99_us": 40, "links": [
        {"id": "h1-eth0:ccabr1-1", "a": end("h1-eth0"), "b": end("ccabr1-1"),
         "ab": {"frames_in": 5}, "ba": {"frames_in": 6}},
        {"id": "ccabr1-2:ccabr2-2", "a": end("ccabr1-2"), "b": end("ccabt4200"),
         "ab": {"frames_in": 7, "slot": 2}, "ba": {"frames_in": 9}}]})
    b = FakeEmu({"ok": True, "late_p99_us": 90, "links": [
        {"id": "ccabr1-2:ccabr2-2", "a": end("ccabr2-2"), "b": end("ccabt4200"),
         "ab": {"frames_in": 9, "slot": 0}, "ba": {"frames_in": 7}}]})
    emus = EmulatorSet({"a": a, "b": b})
    emus.halves["ccabr1-2:ccabr2-2"] = ("a", "b")
    emus.where["h1-eth0:ccabr1-1"] = "a"
    st = emus.call("stats", reset_lateness=True)
    assert all(e.calls == [("stats", {"reset_lateness": True})] for e in (a, b))
    assert st["late_p99_us"] == 90                      # the worst server's
    links = {ln["id"]: ln for ln in st["links"]}
    assert len(links) == 2                              # the crossing link once
    cross = links["ccabr1-2:ccabr2-2"]
    # Each direction from the server that sends it (its pass-through half left out).
    assert cross["ab"] == {"frames_in": 7, "slot": 2} and cross["ba"] == {"frames_in": 9, "slot": 0}
    assert (cross["a"]["name"], cross["b"]["name"]) == ("ccabr1-2", "ccabr2-2")
    assert cross["servers"] == ["a", "b"]
    emus.call("set", id="h1-eth0:ccabr1-1", params={"delay": "5ms"})
    assert a.calls[-1][0] == "set" and len(b.calls) == 1
    with pytest.raises(RuntimeError, match="across servers"):
        emus.call("down")


def test_cross_traffic_summaries_of_the_servers_are_merged():
    merged = hostactions._merge([{"flows": {"0": {"sent": 3}}, "cpu_s": 0.5}, None,
                                 {"flows": {"1": {"sent": 4}}, "cpu_s": 0.25}])
    assert merged == {"flows": {"0": {"sent": 3}, "1": {"sent": 4}}, "cpu_s": 0.75}
    assert hostactions._merge([None]) is None


def test_tcp_settings_travel_as_arguments():
    args = hostactions._tcp_args(TcpSettings(cc="reno", advmss=1000, quickack=True))
    assert args == ["--cc", "reno", "--advmss", "1000", "--quickack", "1"]
    assert hostactions._tcp_args(TcpSettings()) == []


def test_the_actions_follow_the_network():
    class Local:
        pass

    class Cluster:
        servers, placement, tag = object(), {}, "ab"
    assert isinstance(hostactions.for_net(Local()), hostactions.LocalActions)
    assert isinstance(hostactions.for_net(Cluster()), hostactions.ClusterActions)


def parse_study(*argv):
    import argparse
    p = argparse.ArgumentParser()
    settings.add_arguments(p)
    return settings.from_args(p.parse_args(list(argv)))


def test_ack_study_servers_option():
    assert parse_study("--quick", "--servers", "a,b,c").servers == ("a", "b", "c")
    assert parse_study("--quick").servers == ()
    with pytest.raises(SystemExit, match="named twice"):
        parse_study("--servers", "a,a")


def test_net_up_refuses_what_a_cluster_does_not_have():
    def why(*argv, links=None):
        ns = up.parser().parse_args(["line", "--servers", "a,b", *argv])
        desc = up.build(ns)
        if links:           # as asked (build() itself refuses netem on a kernel without it)
            ns.links = links
        return up.cluster_problem(ns, desc)
    assert "netem" in why(links="netem")
    assert "--pcap" in why("--pcap", "all")
    assert why("--links", "linkemu") is None
