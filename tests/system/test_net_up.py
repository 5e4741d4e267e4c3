"""`concast net up` end to end: a small transit-stub network with routerd and hostd, a
shell script in every client that pings the server, then a saved copy of the same
network brought up again with a Python script."""
from __future__ import annotations

import json
import subprocess

import pytest

from hostdtools import missing_builds      # tests/system is on sys.path (its conftest)

from concast import ROOT

pytestmark = pytest.mark.mininet
CONCAST = [str(ROOT / ".venv" / "bin" / "python"), "-m", "concast.cli", "net", "up"]
SMALL = ["transit-stub", "--seed", "4", "--stubs-per-transit", "1", "--transit-nodes", "2",
         "--stub-nodes", "3", "--clients", "4", "--core", "", "--edge", ""]


def run(args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([*CONCAST, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(ROOT))


@pytest.fixture(autouse=True)
def built():
    why = missing_builds()
    if why:
        pytest.skip(why)


def test_shell_script_pings_server_from_every_client(tmp_path):
    script = tmp_path / "ping.sh"
    script.write_text('ping -n -c 2 -W 3 "$CONCAST_IP_SV" >/dev/null && '
                      'echo "reached sv from $CONCAST_ADDR"\n')
    saved = tmp_path / "ts.json"
    p = run([*SMALL, "--script", str(script), "--script-hosts", "c1,c2,c3,c4",
             "--write-json", str(saved)])
    assert p.returncode == 0, p.stdout + p.stderr
    for c in ("c1", "c2", "c3", "c4"):
        assert f"{c}: reached sv from 10." in p.stdout, p.stdout
    assert "routerd on 8 routers, hostd on 5 hosts" in p.stdout
    assert "stopped" in p.stdout
    data = json.loads(saved.read_text())
    assert data["generator"]["name"] == "transit-stub" and len(data["routers"]) == 8


def test_failing_script_sets_exit_status(tmp_path):
    script = tmp_path / "fail.sh"
    script.write_text('[ "$CONCAST_HOST" != c2 ]\n')
    p = run([*SMALL, "--no-daemons", "--script", str(script), "--script-hosts", "c1,c2,c3"])
    assert p.returncode == 1, p.stdout + p.stderr
    assert "c2: exit status 1" in p.stdout


def test_saved_network_with_python_script(tmp_path):
    saved = tmp_path / "ts.json"
    assert run([*SMALL, "--dry-run", "--write-json", str(saved)]).returncode == 0
    script = tmp_path / "check.py"
    out = tmp_path / "result.json"
    # The script sees the RunningNet: pings, plus hostd answering on every host.
    script.write_text(
        "import json, sys\n"
        "from concast.hosts.client import Client\n"
        "ok = {c: net.ping(c, 'sv', timeout=3).ok for c in net.plan.hosts if c != 'sv'}\n"
        "status = {h: bool(Client(net.hostd_socket(h)).status()) for h in net.plan.hosts}\n"
        "open(args[0], 'w').write(json.dumps({'ping': ok, 'hostd': status}))\n"
        "sys.exit(0 if all(ok.values()) else 3)\n")
    p = run([saved.as_posix(), "--script", str(script), "--script-args", str(out)])
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads(out.read_text())
    assert sorted(result["ping"]) == ["c1", "c2", "c3", "c4"]
    assert all(result["ping"].values()) and all(result["hostd"].values())
