"""`concast mplex`: Mplex_Control through a host's hostd (docs/multiplex.md).

    concast mplex on  --role sender   --to R --max-local-delay MS --max-total-delay MS
                      [--proto udp|tcp --sport P --dport P] [--group 1]
                      [--size-threshold BYTES] [--timeout S]
    concast mplex off --role sender   --to R [--proto udp|tcp --sport P --dport P]
    concast mplex on  --role receiver [--group 1] [--spec FILE.wasm]
    concast mplex off --role receiver [--group 1]
    concast mplex status [--json]

A sender's `on` without --proto multiplexes the kernel's pure TCP ACKs toward R; with
--proto and a port it multiplexes one application's own flow instead (its UDP datagrams or
TCP segments up to --size-threshold bytes, under its own delays). `off` without --proto
stops every flow toward R. A receiver ignores (and names) sender-only options.
A sender's `on` joins (R, G) and waits (up to --timeout seconds; 0 = do not wait) until
capture runs, which is once the join is active: prints `capturing` and exits 0, or says
why not (R has no multiplex spec: the flow fell back) and exits 1. Like `concast send`,
it finds its hostd by itself inside a host's namespace, else takes --node or --socket.
Exit status: 0 done, 1 refused or failed, 2 a bad command line.
"""
from __future__ import annotations

import argparse
import json
import sys

from concast import hostcli
from concast.hostcli import BadUsage, receiver_addr
from concast.argtypes import delay_ms, hidden_alias, mplex_group, port, threshold
from concast.hosts.capture import wait_capture
from concast.scapy.mplex import MPLEX_GROUP

def flow_fields(ns: argparse.Namespace) -> dict:
    """The application flow a sender names (nothing: the kernel's pure ACKs)."""
    if ns.proto is None:
        if ns.sport is not None or ns.dport is not None:
            raise BadUsage("--sport/--dport name an application flow: give --proto udp|tcp too")
        if ns.size_threshold is not None and ns.size_threshold < 40:
            raise BadUsage(f"--size-threshold {ns.size_threshold}: pure ACKs are at least 40 bytes")
        return {}
    if ns.sport is None and ns.dport is None:
        raise BadUsage(f"--proto {ns.proto} needs --sport (this host's port) and/or --dport "
                       "(R's port) to name the flow")
    if ns.proto == "tcp" and ns.size_threshold is not None and ns.size_threshold < 40:
        raise BadUsage(f"--size-threshold {ns.size_threshold}: TCP segments are at least 40 bytes")
    return {"proto": ns.proto, "sport": ns.sport, "dport": ns.dport}


def flow_words(ns: argparse.Namespace) -> str:
    if ns.proto is None:
        return "pure ACKs"
    ports = " ".join(f"{k} {v}" for k, v in (("sport", ns.sport), ("dport", ns.dport)) if v)
    return f"{ns.proto} {ports} datagrams"


def request_fields(ns: argparse.Namespace) -> dict:
    """The API request for `on`/`off`, after the checks argparse cannot express."""
    f = {"action": ns.action, "role": ns.role, "group": ns.group}
    if ns.role == "sender":
        if not ns.to:
            raise BadUsage("a sender needs --to R")
        f["receiver"] = ns.to
        f.update(flow_fields(ns))
        if ns.action == "on":
            if ns.max_local_delay is None or ns.max_total_delay is None:
                raise BadUsage("a sender needs --max-local-delay and --max-total-delay")
            if ns.max_local_delay > ns.max_total_delay:
                raise BadUsage(f"--max-local-delay ({ns.max_local_delay} ms) exceeds "
                               f"--max-total-delay ({ns.max_total_delay} ms)")
            f.update(max_local_delay_ms=ns.max_local_delay, max_total_delay_ms=ns.max_total_delay,
                     size_threshold=ns.size_threshold)
    else:
        if ns.to is not None:
            raise BadUsage("a receiver takes no --to: R is this host")
        # Paper 4.1: the delays are each sender's; a receiver ignores them (and says so).
        given = [o for o, v in (("--max-local-delay", ns.max_local_delay),
                                ("--max-total-delay", ns.max_total_delay),
                                ("--size-threshold", ns.size_threshold), ("--proto", ns.proto),
                                ("--sport", ns.sport), ("--dport", ns.dport)) if v is not None]
        if given:
            print(f"note: a receiver ignores {', '.join(given)} (each sender chooses its own)",
                  file=sys.stderr)
        if ns.action == "on":
            from concast import tools
            f["spec_path"] = str(ns.spec or tools.spec_module("multiplex"))  # MissingTool: exit 3
    return f


