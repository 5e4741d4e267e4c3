"""`concast net up TOPO`: start a network with routerd on every concast-capable router and
hostd on every host, then open Mininet's CLI, run a script, or wait.

TOPO is a shape (dumbbell, tree, line, star, mixed, transit-stub) or a saved network (a
.json file written by --write-json or ConcastNet.save). Examples:

    concast net up tree --levels 2 --senders 8
    concast net up transit-stub --seed 3 --write-json ts3.json # the 220-router network
    concast net up ts3.json --script check.py                 # the same network again
    concast net up transit-stub --stubs-per-transit 2 --stub-nodes 3 --clients 4 \\
        --script ping.sh --script-hosts c1,c2,c3,c4
    concast net up dumbbell --dry-run --write-json d.json     # plan only, nothing started

Scripts. FILE ending in .py runs in this process with `net` (the RunningNet: net["c1"] is a
Mininet host, net.ip("sv") an address, net.ping("c1", "sv")) and `args` (what follows
--script-args) as globals; raising or sys.exit(n) sets the exit status. Any other FILE
runs with sh inside every host's namespace (or the --script-hosts ones), all at once, with
CONCAST_HOST (the host's name), CONCAST_ADDR (its address), CONCAST_IP_<NAME> for every
host (CONCAST_IP_SV, CONCAST_IP_C1, ...), CONCAST_RUN_DIR and CONCAST_TAG in the
environment; each host's output is printed prefixed with its name, and the exit status is
the number of hosts whose script failed (at most 100).

Everything started here (namespaces, bridges, daemons) is stopped on exit, Ctrl-C and
SIGTERM; nothing else is touched.
"""
from __future__ import annotations

import argparse
import os
import runpy
import signal
import subprocess
import sys
import threading
from pathlib import Path

from concast import prereq, tools
from concast.argtypes import DEFAULT_DATAPLANE, add_dataplane, hidden_alias
from concast.topologies import ConcastNet, prebuilt, transitstub

SHAPES = ("dumbbell", "tree", "line", "star", "mixed", "transit-stub")
LINK_KINDS = ("auto", "netem", "linkemu")
BIG = 12        # above this many routers the address table goes to a file, not the screen


def link_params(text: str | None) -> dict | None:
    """"delay=10ms,bw=100,max_queue_size=20" -> dict (numbers where they parse); "" -> {}."""
    if text is None:
        return None
    out: dict = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, eq, value = item.partition("=")
        if not eq or key not in ("delay", "loss", "bw", "max_queue_size"):
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected delay=, loss=, bw= or max_queue_size= (comma-separated)")
        try:
            out[key] = int(value) if value.isdigit() else float(value)
        except ValueError:
            out[key] = value            # "10ms"
    return out


