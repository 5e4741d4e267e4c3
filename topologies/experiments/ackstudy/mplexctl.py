"""Mplex_Control for many hosts at once, through their hostd API sockets: the receiver
once, every sender with one MaxLocalDelay, on and off. Requests go to all senders first,
then the answers are awaited, so 200 joins take one signalling round, not 200. The hosts'
sockets are asked `workers` at a time (`concast.fanout`; 1 = one after another)."""
from __future__ import annotations

import time
from pathlib import Path

from concast import fanout, tools

GROUP = 1


def receiver_on(net, server: str, spec_path=None) -> dict:
    """R unbundles GROUP with the bundled multiplex spec, or the one at `spec_path`."""
    from concast.hosts import Client
    spec = spec_path or tools.spec_module("multiplex")
    with Client(net.hostd_socket(server)) as c:
        return c.request("mplex", action="on", role="receiver", group=GROUP,
                         spec_path=str(spec))


def embed_params(params: tuple[str, ...], out) -> Path:
    """The multiplex spec with `params` (KEY=VALUE) embedded as its concast.params section,
    written to `out`: every router that fetches it over CSP merges with those values."""
    import subprocess
    args = [str(tools.rust_binary("concast-spec")), "embed", str(tools.spec_module("multiplex"))]
    for p in params:
        args += ["--param", p]
    r = subprocess.run(args + ["--output", str(out)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"concast-spec embed {' '.join(params)}: {r.stderr.strip()}")
    subprocess.run([str(tools.rust_binary("concast-spec")), "check", str(out)],
                   check=True, capture_output=True)  # the parameters parse: init accepts them
    return out


def senders_on(net, clients: list[str], server_ip: str, max_local_ms: float,
               max_total_ms: float, timeout: float = 60.0, rounds: int = 3,
               workers: int = fanout.WORKERS) -> int:
    """Every client captures its pure ACKs toward the server, or this raises saying who
    did not (and why). A client whose join fell back (CSP gave up after its retries: the
    first join of a network fetches the spec over every hop) is turned off and on again,
    up to `rounds` times. Returns how many re-joins that took."""
    from concast.hosts import Client
    from concast.hosts.capture import wait_capture
    pending = list(clients)
    rejoins = 0
    failed: dict[str, str] = {}
    for round_ in range(rounds):
        if round_:
            senders_off(net, pending, server_ip, workers)
            rejoins += len(pending)
        conns = {h: Client(net.hostd_socket(h), timeout=timeout) for h in pending}
        try:
            def join(h):
                return conns[h].request("mplex", action="on", role="sender", receiver=server_ip,
                                        group=GROUP, max_local_delay_ms=max_local_ms,
                                        max_total_delay_ms=max_total_ms)["state"]
            waiting = [h for h, state in fanout.each(join, conns, workers).items()
                       if state != "capturing"]
            deadline = time.monotonic() + timeout

            def wait(h):
                return wait_capture(conns[h], server_ip, GROUP, max(0.1, deadline - time.monotonic()))
            failed = {h: text for h, (ok, text) in fanout.each(wait, waiting, workers).items() if not ok}
        finally:
            for c in conns.values():
                c.close()
        if not failed:
            return rejoins
        pending = list(failed)
    first = next(iter(failed.items()))
    raise RuntimeError(f"{len(failed)} of {len(clients)} clients do not capture after "
                       f"{rounds} joins (first: {first[0]}: {first[1]})")


def senders_off(net, clients: list[str], server_ip: str, workers: int = fanout.WORKERS) -> None:
    from concast.hosts import Client

    def off(h):
        with Client(net.hostd_socket(h)) as c:
            c.request("mplex", action="off", role="sender", receiver=server_ip, group=GROUP)
    fanout.each(off, clients, workers)


def status(net, hosts: list[str], workers: int = fanout.WORKERS) -> dict[str, dict]:
    from concast.hosts import Client

    def ask(h):
        with Client(net.hostd_socket(h)) as c:
            return c.request("mplex", action="status")
    return fanout.each(ask, hosts, workers)


def sender_acks(st: dict) -> int:
    """Pure ACKs a sender's hostd took (all its sender flows), from `mplex status`: what
    its queue handed over, less the short data segments it let pass untouched (an HTTP
    request is short enough to match the capture rule but is not an ACK)."""
    total = 0
    for f in st.get("senders", []):
        c = f["counters"]
        total += c["captured"] - (c.get("passed") or {}).get("not_pure_ack", 0)
    return total


def receiver_counters(st: dict) -> dict:
    """The receiver group's counters from the server's `mplex status` (zeros if none)."""
    for r in st.get("receivers", []):
        if r.get("group") == GROUP:
            return r["counters"]
    return {"records": 0, "bundle_sizes": {}, "expired_ttl": 0, "mplex_received": 0}
