"""The study's network, built once and reused by every run: a transit-stub network with
emulated links (topologies/transitstub.py, topologies/links.py), routerd on every router,
hostd on every host, the page server on sv, cross-traffic hosts x1..xN (one per stub
domain), and the switches between runs (multiplexing on with a MaxLocalDelay, or off)."""
from __future__ import annotations

import time
from pathlib import Path

from concast.progress import sayer
from concast.topologies.experiments.ackstudy import faults, fidelity, hostactions, mplexctl, phases
from concast.topologies.experiments.ackstudy.runner import combined
from concast.topologies.experiments.ackstudy.settings import Settings

WEB_PORT = 8080
SERVER = "sv"


say = sayer("ack-study")


def describe(s: Settings):
    """The unstarted network: generated (seeded) or loaded, plus one cross-traffic host on
    a router of each stub domain (they never fetch pages, so they never send ACKs to sv)."""
    import random

    from concast.topologies.net import ConcastNet
    from concast.topologies.transitstub import transit_stub
    if s.topology:
        net = ConcastNet.load(s.topology, dataplane=s.dataplane)
    else:
        core = {"delay": f"{s.link_delay_ms:g}ms", "bw": s.core_mbps, "max_queue_size": s.queue_pkts}
        edge = {"delay": f"{s.link_delay_ms:g}ms", "bw": s.edge_mbps, "max_queue_size": s.queue_pkts}
        net = transit_stub(dataplane=s.dataplane, seed=s.topo_seed,
                           transit_nodes=s.transit_nodes, stubs_per_transit=s.stubs_per_transit,
                           stub_nodes=s.stub_nodes, clients=s.clients, core=core, edge=edge,
                           access=edge)
    meta = getattr(net, "meta", {}) or {}
    domains = meta.get("domains", {})
    stubs: dict[str, list[str]] = {}
    for router, dom in sorted(domains.items()):
        if not str(dom).startswith("T"):
            stubs.setdefault(str(dom), []).append(router)
    rng = random.Random(s.topo_seed)
    cross = []
    if not any(h.startswith("x") for h in net.topo.hosts):
        edge_params = next(iter(net.topo.hosts.values())).params
        for i, (dom, routers) in enumerate(sorted(stubs.items()), start=1):
            name = f"x{i}"
            net.host(name, router=rng.choice(sorted(routers)), **edge_params)
            cross.append(name)
    else:
        cross = [h for h in net.topo.hosts if h.startswith("x")]
    host_domain = {h: str(domains.get(spec.router, spec.router))
                   for h, spec in net.topo.hosts.items()}
    return net, cross, host_domain


