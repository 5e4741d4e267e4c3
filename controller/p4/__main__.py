"""Run-time operations on a running BMv2 router, for routerd and for people.

    python -m concast.controller.p4 --switch unix:/run/x.sock flow add 10.1.1.2 7
    python -m concast.controller.p4 --switch unix:/run/x.sock flow del 10.1.1.2 7
    python -m concast.controller.p4 --switch unix:/run/x.sock flow list
    python -m concast.controller.p4 --switch unix:/run/x.sock counters
    python -m concast.controller.p4 --switch unix:/run/x.sock divert R G [PROTO DPORT]
    python -m concast.controller.p4 --switch unix:/run/x.sock undivert R G
    python -m concast.controller.p4 --switch unix:/run/x.sock clear

divert/undivert/clear are routerd's `--dataplane-cmd` interface (docs/dataplane-bmv2.md):
idempotent (an entry already there, or already gone, is not an error); PROTO and DPORT
are accepted and ignored (the P4 program matches the flow itself, by R and G); clear
deletes every concast_flows entry.

It connects as a second P4Runtime controller with election id ELECTION_WRITER (2**64 + 2,
one above the control plane's connection), so it is primary for the moment it writes, and
disconnects; the control plane's connection becomes primary again. If another client holds
a higher election id it exits 1 saying so ("not primary"): routerd shows the flow as
divert_failed and tries again (docs/dataplane-bmv2.md "Arbitration"). `flow list` and
`counters` only read: they connect as a backup and work whoever is primary. The pipeline must already be on the switch; the P4Info is read from
--p4info (default build/p4/concast.p4info.txt).
"""
from __future__ import annotations

import argparse
import json
import sys
from ipaddress import IPv4Address

from concast.controller.p4 import pipeline as P


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m concast.controller.p4", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--switch", required=True, help="P4Runtime address (unix:PATH or HOST:PORT)")
    ap.add_argument("--p4info", default=str(P.P4INFO_PATH))
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--election-id", type=int, default=None,
                    help="default: 2**64 + 2 to write, a random backup id to read")
    sub = ap.add_subparsers(dest="cmd", required=True)
    flow = sub.add_parser("flow", help="concast_flows entries")
    flow.add_argument("op", choices=("add", "del", "list"))
    flow.add_argument("receiver", nargs="?")
    flow.add_argument("group", nargs="?", type=lambda s: int(s, 0))
    sub.add_parser("counters", help="every counter, as JSON")
    dv = sub.add_parser("divert", help="routerd: flow (R, G) active (idempotent)")
    dv.add_argument("receiver")
    dv.add_argument("group", type=lambda s: int(s, 0))
    dv.add_argument("selector", nargs="*", help="PROTO DPORT (ignored)")
    ud = sub.add_parser("undivert", help="routerd: flow (R, G) gone (idempotent)")
    ud.add_argument("receiver")
    ud.add_argument("group", type=lambda s: int(s, 0))
    sub.add_parser("clear", help="routerd: delete every concast_flows entry")
    args = ap.parse_args(argv)

    from concast.controller.p4.p4rt import ELECTION_WRITER, P4RuntimeClient, P4RuntimeError

    reads_only = args.cmd == "counters" or (args.cmd == "flow" and args.op == "list")
    election = args.election_id
    if election is None and not reads_only:
        election = ELECTION_WRITER
    try:
        return run(args, ap, P4RuntimeClient(args.switch, args.device_id, election,
                                             backup=reads_only))
    except P4RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def run(args, ap, client) -> int:
    from concast.controller.p4.router import P4Router
    with client:
        client.use_p4info(args.p4info)
        router = P4Router(client)
        if args.cmd == "counters":
            print(json.dumps(router.counters(), indent=1))
        elif args.cmd in ("divert", "undivert"):
            entry = P.concast_flow_entry(args.receiver, args.group)
            present = (P.ip_int(args.receiver), args.group) in router.flows_on_switch()
            if args.cmd == "divert" and not present:
                client.insert([entry])
            elif args.cmd == "undivert" and present:
                client.delete([entry])
        elif args.cmd == "clear":
            router.clear_flows()
        elif args.op == "list":
            for r, g in router.flows_on_switch():
                print(IPv4Address(r), g)
        else:
            if args.receiver is None or args.group is None:
                ap.error("flow add/del need RECEIVER and GROUP")
            entry = P.concast_flow_entry(args.receiver, args.group)
            (client.insert if args.op == "add" else client.delete)([entry])
    return 0


if __name__ == "__main__":
    sys.exit(main())
