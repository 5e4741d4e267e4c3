"""Emulated servers' bookkeeping that needs no root (topologies/cluster/servers.py): which
driver paths the servers cannot see, and when a set's subnet is taken."""
from pathlib import Path

from concast.topologies.cluster import servers


def test_private_paths_are_the_servers_own():
    for p in ("/tmp", "/tmp/clone", "/run/x", "/dev/shm/concast-linkemu-ab"):
        assert servers._private(Path(p)), p
    for p in ("/var/tmp/ccs-cluster", "/work/concast", "/tmpfoo", "/"):
        assert not servers._private(Path(p)), p


def test_default_share_is_the_checkout_only_where_hidden():
    share = servers.default_share()
    assert all(servers._private(p) for p in share) and len(share) <= 1


def test_a_subnet_with_a_driver_address_is_in_use():
    assert servers._in_use("127.0.0")        # lo's 127.0.0.1/8 overlaps 127.0.0.0/24
