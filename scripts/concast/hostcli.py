"""The `concast` verbs that talk to running daemons (docs/hostd.md, "Command line"):

    concast send --to R --group G [--sport S] [--dport D] VALUES...   through hostd
    concast recv --group G [--spec FILE.wasm] [--count N]             stream what reaches R
    concast spec upload --group G FILE.wasm                           install or replace live
    concast host status|flows|stats [NODE]                            hostd's API
    concast router status|flows|stats NODE                            routerd's management socket
    concast router table NODE [--table NAME]...                       a BMv2 router's P4 tables

NODE is a node name of a running network or a socket path. send, recv and spec upload
find their hostd by themselves when run inside a host's namespace; elsewhere they take
--node HOST or --socket PATH. Exit status (docs/cli.md): 0 done, 1 refused or failed, 2 bad
command line, 3 no network running (no hostd or routerd answers at the node).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from concast import prereq, tools
from concast.argtypes import group_id, hidden_alias, key_id, port, positive, receiver_addr

QUERIES = ("status", "flows", "stats")
ROUTER_QUERIES = (*QUERIES, "table")


class BadUsage(Exception):
    """A command line that cannot be right (exit 2)."""


class NoDaemon(Exception):
    """No hostd or routerd answers where the command looked: a network is not up (exit 3, a
    missing prerequisite, docs/cli.md)."""


START_HINT = "start a network first (sudo concast net up tree) or give --socket PATH"


def _not_found(e: Exception) -> Exception:
    """locate.NotFound: several networks match (a usage error) or none is running."""
    return BadUsage(str(e)) if str(e).startswith("several") else NoDaemon(f"{e}; {START_HINT}")


def parse_values(words: list[str], default_key: int, as_hex: bool) -> list[tuple[str, bytes]]:
    """VALUES -> [(label, UDP payload)]: `V` or `KEY=V` (aggregate payloads), or hex."""
    from concast.hosts import aggregate
    out = []
    for w in words:
        if as_hex:
            try:
                out.append((w, bytes.fromhex(w)))
            except ValueError:
                raise BadUsage(f"value {w!r} is not hex") from None
            continue
        key, _, val = w.rpartition("=")
        try:
            k = int(key, 0) if key else default_key
            v = int(val, 0)
        except ValueError:
            raise BadUsage(f"value {w!r} is not VALUE or KEY=VALUE with integers") from None
        if not 0 <= k <= 0xFFFFFFFF or not -(1 << 63) <= v < (1 << 63):
            raise BadUsage(f"value {w!r}: key must fit 32 bits unsigned, value 64 bits signed")
        out.append((f"key={k} value={v}", aggregate.encode(k, v)))
    return out


# --- connecting ----------------------------------------------------------------------------
def add_node_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", help="host of a running network whose hostd to use (default: the "
                                  "host whose namespace this runs in)")
    p.add_argument("--socket", help="hostd's API socket path")
    p.add_argument("--run", help="run tag, when several networks are running")


def connect(ns: argparse.Namespace):
    from concast.hosts import Client, locate
    try:
        path = locate.hostd_socket(ns.socket or ns.node, ns.run)
    except locate.NotFound as e:
        raise _not_found(e) from None
    ns.socket_path = Path(path)
    try:
        return Client(path)
    except OSError as e:
        raise NoDaemon(f"no hostd answers at {path} ({e.strerror or e}); {START_HINT}") from None


def show_event(ev: dict) -> None:
    print("event " + json.dumps(ev, sort_keys=True), flush=True)


# --- send ----------------------------------------------------------------------------------
def receiver_or_host(text: str) -> str:
    """--to: an IPv4 address, or a host's name in a running network (checked at run time)."""
    if text[:1].isdigit():
        return receiver_addr(text)
    if not text.replace("-", "").replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(f"{text!r} is neither an IPv4 address nor a host name")
    return text


def resolve_receiver(to: str, run: str | None) -> str:
    """A host name -> its address, from the host's config in the running network's run
    folder (<run dir>/hosts/<host>.json beside its hostd socket)."""
    if to[:1].isdigit():
        return to
    from concast.hosts import locate
    try:
        sock = Path(locate.hostd_socket(to, run))
    except locate.NotFound as e:
        raise _not_found(e) from None
    try:
        return json.loads(sock.with_suffix(".json").read_text())["addr"]
    except (OSError, ValueError, KeyError):
        raise NoDaemon(f"--to {to}: no address for it next to {sock}; {START_HINT}") from None


