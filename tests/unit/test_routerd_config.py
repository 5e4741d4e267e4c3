"""routerd's config: the writer's checker against the one definition (config.schema.json).

routerd's typed reader is held to the same file by controller/routerd/src/config.rs's tests;
here the Python side, and the built binary's copy of the schema.
"""
import json
import subprocess

import pytest

from concast import tools
from concast.controller import routerdconfig as rc

ROUTE = {"prefix": "10.0.2.0/24", "iface": "r1-eth2", "mac": "02:00:00:00:02:01", "link_slot": 4}


def linux_config() -> dict:
    """The shape the Linux data plane writes (topologies/running.py, controller/linux)."""
    return {"router": "r1", "node": "r1", "cpu_iface": "r1-cpu", "cpu_ofport": 1000,
            "addr": "10.0.1.1", "router_mac": "02:00:00:00:01:01", "cpu_mac": "02:00:00:00:01:fe",
            "run_dir": "/tmp/run", "tag": "t", "capable": True, "dataplane": "linux",
            "addresses": ["10.0.1.1", "10.0.2.1"], "netns": "cct-r1", "tc_block": 7,
            "tc_cpu_dev": "r1-cpus", "egress_routes": [ROUTE], "link_state": "/dev/shm/x"}


def test_a_config_as_the_writer_makes_it_passes():
    rc.validate(linux_config())


@pytest.mark.parametrize("change, words", [
    ({"cpu_ifac": "x"}, "unknown key 'cpu_ifac'"),
    ({"tc_block": "7"}, "config.tc_block: '7' is not integer"),
    ({"tc_block": 0}, "below 1"),
    ({"capable": 1}, "is not boolean"),
    ({"dataplane": "tofino"}, "is not one of"),
    ({"addr": "10.0.1"}, "is not a ipv4"),
    ({"router_mac": "02:00:00:00:01"}, "is not a mac"),
    ({"egress_routes": [{**ROUTE, "prefix": "10.0.2.0"}]}, "egress_routes[0].prefix"),
    ({"egress_routes": [{**ROUTE, "nexthop": "x"}]}, "unknown key 'nexthop'"),
    ({"egress_routes": [{"prefix": "10.0.2.0/24", "iface": "e"}]}, "egress_routes[0]: no 'mac'"),
    ({"busy_poll_us": 10001}, "config.busy_poll_us: 10001 is above 10000"),
    ({"busy_poll_us": -1}, "below 0"),
    ({"wait": "spin"}, "config.wait: 'spin' is not one of"),
])
def test_what_routerd_would_refuse_is_refused_naming_the_key(change, words):
    with pytest.raises(rc.ConfigError) as e:
        rc.validate({**linux_config(), **change})
    assert words in str(e.value)


def test_a_missing_required_key_is_named():
    cfg = linux_config()
    del cfg["addr"]
    with pytest.raises(rc.ConfigError, match="no 'addr'"):
        rc.validate(cfg)


def test_write_refuses_before_writing(tmp_path):
    path = tmp_path / "r1.json"
    with pytest.raises(rc.ConfigError):
        rc.write(path, {**linux_config(), "bogus": 1})
    assert not path.exists()
    rc.write(path, {**linux_config(), "cpu_ofport": None})
    assert json.loads(path.read_text()) == {k: v for k, v in linux_config().items()
                                            if k != "cpu_ofport"}, "a None value is left out"


def test_the_built_routerd_carries_the_same_schema():
    try:
        routerd = tools.rust_binary("concast-routerd")
    except tools.MissingTool as e:
        pytest.skip(f"concast-routerd not built: {e}")
    out = subprocess.run([str(routerd), "--print-config-schema"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    assert json.loads(out) == rc.schema(), "routerd was built from another config.schema.json"
