"""Run-time operations on a running BMv2 router, for routerd and for people.

    python -m concast.controller.p4 --switch unix:/run/x.sock flow add 10.1.1.2 7
    python -m concast.controller.p4 --switch unix:/run/x.sock flow del 10.1.1.2 7
    python -m concast.controller.p4 --switch unix:/run/x.sock flow list
    python -m concast.controller.p4 --switch unix:/run/x.sock counters

It connects as a second P4Runtime controller with a higher election id (default 2), so it
is primary for the moment it writes, and disconnects; the control plane's connection
(election id 1) becomes primary again. The pipeline must already be on the switch; the
P4Info is read from --p4info (default build/p4/concast.p4info.txtpb).
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
    ap.add_argument("--election-id", type=int, default=2)
    sub = ap.add_subparsers(dest="cmd", required=True)
    flow = sub.add_parser("flow", help="concast_flows entries")
    flow.add_argument("op", choices=("add", "del", "list"))
    flow.add_argument("receiver", nargs="?")
    flow.add_argument("group", nargs="?", type=lambda s: int(s, 0))
    sub.add_parser("counters", help="every counter, as JSON")
    args = ap.parse_args(argv)

    from concast.controller.p4.p4rt import P4RuntimeClient
    from concast.controller.p4.router import P4Router

    with P4RuntimeClient(args.switch, args.device_id, args.election_id) as client:
        client.use_p4info(args.p4info)
        if args.cmd == "counters":
            print(json.dumps(P4Router(client).counters(), indent=1))
        elif args.op == "list":
            for te in client.read_table(P.T_CONCAST_FLOWS):
                f = {m.field_id: m.exact.value for m in te.match}
                r, g = (int.from_bytes(f[i], "big") for i in sorted(f))
                print(IPv4Address(r), g)
        else:
            if args.receiver is None or args.group is None:
                ap.error("flow add/del need RECEIVER and GROUP")
            entry = P.concast_flow_entry(args.receiver, args.group)
            (client.insert if args.op == "add" else client.delete)([entry])
    return 0


if __name__ == "__main__":
    sys.exit(main())
