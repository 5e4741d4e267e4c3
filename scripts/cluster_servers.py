#!/usr/bin/env python3
"""Emulated "servers" on this machine for concast on Mininet Cluster Edition (docs/cluster.md).

Run with the project's venv (.venv/bin/python scripts/cluster_servers.py ...), as root:

    up a b c       three servers, each its own namespaces and sshd
    status         names, addresses, `hostname` over ssh
    ssh a ip addr  a command on server a, over ssh
    down           removes exactly what `up` made

--state DIR keeps several sets apart (default /var/tmp/ccs-cluster).
"""
import argparse
import sys

from concast.topologies.cluster.servers import (STATE_DIR, ClusterError, EmulatedServers,
                                                ServerDown)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", default=str(STATE_DIR), help="state directory (%(default)s)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="make servers")
    up.add_argument("names", nargs="+")
    sub.add_parser("down", help="remove them")
    sub.add_parser("status", help="list them and check each over ssh")
    ssh = sub.add_parser("ssh", help="run a command on one")
    ssh.add_argument("name")
    ssh.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "up":
            s = EmulatedServers.up(a.names, a.state)
            for srv in s.state.servers:
                print(f"{srv.name}\t{srv.ip}\tnetns {srv.netns}\tinit pid {srv.init_pid}")
            print(f"ssh config: {s.state.ssh_config}  (ssh -F {s.state.ssh_config} NAME)")
        elif a.cmd == "down":
            for what in EmulatedServers.load(a.state).down():
                print("removed", what)
        elif a.cmd == "status":
            s = EmulatedServers.load(a.state)
            for srv in s.state.servers:
                try:
                    p = s.ssh(srv.name, "hostname", check=False, timeout=10)
                    ok = p.stdout.strip() if p.returncode == 0 else f"DOWN ({p.stderr.strip()})"
                except ServerDown as e:
                    ok = f"DOWN ({e})"
                print(f"{srv.name}\t{srv.ip}\t{ok}")
        elif a.cmd == "ssh":
            s = EmulatedServers.load(a.state)
            p = s.ssh(a.name, " ".join(a.command) or "true", check=False)
            sys.stdout.write(p.stdout)
            sys.stderr.write(p.stderr)
            return p.returncode
    except ClusterError as e:
        print(f"cluster_servers: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
