"""Every parameter of an ACK-study run, with the paper's values as defaults (`full()`) and
a scaled-down preset (`quick()`) that CI and `make run` use."""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

from concast.argtypes import add_dataplane, comma_list, hidden_alias
from concast.topologies.experiments.ackstudy import paper
from concast.topologies.experiments.ackstudy.faults import KillPlan, parse_plan

ENVS = ("low-loss", "high-loss")


@dataclass
class Settings:
    # the network (topologies/transitstub.py; defaults: the paper's 220 routers)
    topo_seed: int = 1
    transit_nodes: int = 4
    stubs_per_transit: int = 6
    stub_nodes: int = 9
    clients: int = 200
    link_delay_ms: float = 10.0
    core_mbps: float = 100.0
    edge_mbps: float = 10.0
    queue_pkts: int = 20
    topology: str | None = None          # a saved JSON topology instead of generating one
    dataplane: str = "linux"
    # the workload
    page_bytes: int = 4096
    tcp_cc: str = "reno"
    mss: int = 1000                      # ns-2's default packet size
    initcwnd: int = 1                    # ns-2's default initial window
    quickack: bool = True                # ns-2's TCPSink ACKs every packet
    fetch_timeout_s: float = 60.0
    # cross traffic per environment
    udp_flows: int = 10
    udp_mbps: float = 0.5                # per flow
    tcp_flows: int = 40                  # high-loss only
    cross_tcp_to: str = "random"         # random stub pairs, "server-stub" or "server"
    # the clients' hostd bundles its own ACKs first (paper 4.2.1); off = routers alone
    sender_bundling: bool = True
    warmup_s: float = 3.0
    # the hosts' and routers' control sockets asked this many at a time (1 = one after another)
    control_workers: int = 32
    # the sweep
    envs: tuple[str, ...] = ENVS
    delays_ms: tuple[float, ...] = paper.DELAYS_MS
    seeds: tuple[int, ...] = (1, 2, 3)
    modes: tuple[str, ...] = ("on", "off")
    max_total_delay_ms: float = 10_000.0  # the largest hostd takes: "unbounded" at this scale
    settle_s: float = 1.0                # after the last page: final ACKs, bundles flushed
    # receiver-given parameters embedded in the multiplex spec (KEY=VALUE), e.g.
    # fold_pending=always to measure queue access against the daemon's read batch
    spec_params: tuple[str, ...] = ()
    # fidelity (fidelity.py): runs that broke an invariant are left out of Table 1 unless
    # kept, and rerun up to this many times
    keep_unfaithful: bool = False
    retry_unfaithful: int = 0
    # a crash in every run (faults.py): routerd on N routers killed T s into the fetches
    kill_routerd: KillPlan | None = None
    # the servers the network is spread over (docs/cluster.md); () = this machine only
    servers: tuple[str, ...] = ()
    quick: bool = False

    @property
    def routers(self) -> int:
        return self.transit_nodes * (1 + self.stubs_per_transit * self.stub_nodes)

    @property
    def runs(self) -> int:
        return len(self.envs) * len(self.delays_ms) * len(self.seeds) * len(self.modes)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["routers"] = self.routers
        return d


def full() -> Settings:
    return Settings()


def quick() -> Settings:
    """A 2 x (2 stubs x 3 routers) network with 24 clients and two delays: the paper's
    question in small, in about a minute."""
    return Settings(transit_nodes=2, stubs_per_transit=2, stub_nodes=3, clients=24,
                    udp_flows=3, tcp_flows=6, delays_ms=(0, 10), seeds=(1,), warmup_s=2.0,
                    quick=True)