class Testbed:
    def __init__(self, s: Settings, out: Path) -> None:
        self.s = s
        self.out = out
        self.net = None
        self.server = None
        self.cross = None
        self.cross_report: dict = {}
        self.actions = None     # hostactions: on one machine or through each host's server

    # --- start and stop ------------------------------------------------------------------
    def start(self) -> "Testbed":
        from concast.topologies.workload.tcpsettings import TcpSettings
        s = self.s
        t0 = time.monotonic()
        desc, self.cross_hosts, self.host_domain = describe(s)
        self.clients = [h for h in desc.topo.hosts if h.startswith("c")]
        desc.save(self.out / "topology.json")
        t = desc.topo
        say(f"starting {len(t.routers)} routers ({s.dataplane}), {len(t.hosts)} hosts, "
            f"{len(t.links)} router links, every link emulated "
            f"({s.link_delay_ms:g} ms, core {s.core_mbps:g} / edge {s.edge_mbps:g} Mbit/s, "
            f"{s.queue_pkts}-packet drop-tail)")
        if s.servers:
            desc = desc.servers(list(s.servers))
            desc.save(self.out / "topology.json")       # with the placement (meta.cluster)
            if s.kill_routerd:
                raise ValueError("--kill-routerd with --servers: the kill is by a local PID; "
                                 "not built for a cluster")
        self.net = desc.start(run_dir=self.out / "net")
        self.actions = hostactions.for_net(self.net)
        if s.servers:
            say(f"placement: {self.net.describe_placement()}")
        self.start_s = time.monotonic() - t0
        say(f"network up in {self.start_s:.0f} s; starting routerd and hostd")
        t1 = time.monotonic()
        # A long soft-state hold: 220 routers and 200 hosts on two cores miss short refresh
        # deadlines, and an expiring child tears its branch of the flow down.
        self.net.start_concast(hold=30, timeout=120, hostd_args=(
            [] if s.sender_bundling else ["--no-sender-bundling"]))
        say(f"daemons up in {time.monotonic() - t1:.0f} s")
        self.sv_ip = self.net.ip(SERVER)
        self._no_metrics_cache()
        # The clients' TCP settings never change between runs: applied and recorded once.
        from concast.topologies.workload import tcpsettings
        self.client_tcp = tcpsettings.summarize(self.actions.tcp_apply(
            self.clients, TcpSettings(cc=s.tcp_cc, advmss=s.mss, quickack=s.quickack)))
        self.server = self.actions.page_server(SERVER, WEB_PORT, s.page_bytes, s.topo_seed,
                                               self.out / "server.json",
                                               TcpSettings(cc=s.tcp_cc, initcwnd=s.initcwnd))
        spec = (mplexctl.embed_params(s.spec_params, self.out / "multiplex.wasm")
                if s.spec_params else None)
        mplexctl.receiver_on(self.net, SERVER, spec)
        say(f"page server on {SERVER} ({self.sv_ip}:{WEB_PORT}, {s.page_bytes} bytes); "
            f"{SERVER} unbundles group {mplexctl.GROUP}")
        # Warm-up, before any cross traffic: every client joins once, so every router
        # fetches the multiplex spec over CSP (37 chunks a hop) and caches it by hash.
        t1 = time.monotonic()
        self.warmup_rejoins = mplexctl.senders_on(self.net, self.clients, self.sv_ip, 0,
                                                  s.max_total_delay_ms, timeout=90,
                                                  workers=s.control_workers)
        mplexctl.senders_off(self.net, self.clients, self.sv_ip, s.control_workers)
        self.warmup_s = time.monotonic() - t1
        say(f"warm-up: {len(self.clients)} clients joined (group {mplexctl.GROUP}) in "
            f"{self.warmup_s:.0f} s ({self.warmup_rejoins} re-joins); every router holds the spec")
        return self

    def _no_metrics_cache(self) -> None:
        """Every run starts from the same TCP state: no cached ssthresh or RTT per peer."""
        self.actions.no_metrics_cache(list(self.net.plan.hosts))

    def stop(self) -> None:
        for step in (self.cross_stop, self._stop_server):
            try:
                step()
            except Exception as e:          # keep going: the network must stop
                say(f"while stopping: {e}")
        if self.actions is not None:
            self.actions.close()
        if self.net is not None:
            self.net.stop()
            self.net = None

    def _stop_server(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    # --- cross traffic -------------------------------------------------------------------
    def cross_start(self, env: str, seed: int) -> None:
        from concast.topologies.workload import cross, pairs
        s = self.s
        group = self.host_domain.get
        udp = pairs.choose_pairs(self.net, s.udp_flows, seed=seed, hosts=self.cross_hosts,
                                 group_of=group, reuse=True)
        flows = cross.flows_between(self.net, udp, "udp", rate_mbps=s.udp_mbps, size=1000)
        if env == "high-loss":
            # "server-stub": every TCP flow sends toward the cross host in sv's stub domain;
            # "server": toward sv itself, so its data queues on every link the ACKs converge
            # on, sv's access link included.
            toward = None
            if s.cross_tcp_to == "server":
                toward = [SERVER]
            elif s.cross_tcp_to == "server-stub":
                toward = [h for h in self.cross_hosts if group(h) == group(SERVER)]
                if not toward:
                    raise RuntimeError(f"no cross-traffic host in {SERVER}'s stub domain")
            tcp = pairs.choose_pairs(self.net, s.tcp_flows, seed=seed + 1000,
                                     hosts=self.cross_hosts, dst_hosts=toward, group_of=group,
                                     reuse=True)
            flows += cross.flows_between(self.net, tcp, "tcp", first_id=len(flows))
        self.cross = self.actions.cross_traffic(flows, self.out / f"cross-{env}-{seed}")
        self.cross_env = (env, seed)
        time.sleep(s.warmup_s)

    def cross_stop(self) -> dict:
        if self.cross is None:
            return {}
        report = self.cross.stop()
        self.cross = None
        self.cross_report[f"{self.cross_env[0]}-{self.cross_env[1]}"] = report
        return report

    # --- one run -------------------------------------------------------------------------
    def run(self, mode: str, delay_ms: float) -> dict:
        from concast.topologies.workload import web
        s, net = self.s, self.net
        hosts = self.clients + [SERVER]
        join_s = rejoins = None
        w = s.control_workers
        phase = phases.Phases()
        if mode == "on":
            t0 = time.monotonic()
            # The first join of a sweep fetches the spec over every hop (CSP chunks through
            # 10 ms links and 20-packet queues); routers cache it for later joins.
            rejoins = mplexctl.senders_on(net, self.clients, self.sv_ip, delay_ms,
                                          s.max_total_delay_ms, workers=w)
            join_s = time.monotonic() - t0
        phase("join")
        before = mplexctl.status(net, hosts, w)
        # One snapshot of every link before and one after; the run's lateness starts here.
        emu_before = net.emulator.call("stats", reset_lateness=True, taps=True)
        cpu_before = self.actions.cpu_times()
        late_before = self.lateness_by_class(emu_before["links"])
        links_before = link_totals(emu_before["links"])
        engines_before = self.engine_counters()
        phase("snap_before")
        killer = faults.arm(self, engines_before)          # --kill-routerd (faults.py)
        env, seed = getattr(self, "cross_env", ("none", 0))
        res = self.actions.fetch_all(self.clients, self.sv_ip, WEB_PORT, s.page_bytes,
                                     s.topo_seed, s.fetch_timeout_s,
                                     self.out / "fetch" / f"{env}-{seed}-{mode}-{delay_ms:g}")
        phase("fetch")
        # The last ACKs (of the FIN exchange) leave after the last byte; bundles wait up to
        # MaxLocalDelay at every hop (at most ~12 hops here).
        time.sleep(s.settle_s + 12 * delay_ms / 1000)
        phase("settle")
        after = mplexctl.status(net, hosts, w)
        emu = net.emulator.call("stats", taps=True)
        cpu = fidelity.cpu_shares(cpu_before, self.actions.cpu_times())
        links_after = link_totals(emu["links"])
        late_after = self.lateness_by_class(emu["links"])
        engines_after = self.engine_counters()
        phase("snap_after")
        if mode == "on":
            mplexctl.senders_off(net, self.clients, self.sv_ip, w)
        phase("leave")
        row = measure(res, before, after, self.clients)
        row.update(phase.row())
        row["join_s"], row["rejoins"] = join_s, rejoins
        row.update({f"links_{k}": links_after[k] - links_before[k] for k in LINK_COUNTERS + TAP_COUNTERS})
        row.update(ack_books(row, links_before, links_after))
        row.update(fidelity.measure(emu, late_before, late_after, cpu))
        row.update(fidelity.verdict(row))
        row.update(engine_deltas(engines_before, engines_after))
        # Bundles still open at the end hold ACKs that have not reached R (yet).
        row["routers_open_states_end"] = sum(e.get("open_states", 0)
                                             for e in engines_after.values())
        row.update(faults.settle(killer, row, mode, before[SERVER], after[SERVER]))
        return row

    def engine_counters(self) -> dict[str, dict]:
        """Every router's merge-engine counters for the multiplex flow (`concast router
        flows`), to tell what bundled: the gate, the read batch (`taken`) or the timers;
        with the bundles it holds open (`open_states`) and the frames the kernel dropped
        at its CPU port (`cpu_port_kernel_drops`, every kind; `concast router stats`), to
        tell where ACKs that neither R nor a link accounts for went."""
        from concast import fanout
        from concast.controller import routerdmgmt as routerd

        def ask(r):
            sock = self.net.routerd_socket(r)
            try:
                flows = routerd.query(sock, "flows")["flows"]
                drops = routerd.query(sock, "stats")["counters"].get("cpu_port_kernel_drops", 0)
            except (OSError, ValueError, KeyError):
                return None  # a router that does not answer counts as nothing
            mine = {}
            for f in flows:
                if f.get("group") == mplexctl.GROUP and f.get("engine"):
                    mine = {**f["engine"]["counters"], "open_states": f["engine"]["open_states"]}
            return {**mine, "cpu_port_kernel_drops": drops}
        answers = fanout.each(ask, self.net.plan.routers, self.s.control_workers)
        return {r: a for r, a in answers.items() if a is not None}

    def lateness_by_class(self, links: list[dict]) -> dict:
        return fidelity.lateness_by_class(links, set(self.net.plan.hosts))


def link_totals(links: list[dict]) -> dict:
    """The link emulator's counters summed over every link direction (all traffic: the
    pages, their ACKs and the cross traffic), to tell queue drops from random loss."""
    totals = dict.fromkeys(LINK_COUNTERS + TAP_COUNTERS + LINK_DROP_BOOKS, 0)
    for link in links:
        # frames a host or router sent into its TAP that the emulator never read (a full
        # TAP queue): lost outside the link model; None where the kernel's count was unread
        totals["tap_dropped"] += sum(link.get(end, {}).get("tx_dropped") or 0 for end in ("a", "b"))
        for way in ("ab", "ba"):
            d = link.get(way, {})
            for k in LINK_COUNTERS:
                totals[k] += d.get(k, 0)
            for cause, kinds in d.get("drops", {}).items():
                for kind, n in kinds.items():
                    if f"{cause}_{kind}" in totals:
                        totals[f"{cause}_{kind}"] += n
    return totals


LINK_COUNTERS = ("frames_in", "dropped_queue", "dropped_loss")
TAP_COUNTERS = ("tap_dropped",)
# What the emulator's drops carried, by cause (queue, configured loss, link down) and kind:
# ACK records inside MplexPkts are the ones the books below need.
LINK_DROP_BOOKS = tuple(f"{cause}_{kind}" for cause in ("queue", "loss", "down")
                        for kind in ("mplex_pkts", "mplex_records", "pure_acks", "csp", "other"))


def ack_books(row: dict, links_before: dict, links_after: dict) -> dict:
    """Where every ACK the clients' hostd captured went: unbundled at R, or lost inside an
    MplexPkt that a link dropped (its queue was full, configured loss, or the link was down).
    `acks_unaccounted` is what none of these explain; 0 when the books balance."""
    lost = {cause: links_after[f"{cause}_mplex_records"] - links_before[f"{cause}_mplex_records"]
            for cause in ("queue", "loss", "down")}
    books = {f"acks_lost_link_{cause}": n for cause, n in lost.items()}
    books["acks_unaccounted"] = row["acks_captured"] - row["records_at_r"] - sum(lost.values())
    return books


ENGINE_COUNTERS = ("received", "out", "taken", "dropped", "gate_held", "gate_hold_us",
                   "timer_fires", "cpu_port_kernel_drops")


def engine_deltas(before: dict[str, dict], after: dict[str, dict]) -> dict:
    """Counters summed over routers, as grown during the run (a flow created meanwhile
    starts from zero)."""
    total = dict.fromkeys(ENGINE_COUNTERS, 0)
    for r, a in after.items():
        b = before.get(r, {})
        for k in ENGINE_COUNTERS:
            d = a.get(k, 0) - b.get(k, 0)
            total[k] += d if d >= 0 else a.get(k, 0)
    return {f"engine_{k}": v for k, v in total.items()}


def measure(fetch: dict, before: dict, after: dict, clients: list[str]) -> dict:
    """One row of runs.csv from the fetcher's result and two `mplex status` snapshots."""
    summ = fetch["summary"]
    rb = mplexctl.receiver_counters(before[SERVER])
    ra = mplexctl.receiver_counters(after[SERVER])
    records, bundled, pkts = combined(rb.get("bundle_sizes", {}), ra.get("bundle_sizes", {}))
    captured = sum(mplexctl.sender_acks(after[c]) - mplexctl.sender_acks(before[c])
                   for c in clients)
    comp = summ["completion_ms"]
    return {
        "clients": summ["clients"], "completed": summ["completed"], "failed": summ["failed"],
        "intact": sum(1 for r in fetch["clients"] if r.get("sha256_ok")),
        "errors": summ["errors"],
        "fetch_errors": "; ".join(f"{why} x{n}" for why, n in sorted(summ["errors"].items())),
        "acks_captured": captured, "records_at_r": records, "records_combined": bundled,
        "combined_pct": 100.0 * bundled / captured if captured else 0.0,
        "mplex_pkts_at_r": pkts, "mean_bundle": records / pkts if pkts else 0.0,
        "expired_ttl": ra.get("expired_ttl", 0) - rb.get("expired_ttl", 0),
        "late_records": ra.get("late_records", 0) - rb.get("late_records", 0),
        "session_tput_mbps": summ["per_client_mbps"]["mean"] or 0.0,
        "agg_tput_mbps": summ["aggregate_mbps"] or 0.0,
        "makespan_s": (summ["session_ms"] or 0) / 1000,
        "median_s": (comp["median"] or 0) / 1000, "p95_s": (comp["p95"] or 0) / 1000,
    }