def cmd_send(ns: argparse.Namespace) -> int:
    from concast.hosts import HostdError
    ns.to = resolve_receiver(ns.to, ns.run)
    stream = ns.values == ["-"]
    batch = [] if stream else parse_values(ns.values, ns.key, ns.hex)
    rejected = 0
    with connect(ns) as c:
        if not ns.no_join:
            try:
                r = c.join(ns.to, ns.group, selector=ns.selector, dport=ns.dport)
            except HostdError as e:
                print(f"concast send: join refused: {e}", file=sys.stderr)
                return 1
            if r["state"] == "joining":
                ev = c.wait_settled(ns.to, ns.group, ns.timeout)
                if ev is None:
                    print(f"note: still joining after {ns.timeout} s; sending unmerged", flush=True)
                else:
                    show_event(ev)
            else:
                print(f"joined already: state={r['state']}", flush=True)
        print("ready", flush=True)

        def send_all(items: list[tuple[str, bytes]]) -> int:
            bad = 0
            for label, payload in items:
                try:
                    r = c.send(ns.to, ns.group, payload, ns.sport, ns.dport, ns.ttl)
                    why = f" ({r['why']})" if r.get("why") else ""
                    print(f"sent {label} as={r['sent']}{why}", flush=True)
                except HostdError as e:
                    print(f"rejected {label}: {e}", file=sys.stderr, flush=True)
                    bad += 1
            while (ev := c.next_event(0)) is not None:
                show_event(ev)
            return bad

        if stream:
            for line in sys.stdin:
                try:
                    items = parse_values(line.split(), ns.key, ns.hex)
                except BadUsage as e:
                    print(f"rejected line {line.strip()!r}: {e}", file=sys.stderr, flush=True)
                    rejected += 1
                    continue
                rejected += send_all(items)
        else:
            rejected += send_all(batch)
        if ns.leave and not ns.no_join:
            c.leave(ns.to, ns.group)
            print("left", flush=True)
    return 1 if rejected else 0


# --- specs and their parameters ----------------------------------------------------------
def spec_path(spec: str) -> Path:
    """A spec given as a file (relative to where the command runs) or a built spec's name
    (`sum`, `max`, ...: build/mergespecs/NAME.wasm)."""
    p = Path(spec)
    if p.is_file():
        return p
    if "/" not in spec and not spec.endswith(".wasm"):
        return tools.spec_module(spec)          # MissingTool (exit 3) when not built
    raise BadUsage(f"{spec}: no such file")


def spec_params(params: list[str] | None, round_timeout: float | None) -> list[str]:
    """--param K=V ... and --round-timeout S as the spec's key=value parameters."""
    out = list(params or [])
    for item in out:
        key, eq, value = item.partition("=")
        if not eq or not key or not value or any(c.isspace() for c in item):
            raise BadUsage(f"--param {item!r}: expected KEY=VALUE")
    if round_timeout is not None:
        out.append(f"timeout_us={round(round_timeout * 1e6)}")
    return out


def spec_bytes(spec: str, params: list[str]) -> bytes:
    """The module to install: the spec, with `params` embedded (concast-spec embed) so every
    node on the flow's tree runs it with them (mergespecs/README.md, docs/mergespec-abi.md §2)."""
    import tempfile
    path = spec_path(spec)
    if not params:
        try:
            return path.read_bytes()
        except OSError as e:
            raise BadUsage(f"{spec}: {e.strerror}") from None
    tool = tools.rust_binary("concast-spec")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "spec.wasm"
        r = subprocess.run([str(tool), "embed", str(path), *[a for p in params
                                                              for a in ("--param", p)],
                            "--output", str(out)], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise BadUsage(f"cannot embed {' '.join(params)} in {spec}: "
                           f"{(r.stderr or r.stdout).strip()}")
        return out.read_bytes()


def add_spec_param_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="a spec parameter to embed before installing (repeatable), e.g. "
                        "fanin=2 (mergespecs/README.md lists each spec's); default none")
    p.add_argument("--round-timeout", type=positive, metavar="S",
                   help="sum/min/max/count: forward a partial round this many seconds after "
                        "its first datagram (embeds timeout_us; the spec's default is 0.01 s, "
                        "too short for values typed by hand: use e.g. 5)")


