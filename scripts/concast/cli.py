"""The `concast` command line.

Verbs that drive Rust programs (the merge engine's offline runner, routerd, hostd)
hand their arguments to those binaries unchanged, so there is one parser per tool.
The conventions every verb follows are in docs/cli.md.
"""
from __future__ import annotations

import argparse
import os
import sys

from concast import prereq, tools


def _exec_rust(binary: str, args: list[str]) -> int:
    try:
        path = tools.rust_binary(binary)
    except tools.MissingTool as e:
        return prereq.report("concast", str(e))
    os.execv(path, [str(path), *args])
    return 0  # not reached


SPEC_HELP = """\
usage: concast spec {check,run,embed,upload,help} ...

Merge specs: check, run or embed parameters offline (the concast-spec tool, whose own
usage follows), or install one at a running receiver's hostd:

  concast spec upload --group G FILE.wasm [--node HOST]   (concast spec upload --help)
"""


def cmd_spec(ns: argparse.Namespace) -> int:
    if ns.rest[:1] == ["upload"]:           # to a running hostd, not the offline tool
        from concast import hostcli
        return hostcli.spec_upload(ns.rest[1:])
    if not ns.rest or ns.rest[0] in ("-h", "--help", "help"):
        print(SPEC_HELP, flush=True)
        return _exec_rust("concast-spec", ["help"])
    return _exec_rust("concast-spec", ns.rest)


def cmd_decode(ns: argparse.Namespace) -> int:
    from concast import decode
    return decode.main(ns.what, ns.pcap, ns.verbose)


def cmd_demo(ns: argparse.Namespace) -> int:
    from concast import demo
    return demo.main(ns.out)


def cmd_net(ns: argparse.Namespace) -> int:
    if ns.action == "up":
        from concast.topologies import up
        return up.main(ns.rest)
    from concast.topologies import leftovers
    return leftovers.main(ns.rest)


def version() -> str:
    """The installed package's version and the checkout's git revision, then each Rust binary
    and built merge spec this command would use: the binary's own --version where it has one,
    and the first 12 hex digits of every file's SHA-256 (what meta.json records in full)."""
    from importlib import metadata
    from concast import provenance
    try:
        v = metadata.version("concast")
    except metadata.PackageNotFoundError:
        v = "unknown"
    rev = tools.revision()
    lines = [f"concast {v}" + (f" ({rev})" if rev else "")]
    for name in provenance.BINARIES:
        b = provenance.binary_record(name)
        if b is None:
            lines.append(f"  {name:16} not built")
        else:
            lines.append(f"  {name:16} {b['version'] or '(no --version)':24} "
                         f"sha256:{b['sha256'][:12]}  {b['path']}")
    folder = tools.spec_dir()
    specs = sorted(folder.glob("*.wasm")) if folder else []
    for s in specs:
        lines.append(f"  {'spec ' + s.stem:16} {'':24} sha256:{provenance.sha256(s)[:12]}  {s}")
    if not specs:
        lines.append("  specs            not built (make specs)")
    return "\n".join(lines)


class _Dir(argparse.Action):
    """--bin-dir/--spec-dir: an existing folder, put in the environment for the lookup
    (concast.tools) of this process and of the programs it starts."""

    def __call__(self, parser, ns, value, option_string=None):
        if not os.path.isdir(value):
            parser.error(f"{option_string} {value}: not a folder")
        if self.dest == "bin_dir":
            os.environ[tools.BIN_ENV] = os.pathsep.join(
                filter(None, [os.path.abspath(value), os.environ.get(tools.BIN_ENV)]))
        else:
            os.environ[tools.SPECS_ENV] = os.path.abspath(value)
        setattr(ns, self.dest, value)


class _Version(argparse.Action):
    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, help="print the version, the git revision and the Rust binaries' and specs' versions, then exit")

    def __call__(self, parser, ns, value, option_string=None):
        print(version())
        parser.exit()


DESCRIPTION = """\
concast: programmable router middleware for in-network services. Senders join a concast flow
(R, G); routers that see the Concast ID option merge the flow's datagrams with the receiver's
merge spec (WebAssembly) and forward the result toward R. A multiplex service on top bundles
small packets (TCP ACKs) toward the same receiver. Everything runs on emulated networks."""

EXAMPLES = """\
examples:
  concast net up tree --dataplane linux        a network with routers, at a Mininet prompt
  concast spec run build/mergespecs/sum.wasm --input mergespecs/engine/tests/data/sum.jsonl
  sudo concast exp ack-study --quick           the paper's ACK study in small (a minute)

concast VERB --help says more about each verb; docs/cli.md has the conventions
(exit status 0 ok, 1 the check or run failed, 2 usage, 3 a missing prerequisite)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="concast", description=DESCRIPTION, epilog=EXAMPLES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version)
    p.add_argument("--bin-dir", action=_Dir, metavar="DIR",
                   help=f"look for the Rust binaries here first (sets ${tools.BIN_ENV}; "
                        f"then PATH, then a checkout's target/release)")
    p.add_argument("--spec-dir", action=_Dir, metavar="DIR",
                   help=f"take the built merge specs from here (sets ${tools.SPECS_ENV}; "
                        f"else a checkout's build/mergespecs)")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    s = sub.add_parser("spec", help="check or run a merge spec offline (concast spec --help); "
                                    "concast spec upload: install one at a running hostd",
                       add_help=False)
    s.add_argument("rest", nargs=argparse.REMAINDER,
                   help="check|run|embed|upload|help and their options")
    s.set_defaults(func=cmd_spec)

    d = sub.add_parser("decode", help="decode concast packets (hex or pcap) and print them")
    d.add_argument("what", nargs="?", help="hex bytes of one IPv4 datagram")
    d.add_argument("--pcap", metavar="FILE", help="decode every packet of this pcap instead "
                                                  "(one line each)")
    d.add_argument("-v", "--verbose", action="store_true",
                   help="also print Scapy's full field dump of each packet (default off)")
    d.set_defaults(func=cmd_decode)

    m = sub.add_parser("demo", help="the offline tour: every packet type, a merge, a pcap")
    m.add_argument("--out", metavar="DIR",
                   help="where to write results (default a new folder "
                        "results/demo/<UTC time>-<rev>/)")
    m.set_defaults(func=cmd_demo)

    n = sub.add_parser("net", help="concast net up TOPO: start a network (concast net up "
                                   "--help); concast net cleanup: remove leftovers of dead runs")
    n.add_argument("action", choices=["up", "cleanup"],
                   help="up: start a network; cleanup: remove what dead runs left")
    n.add_argument("rest", nargs=argparse.REMAINDER, help="the action's own options (--help)")
    n.set_defaults(func=cmd_net)

    from concast import hostcli
    hostcli.add_verbs(sub)                  # send, recv, host, router
    from concast import expcli, mplexcli
    mplexcli.add_verbs(sub)                 # mplex
    expcli.add_verbs(sub)                   # exp
    from concast import perfcli
    perfcli.add_verbs(sub)                  # perf
    c = sub.add_parser("conform", help="run the conformance suite against a router "
                                       "(docs/conformance.md)")
    from concast.conform import run as conform_run
    conform_run.build_parser(c)
    c.set_defaults(func=lambda ns: conform_run.main(ns=ns))
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    ns, extra = p.parse_known_args(argv)
    if extra:
        # `concast spec --help`: the spec verb hands everything to its own parsers.
        if getattr(ns, "verb", None) != "spec":
            p.error(f"unrecognized arguments: {' '.join(extra)}")
        ns.rest = extra + ns.rest
    return ns.func(ns)


if __name__ == "__main__":
    sys.exit(main())