class _Given(argparse._StoreAction):
    """--dataplane, noting that it was given (a saved network keeps its own otherwise)."""

    def __call__(self, parser, ns, values, option_string=None):
        super().__call__(parser, ns, values, option_string)
        ns.dataplane_given = True


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="concast net up", description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topo", metavar="TOPO", help=f"{', '.join(SHAPES)}, or a saved .json file")
    add_dataplane(p, "router data plane; a saved network keeps its own unless this is given",
                  action=_Given)
    p.add_argument("--seed", type=int, default=1, help="transit-stub: random seed (1)")
    p.add_argument("--oblivious", action="store_true",
                   help="every router concast-oblivious (no routerd)")
    g = p.add_argument_group("prebuilt shapes")
    g.add_argument("--routers", type=int, default=2, help="line: routers (2)")
    g.add_argument("--levels", type=int, help="tree, mixed: router levels (2; mixed: 3)")
    g.add_argument("--fanout", type=int, default=2, help="tree, mixed: children per router (2)")
    g.add_argument("--senders", type=int, default=8, help="line, tree, mixed: senders (8)")
    g.add_argument("--clients", type=int,
                   help="star, dumbbell: clients (4); transit-stub: clients (200)")
    g.add_argument("--bw", type=float, help="dumbbell: r1-r2 limit, Mbit/s")
    t = p.add_argument_group("transit-stub (docs/topologies.md; defaults: the 220-router "
                             "network of the ACK study)")
    d = transitstub.Params()
    t.add_argument("--transits", type=int, default=d.transits, help="transit domains (1)")
    t.add_argument("--transit-nodes", type=int, default=d.transit_nodes,
                   help="routers per transit domain (4)")
    t.add_argument("--stubs-per-transit", type=int, default=d.stubs_per_transit,
                   help="stub domains per transit router (6)")
    t.add_argument("--stub-nodes", type=int, default=d.stub_nodes,
                   help="routers per stub domain (9)")
    t.add_argument("--stub-var", type=int, default=d.stub_var,
                   help="stub sizes vary by up to this many routers (0)")
    t.add_argument("--edge-model", choices=transitstub.EDGE_MODELS, default=d.edge_model,
                   help="random graph inside domains (pure)")
    t.add_argument("--transit-p", type=float, default=d.transit_p,
                   help="edge probability inside a transit domain (0.6)")
    t.add_argument("--stub-p", type=float, default=d.stub_p,
                   help="edge probability inside a stub domain (0.4)")
    t.add_argument("--extra-transit-stub", type=int, default=0, help="extra links (0)")
    t.add_argument("--extra-stub-stub", type=int, default=0, help="extra links (0)")
    t.add_argument("--placement", choices=transitstub.PLACEMENTS, default=d.placement,
                   help="clients over stub routers (round-robin)")
    t.add_argument("--core", type=link_params, metavar="K=V,...",
                   help="transit and transit-stub links (delay=10ms,bw=100,max_queue_size=20);"
                        " '' for ideal links")
    t.add_argument("--edge", type=link_params, metavar="K=V,...",
                   help="stub links (delay=10ms,bw=10,max_queue_size=20); '' for ideal links")
    t.add_argument("--access", type=link_params, metavar="K=V,...",
                   help="hosts' links (ideal)")
    r = p.add_argument_group("what to do")
    hidden_alias(r, "--save", r.add_argument(
        "--write-json", metavar="FILE", help="write the network as JSON first (for `concast "
                                             "net up FILE` or `exp ack-study --topology FILE`)"))
    r.add_argument("--dry-run", action="store_true",
                   help="only build (and --write-json) the description and print its size")
    r.add_argument("--no-daemons", action="store_true", help="start no routerd or hostd")
    r.add_argument("--hold", type=float, default=3, help="routerd/hostd --hold: the protocol's "
                   "soft-state hold time, seconds (3); not a duration of this command")
    r.add_argument("--script", metavar="FILE", help="run FILE (see above) instead of the CLI")
    r.add_argument("--script-args", nargs=argparse.REMAINDER, default=[],
                   help=".py scripts: the rest of the command line, as `args`")
    r.add_argument("--script-hosts", metavar="H1,H2", help="shell scripts: only these hosts")
    hidden_alias(r, "--seconds", r.add_argument(
        "--duration", type=float, metavar="S",
        help="no CLI: keep the network up this many seconds (or until Ctrl-C)"))
    r.add_argument("--describe", action="store_true",
                   help="print the whole address table even for big networks")
    r.add_argument("--servers", metavar="A,B,...",
                   help="spread the network over these servers with Mininet Cluster Edition "
                        "(docs/cluster.md; Linux data plane; links emulated by one concast-linkemu per server)")
    add_interactive_options(p)
    return p


def add_interactive_options(p: argparse.ArgumentParser) -> None:
    """Links, captures and BMv2 switches (issue #27, item 3)."""
    i = p.add_argument_group("links, captures, P4")
    i.add_argument("--links", choices=LINK_KINDS, default="auto",
                   help="how links get delay and loss: netem (Linux tc, as Mininet's TCLink), "
                        "linkemu (the concast link emulator, docs/linkemu.md), or auto: netem "
                        "where this kernel has it, else linkemu (default auto)")
    i.add_argument("--pcap", metavar="all|HOST,R1-R2,...",
                   help="capture every packet on these links into DIR/NAME.pcapng, for `concast "
                        "decode --pcap`: a host's link by the host's name, a link between "
                        "routers as R1-R2; all: every link (default none)")
    i.add_argument("--pcap-dir", metavar="DIR",
                   help="where --pcap writes (relative to here; default <run dir>/pcap)")
    i.add_argument("--p4", metavar="FILE.p4", help="--dataplane bmv2: run this P4 program on "
                   "the routers instead of p4src/concast.p4 (needs p4c); default concast.p4")
    i.add_argument("--bmv2-log", action="store_true",
                   help="--dataplane bmv2: write each switch's packet log (default off)")


