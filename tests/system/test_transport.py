"""The host transport over real UDP between two network namespaces: Reliable FIFO through
nftables random loss, refusal of a composite the server does not serve, and `concast perf`.

Needs root, ip and nft, and the concast-perf binary (cargo build --release).
"""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from concast import perf, tools
from concast.perfpath import B_ADDR, Path


def _why_not() -> str | None:
    return perf.missing(("ip", "nft"))


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


def _server(path: Path, port: int, *args: str) -> subprocess.Popen:
    return path.popen("b", [str(tools.rust_binary("concast-perf")), "server", "--listen", f"0.0.0.0:{port}", *args])


def _client(path: Path, port: int, *args: str) -> subprocess.CompletedProcess:
    p = path.popen("a", [str(tools.rust_binary("concast-perf")), "client", "--to", f"{B_ADDR}:{port}", *args])
    out, err = p.communicate(timeout=180)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _finish(p: subprocess.Popen) -> tuple[str, str]:
    try:
        return p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()


def _exchange(path: Path, port: int, server_args: list[str], client_args: list[str], kill: bool = False):
    """A server, then one client run against it; the client's result and the server's stdout
    (`kill`: stop the server as soon as the client is done, not at its idle end)."""
    srv = _server(path, port, *server_args)
    try:
        time.sleep(0.3)  # let the server bind
        cli = _client(path, port, *client_args)
    finally:
        if kill:
            srv.kill()
        out, _ = _finish(srv)
    return cli, out


def test_reliable_fifo_through_ten_percent_loss_delivers_every_byte_in_order():
    with Path(loss=0.10, tag=f"t{os.getpid()}") as path:
        cli, out = _exchange(path, 15301, ["--composite", "Bulk", "--hash", "--idle", "10"],
                             ["--composite", "Bulk", "--bytes", "3000000", "--size", "20000"])
        assert cli.returncode == 0, cli.stderr
        sent, got = json.loads(cli.stdout), json.loads(out)
        assert sent["closed"] and got["end"] == "peer closed", (sent, got)
        assert got["bytes"] == sent["bytes"] == 3_000_000
        assert got["sha256"] == sent["sha256"]
        # the loss was real and the transport repaired it
        assert path.dropped("b") > 100 and path.dropped("a") > 10
        assert sent["stats"]["retransmits"] > 100


def test_one_process_drives_parallel_flows_through_loss_and_each_delivers_what_it_sent():
    """concast-perf --parallel: one loop, several sessions (ccc2's "CTCP-HS 1p"); each flow is
    its own session at the server and every byte it was given arrives, through 2 % loss."""
    with Path(loss=0.02, tag=f"p{os.getpid()}") as path:
        cli, out = _exchange(path, 15303, ["--composite", "Bulk", "--flows", "3", "--idle", "5"],
                             ["--composite", "Bulk", "--parallel", "3", "--secs", "1.5"])
        assert cli.returncode == 0, cli.stderr
        sent = [json.loads(line) for line in cli.stdout.splitlines()]
        got = [json.loads(line) for line in out.splitlines()]
        assert len(sent) == 3 and all(s["parallel"] == 3 and s["closed"] for s in sent), sent
        assert len({g["peer"] for g in got}) == 3 and all(g["end"] == "peer closed" for g in got), got
        assert sorted(g["bytes"] for g in got) == sorted(s["bytes"] for s in sent), (sent, got)
        assert all(s["bytes"] > 0 and s["stats"]["retransmits"] > 0 for s in sent), sent
        # the process's CPU is shared out, so the flows' lines add up to it once
        assert len({s["cpu_secs"] for s in sent}) == 1


@pytest.mark.parametrize("args, why", [
    (["--parallel", "0"], "--parallel must be between 1 and 256 flows, got 0"),
    (["--parallel", "2", "--proto", "tcp"], "--parallel needs --proto ctp --mode bulk"),
    (["--parallel", "2", "--bytes", "1000"], "--parallel needs --proto ctp --mode bulk"),
])
def test_concast_perf_refuses_parallel_where_it_has_no_meaning(args, why):
    r = subprocess.run([str(tools.rust_binary("concast-perf")), "client", "--to", "127.0.0.1:9", *args],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and why in r.stderr and "panicked" not in r.stderr, r.stderr


def test_a_composite_the_server_does_not_serve_is_refused_with_the_reason():
    with Path(tag=f"r{os.getpid()}") as path:
        cli, _ = _exchange(path, 15302, ["--composite", "Bulk", "--idle", "2"],
                           ["--composite", "LossyFIFO", "--secs", "1"], kill=True)
        assert cli.returncode == 1
        assert "refused: composite mismatch: peer asked for LossyFIFO, this end serves Bulk" in cli.stderr


def test_a_lost_first_echo_costs_the_untimed_warm_up_not_a_timed_round_trip():
    """CTP opens without a handshake, so the server has no RTT sample before its first reply
    and a lost first echo waits the initial RTO of 1 s (RFC 6298 §2.1). concast-perf's ping-pong
    makes one untimed round trip first, as kernel TCP's handshake is untimed; Table II's slow
    runs were this wait (issue #23). The first echo is the first data segment the server sends
    (1 byte of payload: a UDP length of 49), dropped once in the client's namespace."""
    rules = ("add table inet cfirst\n"
             "add chain inet cfirst input { type filter hook input priority 0; policy accept; }\n"
             "add rule inet cfirst input udp sport 15304 udp length 49 numgen inc mod 1000000 == 0 counter drop\n")
    with Path(tag=f"w{os.getpid()}") as path:
        subprocess.run(["ip", "netns", "exec", path.ns["a"], "nft", "-f", "-"], input=rules, text=True, check=True)
        cli, _ = _exchange(path, 15304, ["--composite", "Bulk", "--mode", "pingpong", "--idle", "3"],
                           ["--composite", "Bulk", "--mode", "pingpong", "--count", "20", "--size", "1"], kill=True)
        dropped = subprocess.run(["ip", "netns", "exec", path.ns["a"], "nft", "list", "table", "inet", "cfirst"],
                                 capture_output=True, text=True).stdout
    assert cli.returncode == 0, cli.stderr
    assert "packets 1 " in dropped, dropped
    r = json.loads(cli.stdout)
    assert r["warmup_back"] and r["warmup_us"] > 900_000, r
    assert r["rtt"]["count"] == 20 and r["rtt"]["max_us"] < 500_000, r


def test_concast_perf_measures_every_peer_in_one_run(tmp_path):
    out = tmp_path / perf.RESULT_FILE
    rc = perf.main(["--mode", "bulk,pingpong", "--duration", "1", "--count", "100",
                    "--composite", "Minimal,Bulk", "--tcp-cc", "cubic", "--out", str(tmp_path)])
    rows = json.loads(out.read_text())["rows"]
    assert rc == 0, [r["errors"] for r in rows]
    whats = {(r["mode"], r["proto"], r["what"]) for r in rows}
    for mode in ("bulk", "pingpong"):
        assert {(mode, "tcp", "cubic"), (mode, "udp", "udp"), (mode, "ctp", "Minimal/newreno"),
                (mode, "ctp", "Bulk/newreno")} <= whats
    for r in rows:
        if r["mode"] == "bulk":
            assert r["mbps"] > 0 and r["vs_tcp"] > 0 and r["vs_udp"] > 0, r
        else:
            assert r["median_us"] > 0 and "plus_us_udp" in r and "plus_us_tcp" in r, r
