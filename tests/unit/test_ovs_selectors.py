"""The OVS selector rule has one owner, routerd's dataplane.rs (docs/dataplane-ovs.md, "Flow
selectors"): controller/ovs/selectors.py must write the very same add-flow and del-flows
arguments. Both are built here from the same selectors and compared; routerd prints its side
with `--print-selector`."""
from __future__ import annotations

import json
import subprocess

import pytest

from concast import tools
from concast.controller.ovs import selectors as sel

# (R, PROTO, DPORT): UDP and TCP with and without a port, any protocol, CSP's and MplexPkt's
# protocols, the highest values each field takes.
FLOWS = [
    ("10.1.1.2", 17, 5000),
    ("10.1.1.2", 17, 0),
    ("10.1.1.2", 6, 80),
    ("192.168.200.7", 6, 0),
    ("10.1.1.2", 0, 0),
    ("10.0.0.9", 254, 0),
    ("10.0.0.9", 253, 0),
    ("255.255.255.255", 255, 0),
    ("1.2.3.4", 17, 65535),
]


def routerd(*args: str) -> dict:
    try:
        exe = tools.rust_binary("concast-routerd")
    except tools.MissingTool as e:
        pytest.skip(f"concast-routerd is not built ({e}); run `make build`")
    r = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("cpu_ofport", [1000, 7])
def test_python_writes_the_rules_routerd_writes(cpu_ofport):
    argv = [f"--print-selector={r},{p},{d}" for r, p, d in FLOWS]
    out = routerd(*argv, f"--cpu-ofport={cpu_ofport}")
    assert len(out["selectors"]) == len(FLOWS)
    for (r, p, d), rust in zip(FLOWS, out["selectors"]):
        py = sel.Selector(r, p, d)
        assert (rust["receiver"], rust["proto"], rust["dport"]) == (r, p, d)
        assert rust["cookie"] == py.cookie
        assert sel.Selector.from_cookie(rust["cookie"]) == py
        assert rust["add_flow"] == py.flow(cpu_ofport)
        assert py.install_argv("br0", cpu_ofport)[-1] == rust["add_flow"]
        assert py.remove_argv("br0")[-1] == rust["del_flows"]
    assert sel.remove_all_argv("br0")[-1] == out["del_all"]


def test_a_port_without_udp_or_tcp_means_nothing_on_both_sides():
    # routerd leaves the port out of match and cookie; Python refuses to build such a selector.
    out = routerd("--print-selector=10.0.0.9,254,9", "--cpu-ofport=1000")
    assert out["selectors"][0]["add_flow"] == sel.Selector("10.0.0.9", 254, 0).flow(1000)
    with pytest.raises(ValueError):
        sel.Selector("10.0.0.9", 254, 9)


def test_a_bad_selector_is_a_clear_error():
    exe = tools.binary_or_build_path("concast-routerd")
    if not exe.exists():
        pytest.skip("concast-routerd is not built; run `make build`")
    r = subprocess.run([str(exe), "--print-selector=10.0.0.9,udp,1"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "protocol must be 0..255" in r.stderr and "Traceback" not in r.stderr