def cluster_problem(ns: argparse.Namespace, desc: ConcastNet) -> str | None:
    """Why --servers cannot be honoured as asked (None: it can); places the network."""
    if not ns.servers:
        return None
    if ns.script and not ns.script.endswith(".py"):
        return "--servers: shell scripts run in local namespaces; use a .py script"
    if getattr(ns, "pcap", None):
        return ("--servers: --pcap writes on the capturing node's server, not built for a "
                "cluster yet")
    if getattr(ns, "links", "auto") == "netem":
        return "--servers: netem links are not built for a cluster; use --links linkemu"
    if desc.emulate == "netem":         # --links auto on a kernel with netem: the emulator
        desc.emulate = None             # (one per server) is what a cluster has
    desc.servers(ns.servers)
    return None


def build(ns: argparse.Namespace) -> ConcastNet:
    net = _build(ns)
    net.emulate = links_choice(getattr(ns, "links", "auto"), net.emulate)
    return net


def links_choice(kind: str, given=None):
    """ConcastNet's `emulate` for --links: "netem" (TCLink), True (linkemu), or for auto netem
    where the kernel has it and otherwise what the network asked for (linkemu when a link has
    delay, loss or a queue limit). RuntimeError when netem is asked for and absent."""
    from concast.topologies import links
    if kind == "linkemu":
        return True
    if kind == "netem" or (kind == "auto" and links.netem_available()):
        if not links.netem_available():
            raise LookupError("this kernel has no netem (tc qdisc ... netem fails; modprobe "
                              "sch_netem, or use --links linkemu)")
        return "netem"
    return given


def _build(ns: argparse.Namespace) -> ConcastNet:
    capable = not ns.oblivious
    if ns.topo not in SHAPES:
        path = Path(ns.topo)
        if not path.is_file():
            raise ValueError(f"{ns.topo!r} is neither a shape ({', '.join(SHAPES)}) nor a file")
        net = ConcastNet.load(path, ns.dataplane if getattr(ns, "dataplane_given", False)
                              else None)
        if ns.oblivious:
            raise ValueError("--oblivious applies to shapes; a saved network keeps its own")
        return net
    dp = ns.dataplane or DEFAULT_DATAPLANE
    if ns.topo == "transit-stub":
        kw = {k: v for k, v in (("core", ns.core), ("edge", ns.edge), ("access", ns.access))
              if v is not None}
        return transitstub.transit_stub(
            dp, seed=ns.seed, transits=ns.transits, transit_nodes=ns.transit_nodes,
            stubs_per_transit=ns.stubs_per_transit, stub_nodes=ns.stub_nodes,
            stub_var=ns.stub_var, edge_model=ns.edge_model, transit_p=ns.transit_p,
            stub_p=ns.stub_p, extra_transit_stub=ns.extra_transit_stub,
            extra_stub_stub=ns.extra_stub_stub, placement=ns.placement,
            clients=200 if ns.clients is None else ns.clients, capable=capable, **kw)
    clients = 4 if ns.clients is None else ns.clients
    levels = ns.levels or (3 if ns.topo == "mixed" else 2)
    shapes = {
        "line": (prebuilt.line, dict(n_routers=ns.routers, senders=ns.senders, capable=capable)),
        "tree": (prebuilt.tree, dict(levels=levels, fanout=ns.fanout, senders=ns.senders,
                                     capable=capable)),
        "mixed": (prebuilt.mixed, dict(levels=levels, fanout=ns.fanout, senders=ns.senders)),
        "star": (prebuilt.star, dict(clients=clients, capable=capable)),
        "dumbbell": (prebuilt.dumbbell, dict(clients=clients, capable=capable, bw=ns.bw)),
    }
    fn, kw = shapes[ns.topo]
    net = fn(dataplane=dp, **kw)
    net.generator = {"name": ns.topo, "params": kw, "seed": None}
    return net


