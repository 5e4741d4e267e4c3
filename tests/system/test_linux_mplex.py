"""The multiplex service end to end on the Linux data plane: test_mplex.py's bodies on
dumbbell(clients=8) whose routers are network namespaces forwarding in the kernel, routerd
diverting by tc. The downloads run once (module fixture); the tests read the results."""
from __future__ import annotations

import dataclasses
import importlib

import pytest

from concast.topologies.experiments import mplex

pytestmark = pytest.mark.mininet


def bodies():
    """test_mplex.py, imported when a test runs (not at collection: pytest would collect it
    a second time, with its own Open vSwitch fixture)."""
    return importlib.import_module("test_mplex")


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    why = mplex.missing_prerequisites()
    if why:
        pytest.skip(why)
    body = bodies()
    settings = dataclasses.replace(body.SETTINGS, dataplane="linux")
    tb = mplex.Testbed(settings, run_dir=tmp_path_factory.mktemp("linux-mplex"))
    try:
        tb.start()
        tb.cli_receiver = body.cli(tb.net["sv"], "mplex", "on", "--role", "receiver")
        tb.cli_sender = body.cli(tb.net["c1"], "mplex", "on", "--role", "sender", "--to", tb.sv,
                                 "--max-local-delay", "2", "--max-total-delay", "10")
        tb.cli_status = body.cli(tb.net["c1"], "mplex", "status", "--json")
        tb.phase = tb.run_phase("on", tb.net.run_dir / "pcap" / "mplex-on")
        yield tb
    finally:
        tb.stop()


def test_linux_routers_are_namespaces(bed):
    assert bed.net.dataplane_name == "linux"
    assert all(r.netns for r in bed.net.routers.values())


def test_linux_the_command_line_turns_multiplexing_on(bed):
    bodies().test_the_command_line_turns_multiplexing_on(bed)


def test_linux_every_download_is_intact(bed):
    bodies().test_every_download_is_intact(bed)


def test_linux_routers_combine_acks_of_several_clients(bed):
    bodies().test_routers_combine_acks_of_several_clients(bed)


def test_linux_every_ack_reaches_the_servers_tcp_exactly_once(bed):
    bodies().test_every_ack_reaches_the_servers_tcp_exactly_once(bed)


def test_linux_counters_add_up(bed):
    bodies().test_counters_add_up(bed)


def test_linux_turning_off_leaves_no_rule_and_no_device(bed):
    bodies().test_turning_off_leaves_no_rule_and_no_device(bed)