# --- recv ----------------------------------------------------------------------------------
def node_names(socket: Path | None) -> dict[str, str]:
    """Address -> node name in the network a hostd socket belongs to (from the configs in its
    run folder: <run dir>/hosts/H.json, <run dir>/routers/R.json); {} elsewhere."""
    names: dict[str, str] = {}
    if socket is None:
        return names
    run_dir = Path(socket).parent.parent
    for kind in ("routers", "hosts"):
        for cfg in sorted((run_dir / kind).glob("*.json")):
            try:
                data = json.loads(cfg.read_text())
            except (OSError, ValueError):
                continue
            for a in [data.get("addr"), *data.get("addresses", [])]:
                if a:
                    names.setdefault(str(a), cfg.stem)
    return names


def describe_datagram(ev: dict, names: dict[str, str] | None = None) -> str:
    """One line per datagram. `src` is the datagram's IPv4 source; after R's own final merge
    that is R, so `from` names the nodes it came from on the wire (hostd's "from")."""
    from concast.hosts import aggregate
    names = names or {}

    def named(a: str) -> str:
        return f"{a}({names[a]})" if a in names else a
    head = f"datagram kind={ev['kind']} src={named(ev['src'])}"
    if ev.get("from"):
        head += f" from={','.join(named(a) for a in ev['from'])}"
    head += f" ttl={ev['ttl']}"
    if "dport" in ev:
        head += f" dport={ev['dport']}"
    c = aggregate.decode(bytes.fromhex(ev["payload"]))
    if c:
        return f"{head} key={c.key} count={c.count} value={c.value}"
    return f"{head} payload={ev['payload']}"


def cmd_recv(ns: argparse.Namespace) -> int:
    from concast.hosts import HostdError
    spec = None
    params = spec_params(ns.param, ns.round_timeout)
    if params and not ns.spec:
        raise BadUsage("--param/--round-timeout set a spec's parameters: give --spec too")
    if ns.spec:
        spec = spec_bytes(ns.spec, params)
    with connect(ns) as c:
        try:
            if spec is not None:
                r = c.install_spec(ns.group, spec)
                print(f"spec {r['spec'][:16]} installed for group {ns.group}"
                      f"{' (replaced)' if r['replaced'] else ''}", flush=True)
            c.subscribe(ns.group, ns.port)
        except HostdError as e:
            print(f"concast recv: {e}", file=sys.stderr)
            return 1
        print("ready", flush=True)
        names = node_names(getattr(ns, "socket_path", None))
        got = 0
        deadline = time.monotonic() + ns.timeout if ns.timeout else None
        try:
            while ns.count is None or got < ns.count:
                left = 3600.0 if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    break
                ev = c.next_event(left)
                if ev is None:
                    continue
                if ev["event"] == "datagram":
                    got += 1
                    print(json.dumps(ev, sort_keys=True) if ns.json
                          else describe_datagram(ev, names), flush=True)
                else:
                    show_event(ev)
        except KeyboardInterrupt:
            pass
    if ns.count is not None and got < ns.count:
        print(f"concast recv: {got} of {ns.count} datagrams before the timeout", file=sys.stderr)
        return 1
    return 0


# --- spec upload ---------------------------------------------------------------------------
def spec_upload(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="concast spec upload",
                                description="install a merge spec for a group at this receiver's "
                                            "hostd, or replace the one in force (live)")
    p.add_argument("--group", type=group_id, required=True, help="the concast group G")
    p.add_argument("file", help="the merge spec: a .wasm file or a built spec's name (sum)")
    add_spec_param_options(p)
    add_node_options(p)
    ns = p.parse_args(argv)
    return run_guarded(p, lambda: _upload(ns))


def _upload(ns: argparse.Namespace) -> int:
    from concast.hosts import HostdError
    data = spec_bytes(ns.file, spec_params(ns.param, ns.round_timeout))
    with connect(ns) as c:
        try:
            r = c.install_spec(ns.group, data)
        except HostdError as e:
            print(f"concast spec upload: {e}", file=sys.stderr)
            return 1
    state = "replaced the spec in force" if r["replaced"] else "installed"
    print(f"group {ns.group}: {state}: sha256 {r['spec']} ({r['children']} children told)")
    return 0