def summary(net, show_all: bool) -> str:
    plan = net.plan
    capable = sum(r.capable for r in plan.routers.values())
    (net.run_dir / "plan.txt").write_text(net.describe() + "\n")
    lines = []
    if show_all or len(plan.routers) <= BIG:
        lines += [net.describe(), ""]
    lines += [f"{len(plan.routers)} routers ({capable} concast-capable), {len(plan.hosts)} hosts,"
              f" {len(plan.links)} links on {net.dataplane_name}; run tag {net.tag}",
              f"address table: {net.run_dir / 'plan.txt'}; logs: {net.run_dir / 'logs'}",
              f"a host's shell: ip netns exec {net.netns(next(iter(plan.hosts)))} bash"
              if plan.hosts else ""]
    return "\n".join(lines)


def host_env(net, host: str) -> dict:
    env = {f"CONCAST_IP_{h.upper()}": net.ip(h) for h in net.plan.hosts}
    env.update(CONCAST_HOST=host, CONCAST_ADDR=net.ip(host), CONCAST_RUN_DIR=str(net.run_dir),
               CONCAST_TAG=net.tag)
    return env


def run_shell(net, script: Path, hosts: list[str]) -> int:
    """The script in every chosen host at once; returns how many failed."""
    procs = {h: subprocess.Popen(["ip", "netns", "exec", net.netns(h), "sh", str(script)],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 stdin=subprocess.DEVNULL, env={**os.environ, **host_env(net, h)})
             for h in hosts}
    failed = 0
    for h, p in procs.items():
        out, _ = p.communicate()
        for line in out.splitlines():
            print(f"{h}: {line}")
        if p.returncode != 0:
            print(f"{h}: exit status {p.returncode}")
            failed += 1
    return min(failed, 100)


def run_python(net, script: Path, args: list[str]) -> int:
    try:
        runpy.run_path(str(script), init_globals={"net": net, "args": args},
                       run_name="__main__")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


def run_script(net, ns: argparse.Namespace) -> int:
    script = Path(ns.script)
    if script.suffix == ".py":
        return run_python(net, script, ns.script_args)
    hosts = ns.script_hosts.split(",") if ns.script_hosts else list(net.plan.hosts)
    unknown = [h for h in hosts if h not in net.plan.hosts]
    if unknown:
        raise ValueError(f"--script-hosts: no host {', '.join(unknown)}")
    return run_shell(net, script, hosts)


def on_path(path: str) -> str:
    """PATH with this concast's folder first, so `concast` works on every host."""
    here = str(Path(sys.argv[0]).resolve().parent) if Path(sys.argv[0]).name == "concast" \
        else str(Path(sys.executable).parent)
    parts = path.split(os.pathsep) if path else []
    return os.pathsep.join([here, *[x for x in parts if x != here]])


def capture_points(plan, tag: str, which: str) -> list[tuple[str, str]]:
    """(label, interface) for --pcap: `all` is every host's link and every router-to-router
    link; else a comma list of host names (the host's link, taken at the host) and links
    named ROUTER-ROUTER (either order; taken at the first router's port). ValueError names
    what the network does not have."""
    from concast.netmodel import naming
    links = {f"{ln.a}-{ln.b}": ln for ln in plan.links}
    links.update({f"{ln.b}-{ln.a}": ln for ln in plan.links})
    names = ([*plan.hosts, *(f"{ln.a}-{ln.b}" for ln in plan.links)] if which == "all"
             else [w for w in which.split(",") if w])
    unknown = [n for n in names if n not in plan.hosts and n not in links]
    if unknown:
        raise ValueError(f"--pcap: no host or ROUTER-ROUTER link {', '.join(unknown)} "
                         f"(links: {', '.join(f'{ln.a}-{ln.b}' for ln in plan.links) or 'none'})")
    out = []
    for n in names:
        if n in plan.hosts:
            out.append((n, naming.host_iface(n)))
        else:
            ln = links[n]
            out.append((n, naming.port_iface(tag, ln.a, ln.port_a)))
    return out


def _node_with(net, label: str, iface: str):
    """The Mininet node an interface is in (a host, or a router's node: a namespace on
    Linux, the root namespace on OVS and BMv2)."""
    if label in net.plan.hosts:
        return net[label]
    for node in net.mn.nameToNode.values():
        if iface in getattr(node, "nameToIntf", {}):
            return node
    raise ValueError(f"--pcap: no node has interface {iface} ({label})")