def cmd_mplex(ns: argparse.Namespace) -> int:
    if ns.action == "status":
        with hostcli.connect(ns) as c:
            st = c.request("mplex", action="status")
        st.pop("id", None), st.pop("ok", None)
        print(json.dumps(st, indent=1 if not ns.json else None, sort_keys=True))
        return 0
    if ns.role is None:
        raise BadUsage("on/off need --role sender or --role receiver")
    fields = request_fields(ns)
    from concast.hosts import HostdError
    with hostcli.connect(ns) as c:
        try:
            reply = c.request("mplex", timeout=15, **fields)
        except HostdError as e:
            raise RuntimeError(str(e)) from None
        if ns.role == "receiver":
            what = "receiving" if ns.action == "on" else "stopped receiving"
            print(f"{what}: group {ns.group}" + (f", injecting into {reply.get('tun')}"
                                                  if ns.action == "on" else ""))
            return 0
        if ns.action == "off":
            print("off: " + json.dumps(reply.get("counters"), sort_keys=True))
            return 0
        if reply.get("state") == "capturing":
            print(f"capturing: {flow_words(ns)} toward {ns.to} now travel in group {ns.group}")
            return 0
        if ns.timeout == 0:
            print(f"joining: capture starts once the join of ({ns.to}, {ns.group}) is active")
            return 0
        ok, text = wait_capture(c, ns.to, ns.group, ns.timeout, flow_words(ns))
    print(text)
    return 0 if ok else 1


def add_verbs(sub) -> None:
    m = sub.add_parser("mplex", help="turn the multiplex service on or off at a host "
                                     "(Mplex_Control), or show its counters",
                       description=__doc__.split("\n\n")[0])
    m.add_argument("action", choices=("on", "off", "status"),
                   help="switch the service on or off, or show its counters")
    m.add_argument("--role", choices=("sender", "receiver"),
                   help="this host as a sender (captures toward --to) or as R (unbundles)")
    m.add_argument("--group", type=mplex_group, default=MPLEX_GROUP, metavar="G",
                   help="multiplex group (default 1, the well-known one)")
    m.add_argument("--to", type=receiver_addr, metavar="R", help="the receiver (senders)")
    m.add_argument("--max-local-delay", type=delay_ms, metavar="MS",
                   help="most time one node may hold an ACK for bundling")
    m.add_argument("--max-total-delay", type=delay_ms, metavar="MS",
                   help="most time, end to end, an ACK may be held")
    m.add_argument("--size-threshold", type=threshold, metavar="BYTES",
                   help="largest datagram taken (IPv4 total length, default 128)")
    m.add_argument("--proto", choices=("udp", "tcp"),
                   help="sender: multiplex one application flow of this protocol instead of "
                        "the kernel's pure ACKs")
    m.add_argument("--sport", type=port, metavar="P", help="the flow's port on this host")
    m.add_argument("--dport", type=port, metavar="P", help="the flow's port at R")
    m.add_argument("--spec", metavar="FILE.wasm",
                   help="receiver: the multiplex spec (default build/mergespecs/multiplex.wasm)")
    hidden_alias(m, "--wait", m.add_argument(
        "--timeout", type=float, default=10.0, metavar="S",
        help="sender on: seconds to wait for capture to start (0: do not wait; default 10)"))
    m.add_argument("--json", action="store_true", help="status: one line of JSON")
    hostcli.add_node_options(m)
    m.set_defaults(func=lambda ns: hostcli.run_guarded(m, lambda: cmd_mplex(ns)))