# --- host / router queries -----------------------------------------------------------------
def cmd_host(ns: argparse.Namespace) -> int:
    ns.socket, ns.node = (ns.target, None) if ns.target and "/" in ns.target else (None, ns.target)
    with connect(ns) as c:
        print(json.dumps(c.request(ns.what), indent=1, sort_keys=True))
    return 0


def cmd_router(ns: argparse.Namespace) -> int:
    from concast.controller import routerdmgmt as routerd
    from concast.hosts import locate
    try:
        path = locate.routerd_socket(ns.target, ns.run)
    except locate.NotFound as e:
        raise _not_found(e) from None
    if ns.what == "table":
        if not Path(path).with_suffix(".json").exists():    # the config, not routerd
            raise NoDaemon(f"no router config at {Path(path).with_suffix('.json')}; "
                           f"{START_HINT}")
        return cmd_router_table(ns, Path(path))
    try:
        reply = routerd.query(path, ns.what)
    except (FileNotFoundError, ConnectionRefusedError) as e:
        raise NoDaemon(f"no routerd answers at {path} ({e.strerror or e}); "
                       f"{START_HINT}") from None
    except OSError as e:
        raise RuntimeError(f"cannot reach routerd at {path}: {e}") from None
    if ns.what == "stats":
        add_dataplane_stats(reply, Path(path), getattr(ns, "election_id", None))
    print(json.dumps(reply, indent=1, sort_keys=True))
    return 1 if "error" in reply else 0


def cmd_router_table(ns: argparse.Namespace, path: Path) -> int:
    """`concast router table NODE`: a BMv2 router's table entries, read without arbitration
    (or as a backup with --election-id), never as the primary."""
    from concast.controller.p4 import readout
    cfg = readout.router_config(path)
    if not cfg or cfg.get("dataplane") != "bmv2" or not cfg.get("p4_switch"):
        raise BadUsage(f"{ns.target} is not a BMv2 router ({path.with_suffix('.json')} names "
                       f"no p4_switch); `router table` reads P4 tables")
    try:
        rows = readout.read_tables(cfg, ns.table, ns.election_id)
    except ValueError as e:
        raise BadUsage(str(e)) from None
    except Exception as e:      # grpc or P4Runtime: the switch is gone or refuses
        raise RuntimeError(f"cannot read {cfg['p4_switch']}: {e}") from None
    print(json.dumps(rows, indent=1) if ns.json else readout.format_rows(rows))
    return 0


def add_dataplane_stats(reply: dict, socket: Path, election_id: int | None = None) -> None:
    """A router's stats also carry its data plane's own counters: on OVS the port counters
    (what OVS received and never forwarded or diverted is counted nowhere routerd can see),
    on BMv2 the P4 program's counters, read over a read-only P4Runtime connection."""
    from concast.controller.p4 import readout
    cfg = readout.router_config(socket) or {}
    if cfg.get("dataplane") == "bmv2" and cfg.get("p4_switch"):
        try:
            reply["dataplane"] = readout.read_stats(cfg, election_id)
        except Exception as e:      # grpc or P4Runtime: reported beside routerd's counters
            reply["dataplane"] = {"p4_switch": cfg["p4_switch"], "error": str(e)}
        return
    from concast.controller.ovs import ofctl, portstats
    bridge = portstats.bridge_of(socket)
    if bridge:
        try:
            reply["dataplane"] = portstats.dataplane_stats(bridge, reply.get("counters"))
        except (ofctl.OvsError, OSError, subprocess.SubprocessError) as e:
            reply["dataplane"] = {"bridge": bridge, "error": str(e)}


# --- wiring --------------------------------------------------------------------------------
def run_guarded(p: argparse.ArgumentParser, fn) -> int:
    try:
        return fn()
    except BadUsage as e:
        p.error(str(e))         # exits 2 with the usage line
    except tools.MissingTool as e:      # a binary or spec not built: exit 3
        return prereq.report(p.prog, str(e))
    except NoDaemon as e:               # no network up: exit 3
        return prereq.report(p.prog, str(e))
    except (RuntimeError, TimeoutError, ConnectionError) as e:
        print(f"{p.prog}: {e}", file=sys.stderr)
        return 1
    return 1