def start_captures(net, which: str | None, folder: str | None = None) -> list:
    """A capture on each chosen link (--pcap all|HOST,R1-R2,...) into folder/LABEL.pcapng."""
    if not which:
        return []
    points = capture_points(net.plan, net.tag, which)
    from concast.topologies.capture import Capture
    where = Path(folder).resolve() if folder else net.run_dir / "pcap"
    caps = [Capture(_node_with(net, label, iface), iface, where / f"{label}.pcapng").start()
            for label, iface in points]
    print(f"capturing on {', '.join(label for label, _ in points)} into {where}", flush=True)
    return caps


def examples(net) -> list[str]:
    """Commands for the banner, made of this network's own node names."""
    hosts = list(net.plan.hosts)
    senders = [h for h in hosts if h[0] == "s" and h[1:].isdigit()]
    if "rx" in hosts and senders:
        a, b = senders[0], "rx"
    elif "sv" in hosts and len(hosts) > 1:
        a, b = next(h for h in hosts if h != "sv"), "sv"
    elif len(hosts) > 1:
        a, b = hosts[0], hosts[1]
    else:
        return ["nodes", "net"]
    router = next(iter(net.plan.routers))
    return ["nodes", "net", "dump", "pingall", f"{a} ping -c 2 {b}", f"{b} ip addr",
            # a Linux router is a kernel namespace; OVS and BMv2 routers hand their own
            # addresses to routerd, which answers no ping: ask routerd and the switch instead
            {"linux": f"{router} ip route", "bmv2": f"sh concast router table {router}"}.get(
                net.dataplane_name, f"sh concast router stats {router}"),
            f"{b} concast recv --group 7 --spec sum --round-timeout 5 --count 1 --timeout 60 &",
            f"{a} concast send --to {b} --group 7 5"]


def aliases(net) -> dict[str, str]:
    """Router name in the topology (r1) -> its Mininet node (cc<tag>r1)."""
    out = {}
    for name, r in net.routers.items():
        node = getattr(r, "node", None) or name
        if node != name and node in net.mn:
            out[name] = node
    return out


def alias_line(line: str, names: dict[str, str], ip) -> str:
    """A line typed at the prompt: a router's topology name first is its node; as an argument
    it is its router ID (`s1 ping r1`), except for concast, which takes names (`sh concast
    router stats r1`, `s1 concast send --to rx`)."""
    words = line.split(" ")
    if words and words[0] in names:
        words[0] = names[words[0]]
    if "concast" in words[:2]:
        return " ".join(words)
    words[1:] = [ip(w) if w in names else w for w in words[1:]]
    return " ".join(words)


def interactive(net) -> None:
    """Mininet's CLI with its own output on (the network was started quiet), the routers by
    their topology names, and a banner of commands that exist here."""
    from mininet.cli import CLI
    from mininet.log import setLogLevel
    names = aliases(net)

    class ConcastCLI(CLI):
        prompt = "concast> "

        def precmd(self, line: str) -> str:
            """r1 -> its node as the command's node; as an argument, its router ID."""
            return alias_line(line, names, net.ip)

        def do_pingall(self, line: str) -> None:
            """Among the hosts only: Linux routers are Mininet hosts too, but with no
            address of their own for Mininet (it would ping `None`)."""
            self.mn.ping(hosts=[net.mn[h] for h in net.plan.hosts], timeout=line or None)

        def do_nodes(self, line: str) -> None:
            super().do_nodes(line)
            if names:
                print("routers by name: " + " ".join(f"{k}={v}" for k, v in names.items()))

    if names:
        print("routers: " + ", ".join(f"{k}={v}" for k, v in names.items())
              + " (type r1 for its node; as an argument r1 is its router ID)")
    print("Mininet CLI; try:\n" + "\n".join(f"  {c}" for c in examples(net))
          + "\n  exit    (stops the network)", flush=True)
    setLogLevel("info")         # nodes, net, dump, pingall print through Mininet's log
    try:
        ConcastCLI(net.mn)
    finally:
        setLogLevel("error")