def _envs(text: str) -> tuple[str, ...]:
    vals = tuple(text.split(","))
    bad = [v for v in vals if v not in ENVS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown environment(s) {bad}; known: {', '.join(ENVS)}")
    return vals


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true",
                   help="scaled-down run: 14 routers, 24 clients, delays 0 and 10 ms, one seed")
    p.add_argument("--clients", type=int, help="web clients (default 200)")
    p.add_argument("--stub-nodes", type=int, help="routers per stub domain (default 9)")
    p.add_argument("--stubs-per-transit", type=int, help="stub domains per transit router (6)")
    p.add_argument("--transit-nodes", type=int, help="transit routers (4)")
    p.add_argument("--topology", help="a saved topology JSON (concast net up --save) instead")
    p.add_argument("--topo-seed", type=int, help="seed of the generated topology (1)")
    p.add_argument("--delays", type=comma_list(float, 0, 10_000, "delays (ms)"), help="MaxLocalDelay values in ms (0,1,5,10,20,50)")
    p.add_argument("--envs", type=_envs, help="low-loss,high-loss")
    p.add_argument("--seeds", type=comma_list(int, what="integers"), help="seeds of the cross traffic (1,2,3)")
    p.add_argument("--modes", type=lambda t: tuple(t.split(",")), help="on,off")
    p.add_argument("--tcp-flows", type=int, help="long-lived TCP cross flows, high-loss (40)")
    p.add_argument("--cross-tcp-to", choices=["random", "server-stub", "server"],
                   help="where the high-loss TCP cross flows go: random stub pairs (default), "
                        "all toward the cross host in the server's stub domain, or all to the "
                        "server itself (loading every link the ACKs converge on)")
    p.add_argument("--sender-bundling", choices=["on", "off"],
                   help="whether the clients' hostd bundles its own ACKs before the routers "
                        "(paper 4.2.1; default on) or sends each alone (routers only)")
    p.add_argument("--udp-flows", type=int, help="UDP cross flows, both environments (10)")
    p.add_argument("--udp-mbps", type=float, help="rate of each UDP cross flow (0.5)")
    p.add_argument("--page-bytes", type=int, help="page size (4096)")
    hidden_alias(p, "--cc", p.add_argument(
        "--tcp-cc", choices=["reno", "cubic"],
        help="the kernel TCP's congestion control on the web clients and servers (reno)"))
    p.add_argument("--spec-param", dest="spec_params", action="append", metavar="KEY=VALUE",
                   help="a multiplex spec parameter embedded in the receiver's spec "
                        "(repeatable; see docs/multiplex.md), e.g. fold_pending=always")
    add_dataplane(p, "router data plane (linux: kernel forwarding + tc diversion; ovs; bmv2 is "
                     "not offered: the study has never run on it)", choices=("linux", "ovs"))
    p.add_argument("--keep-unfaithful", action="store_true",
                   help="count runs that broke a fidelity bound in Table 1 too (default: "
                        "they are in runs.csv, drawn hollow, and left out of the table)")
    p.add_argument("--retry-unfaithful", type=int, metavar="N",
                   help="rerun a run that broke a fidelity bound up to N times (default 0)")
    p.add_argument("--kill-routerd", type=parse_plan, metavar="N@T",
                   help="in every run, kill -9 routerd on N routers carrying the multiplex "
                        "flow (seeded choice) T seconds into the page fetches; their "
                        "diversion is removed at once and routerd restarted after the run "
                        "(docs/reliability.md)")
    p.add_argument("--control-workers", type=int, metavar="N",
                   help="ask the hosts' and routers' control sockets N at a time between runs "
                        "(default 32; 1 = one after another, as before session 13)")
    p.add_argument("--servers", metavar="A,B,...",
                   help="spread the network over these servers with Mininet Cluster Edition "
                        "(stub domains whole; docs/cluster.md); the placement goes into "
                        "topology.json and meta.json")


def from_args(ns: argparse.Namespace) -> Settings:
    s = quick() if ns.quick else full()
    for key in ("clients", "stub_nodes", "stubs_per_transit", "transit_nodes", "topology",
                "topo_seed", "envs", "seeds", "modes", "tcp_flows", "udp_flows", "udp_mbps",
                "page_bytes", "tcp_cc", "dataplane", "cross_tcp_to", "kill_routerd"):
        v = getattr(ns, key, None)
        if v is not None:
            setattr(s, key, v)
    if getattr(ns, "control_workers", None) is not None:
        if ns.control_workers < 1:
            raise SystemExit("concast exp ack-study: --control-workers must be 1 or more")
        s.control_workers = ns.control_workers
    if getattr(ns, "keep_unfaithful", False):
        s.keep_unfaithful = True
    if getattr(ns, "retry_unfaithful", None) is not None:
        if ns.retry_unfaithful < 0:
            raise SystemExit("concast exp ack-study: --retry-unfaithful must be 0 or more")
        s.retry_unfaithful = ns.retry_unfaithful
    if ns.delays is not None:
        s.delays_ms = ns.delays
    if getattr(ns, "sender_bundling", None) is not None:
        s.sender_bundling = ns.sender_bundling == "on"
    if getattr(ns, "spec_params", None):
        bad = [p for p in ns.spec_params if "=" not in p]
        if bad:
            raise SystemExit(f"concast exp ack-study: --spec-param wants KEY=VALUE, got {bad}")
        s.spec_params = tuple(ns.spec_params)
    if getattr(ns, "servers", None):
        from concast.topologies.cluster.serverset import parse
        try:
            s.servers = tuple(parse(ns.servers))
        except ValueError as e:
            raise SystemExit(f"concast exp ack-study: {e}")
    bad = [m for m in s.modes if m not in ("on", "off")]
    if bad:
        raise SystemExit(f"concast exp ack-study: unknown mode(s) {bad}; use on,off")
    if s.clients < 1:
        raise SystemExit("concast exp ack-study: --clients must be at least 1")
    return s