def add_verbs(sub) -> None:
    """Registers send, recv, host and router on the `concast` parser's subcommands."""
    s = sub.add_parser("send", help="send values to a concast receiver through hostd",
                       description="Join (R, G) through this host's hostd and send each VALUE as "
                                   "one datagram (aggregate payloads: VALUE or KEY=VALUE; `-` reads "
                                   "lines of VALUES from stdin and sends each line as it comes).")
    s.add_argument("--to", type=receiver_or_host, required=True, metavar="R",
                   help="the receiver: its address, or its host name in a running network")
    s.add_argument("--group", type=group_id, required=True, metavar="G",
                   help="the concast group (the Concast ID option's G)")
    s.add_argument("--sport", type=port, default=4000, help="UDP source port (default 4000)")
    s.add_argument("--dport", type=port, default=5000,
                   help="UDP destination port at R (default 5000)")
    s.add_argument("--ttl", type=int, choices=range(1, 256), metavar="1..255", default=64,
                   help="IPv4 TTL of the datagrams (default 64)")
    s.add_argument("--key", type=key_id, default=1, help="key of bare VALUES (default 1)")
    s.add_argument("--selector", help="flow selector PROTO/DPORT (default 17/<dport>)")
    s.add_argument("--hex", action="store_true", help="VALUES are hex UDP payloads")
    s.add_argument("--no-join", action="store_true", help="send without joining (unmerged)")
    s.add_argument("--leave", action="store_true", help="leave the flow afterwards")
    hidden_alias(s, "--wait", s.add_argument(
        "--timeout", type=positive, default=5.0, metavar="S",
        help="seconds to wait for the join before sending unmerged (default 5)"))
    add_node_options(s)
    s.add_argument("values", nargs="+", metavar="VALUES",
                   help="what to send: numbers (KEY:VALUE or VALUE, one datagram each), or hex "
                        "UDP payloads with --hex")
    s.set_defaults(func=lambda ns: run_guarded(s, lambda: cmd_send(ns)))

    r = sub.add_parser("recv", help="stream what reaches this receiver for a group",
                       description="Optionally install a merge spec for G, then print every "
                                   "datagram of G that reaches this host (after its final merge).")
    r.add_argument("--group", type=group_id, required=True, metavar="G",
                   help="the concast group to receive")
    r.add_argument("--spec", metavar="FILE.wasm|NAME",
                   help="install (or replace) this merge spec first: a .wasm file (relative to "
                        "here) or a built spec's name (sum, max, gather, ...); default none")
    add_spec_param_options(r)
    r.add_argument("--port", type=port, help="also deliver plain UDP to this port (senders "
                                                 "that fell back to unicast)")
    r.add_argument("--count", type=int, help="stop after this many datagrams")
    r.add_argument("--timeout", type=positive, help="stop after this many seconds")
    r.add_argument("--json", action="store_true", help="print events as JSON")
    add_node_options(r)
    r.set_defaults(func=lambda ns: run_guarded(r, lambda: cmd_recv(ns)))

    h = sub.add_parser("host", help="ask a hostd for its status, flows or counters")
    h.add_argument("what", choices=QUERIES, help="what to ask for")
    h.add_argument("target", nargs="?", metavar="NODE", help="host name or socket path")
    h.add_argument("--run", help="run tag, when several networks are running")
    h.set_defaults(func=lambda ns: run_guarded(h, lambda: cmd_host(ns)))

    o = sub.add_parser("router", help="ask a routerd for its status, flows or counters; "
                                      "a BMv2 router's P4 tables",
                       description="status, flows, stats: routerd's answers as JSON (stats adds "
                                   "the data plane's counters: OVS ports, BMv2's P4 counters). "
                                   "table: a BMv2 router's P4 table entries, read over "
                                   "P4Runtime without becoming its primary controller.")
    o.add_argument("what", choices=ROUTER_QUERIES, help="what to ask for")
    o.add_argument("target", metavar="NODE", help="router name or socket path")
    o.add_argument("--run", help="run tag, when several networks are running")
    o.add_argument("--table", action="append", metavar="NAME",
                   help="table: only this table (full or last name, e.g. concast_flows; "
                        "repeatable; default every table)")
    o.add_argument("--json", action="store_true",
                   help="table: print the entries as JSON instead of one line each")
    o.add_argument("--election-id", type=int, metavar="N",
                   help="BMv2 reads (table, stats): arbitrate as a P4Runtime backup with this "
                        "election id (default none: read without arbitrating)")
    o.set_defaults(func=lambda ns: run_guarded(o, lambda: cmd_router(ns)))