def bmv2_options(ns: argparse.Namespace) -> dict:
    """The BMv2 data plane's options for --p4 FILE (compiled here, by the project's one
    compile step, into build/net-p4/<name>/) and --bmv2-log; {} without either."""
    options = {}
    if ns.p4:
        from concast.controller.p4 import program
        source = Path(ns.p4).resolve()
        print(f"compiling {source} (p4c-bm2-ss) ...", flush=True)
        options["program"] = program.compile_program(source, tools.BUILD / "net-p4" / source.stem)
    if ns.bmv2_log:
        options["log"] = True
    return options


def _stop_on_sigterm(*_):
    raise KeyboardInterrupt     # unwinds through `finally: net.stop()`


def main(argv: list[str] | None = None) -> int:
    p = parser()
    ns = p.parse_args(argv)
    if ns.script and not Path(ns.script).is_file():
        p.error(f"--script {ns.script}: no such file")
    if (ns.p4 or ns.bmv2_log) and (ns.dataplane or DEFAULT_DATAPLANE) != "bmv2":
        p.error("--p4 and --bmv2-log run on BMv2 routers: give --dataplane bmv2")
    if ns.p4 and not Path(ns.p4).is_file():
        p.error(f"--p4 {ns.p4}: no such file")
    if ns.p4 or ns.bmv2_log:
        why = prereq.commands("p4c-bm2-ss", "simple_switch_grpc")
        if why:
            return prereq.report("concast net up", f"{why} (BMv2 and p4c, docs/dataplane-bmv2.md)")
    try:
        options = bmv2_options(ns)
    except RuntimeError as e:                   # p4c-bm2-ss refused the program
        print(f"concast net up: {e}", file=sys.stderr)
        return 1
    try:
        desc = build(ns)
        desc.dataplane_options = options
        why = cluster_problem(ns, desc)
        if why:
            raise ValueError(why)
    except (ValueError, TypeError) as e:
        print(f"concast net up: {e}", file=sys.stderr)
        return 2
    except LookupError as e:                    # --links netem on a kernel without it
        return prereq.report("concast net up", str(e))
    if ns.write_json:
        print(f"saved {desc.save(ns.write_json)}")
    if ns.dry_run:
        print(desc)
        return 0
    why = prereq.first(prereq.root("Mininet, network namespaces"),
                       None if ns.no_daemons else prereq.built("concast-routerd", "concast-hostd"))
    if why:
        return prereq.report("concast net up", why)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    os.environ["PATH"] = on_path(os.environ.get("PATH", ""))   # the hosts inherit it
    print(f"starting {desc} ...", flush=True)
    try:
        net = desc.start()          # stops what it built if interrupted half way
    except KeyboardInterrupt:
        return 130
    except RuntimeError as e:       # a cluster server unreachable, a part not built for it
        if not ns.servers:
            raise
        print(f"concast net up: {e}", file=sys.stderr)
        return 1
    if ns.servers:
        print(f"servers: {net.describe_placement()}", flush=True)
    captures: list = []
    try:
        if not ns.no_daemons:
            rd, hd = net.start_concast(hold=ns.hold)
            print(f"routerd on {len(rd)} routers, hostd on {len(hd)} hosts", flush=True)
        print(summary(net, ns.describe), flush=True)
        captures = start_captures(net, ns.pcap, ns.pcap_dir)
        if ns.script:
            return run_script(net, ns)
        if ns.duration is not None or not sys.stdin.isatty():
            print("up; Ctrl-C stops it", flush=True)
            threading.Event().wait(ns.duration)
            return 0
        interactive(net)
        return 0
    except KeyboardInterrupt:
        return 130
    except tools.MissingTool as e:                     # a daemon not built
        return prereq.report("concast net up", str(e))
    except TimeoutError as e:                           # a daemon not answering
        print(f"concast net up: {e}", file=sys.stderr)
        return 1
    except ValueError as e:                             # --pcap naming no host
        print(f"concast net up: {e}", file=sys.stderr)
        return 2
    finally:
        for c in captures:
            c.stop()
        net.stop()
        print("stopped", flush=True)
        if options.get("log"):
            logs = sorted((net.run_dir / "bmv2").glob("*"))
            print("BMv2 logs: " + (", ".join(str(f) for f in logs) or "none written"), flush=True)
        if captures:
            print("captures: " + ", ".join(str(c.path) for c in captures), flush=True)


if __name__ == "__main__":
    sys.exit(main())
