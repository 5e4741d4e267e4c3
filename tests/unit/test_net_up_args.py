"""`concast net up` without starting anything: options to networks, --dry-run --write-json."""
from __future__ import annotations

import argparse

import pytest

from concast.topologies import ConcastNet, up


def built(*argv: str) -> ConcastNet:
    return up.build(up.parser().parse_args(list(argv)))


def test_link_params():
    assert up.link_params("delay=10ms,bw=100,max_queue_size=20,loss=0.5") == \
        {"delay": "10ms", "bw": 100, "max_queue_size": 20, "loss": 0.5}
    assert up.link_params("") == {}
    for bad in ("delay", "jitter=1ms"):
        with pytest.raises(argparse.ArgumentTypeError):
            up.link_params(bad)


@pytest.mark.parametrize("argv, routers, hosts", [
    (["dumbbell", "--clients", "3"], 2, 4),
    (["tree", "--levels", "3", "--senders", "4"], 7, 5),
    (["line", "--routers", "4", "--senders", "1"], 4, 2),
    (["star"], 1, 5),
    (["mixed"], 7, 9),
    (["transit-stub"], 220, 201),
    (["transit-stub", "--stubs-per-transit", "1", "--transit-nodes", "2", "--stub-nodes", "3",
      "--clients", "4"], 8, 5),
])
def test_shapes(argv, routers, hosts):
    net = built(*argv)
    assert (len(net.topo.routers), len(net.topo.hosts)) == (routers, hosts)
    assert net.generator["name"] == argv[0]


def test_transit_stub_options_reach_the_generator():
    net = built("transit-stub", "--seed", "9", "--core", "bw=50", "--edge", "", "--oblivious",
                "--placement", "random", "--clients", "7")
    assert net.generator["seed"] == 9
    assert net.generator["params"]["placement"] == "random"
    for ln, kind in zip(net.topo.links, net.meta["link_classes"]):
        assert ln.params == ({} if kind == "stub" else {"bw": 50})
    assert not any(r.capable for r in net.topo.routers.values())


def test_dry_run_saves_and_loads_back(tmp_path, capsys):
    path = tmp_path / "ts.json"
    assert up.main(["transit-stub", "--seed", "2", "--dry-run", "--write-json", str(path)]) == 0
    assert "220 routers" in capsys.readouterr().out
    assert up.main([str(path), "--dry-run"]) == 0
    assert ConcastNet.load(path).plan() == built("transit-stub", "--seed", "2").plan()


def test_bad_topology_and_limits(tmp_path, capsys):
    assert up.main(["nowhere.json", "--dry-run"]) == 2
    assert "neither a shape" in capsys.readouterr().err
    assert up.main(["transit-stub", "--stub-nodes", "30", "--dry-run"]) == 2
    assert "at most 254 routers" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert up.main([str(bad), "--dry-run"]) == 2
    assert "not a saved concast network" in capsys.readouterr().err


def test_the_dataplane_defaults_to_linux_and_a_saved_network_keeps_its_own(tmp_path):
    assert built("tree").dataplane == "linux"
    path = tmp_path / "ovs.json"
    assert up.main(["line", "--dataplane", "ovs", "--dry-run", "--write-json", str(path)]) == 0
    assert built(str(path)).dataplane == "ovs"
    assert built(str(path), "--dataplane", "linux").dataplane == "linux"
