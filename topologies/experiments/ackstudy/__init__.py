"""`concast exp ack-study`: the ACK study of Calvert et al. (ICNP 2000, section 5) at its own
scale, with our Table 1 and Figures 5-6 beside the paper's.

    sudo .venv/bin/concast exp ack-study            # 220 routers, 200 clients, full sweep
    sudo .venv/bin/concast exp ack-study --quick    # 14 routers, 24 clients, 0 and 10 ms

One network is built and reused by every run (testbed.py); for each environment (low-loss:
light UDP cross traffic; high-loss: plus long-lived TCP flows) and seed, every MaxLocalDelay
is run with multiplexing on and off (runner.py). Results go to
results/ack-study/<stamp>/: runs.csv, table1.csv/.md, table1.png, figures5-6.png,
meta.json (git revision, machine, every parameter, scale, peak memory) and topology.json
(the network, reloadable with --topology). docs/experiments.md discusses the figures.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from concast import prereq, provenance, tools
from concast.topologies.experiments.ackstudy import faults, meta, paper, report, runner, settings


def missing_prerequisites() -> str | None:
    return prereq.first(prereq.root("Mininet, network namespaces"),
                        prereq.commands("tc"),
                        prereq.built("concast-routerd", "concast-hostd", "concast-spec",
                                     specs=("multiplex",)))


def servers_revisions(servers) -> dict[str, str]:
    """The concast checkout's git revision on each server (the same one everywhere is a
    requirement, docs/cluster.md "Running on real machines"; recorded so a mismatch shows)."""
    from concast import ROOT
    out = {}
    for name in servers.names:
        try:
            out[name] = servers.run(name, ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                                    check=False, timeout=20).strip() or "?"
        except RuntimeError as e:
            out[name] = f"? ({e})"
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="concast exp ack-study", description=(
        "The ACK study of Calvert et al. (ICNP 2000, section 5): a transit-stub network, "
        "web clients fetching a small page at once, ACKs combined per MaxLocalDelay, with "
        "and without cross traffic; Table 1 and Figures 5-6 beside the paper's."))
    settings.add_arguments(p)
    p.add_argument("--out", metavar="DIR",
                   help="results folder (default results/ack-study/<stamp>)")
    ns = p.parse_args(argv)
    s = settings.from_args(ns)
    why = missing_prerequisites()
    if why:
        return prereq.report("concast exp ack-study", why)
    out = Path(ns.out) if ns.out else tools.RESULTS / "ack-study" / meta.stamp()
    out.mkdir(parents=True, exist_ok=True)
    from concast.topologies.experiments.ackstudy.testbed import Testbed, say
    say(f"{s.routers if not s.topology else '?'} routers, {s.clients} clients, "
        f"{len(s.envs)} environment(s) x {len(s.delays_ms)} delays x {len(s.seeds)} seed(s) "
        f"x {len(s.modes)} modes = {s.runs} runs; results in {out}")
    # the one provenance record (concast.provenance), plus this study's own keys
    info = {**provenance.start(s.as_dict(), seed=list(s.seeds), command=[
                "concast", "exp", "ack-study", *(argv if argv is not None else sys.argv[1:])]),
            "study": "ack-study", "paper": paper.SETUP, "settings": s.as_dict()}
    rows: list[dict] = []
    bed = Testbed(s, out)
    t0 = time.monotonic()
    status = 0
    with meta.PeakMemory() as mem:
        try:
            bed.start()
            info["scale"] = {"routers": len(bed.net.plan.routers), "hosts": len(bed.net.plan.hosts),
                             "clients": len(bed.clients), "cross_hosts": len(bed.cross_hosts),
                             "links": len(bed.net.plan.links), "start_s": round(bed.start_s, 1),
                             "warmup_s": round(bed.warmup_s, 1),
                             "warmup_rejoins": bed.warmup_rejoins}
            info["clients_tcp"] = bed.client_tcp
            if s.servers:       # where every node ran, so the run can be repeated
                info["cluster"] = {**bed.net.servers.describe(),
                                   "placement": bed.net.placement,
                                   "crossing_links": len(bed.net.crossing),
                                   "describe": bed.net.describe_placement(),
                                   "git": servers_revisions(bed.net.servers)}
            runner.sweep(bed, s, runner.Progress(s.runs), rows)
        except KeyboardInterrupt:
            say("interrupted: writing what was measured so far")
            status = 130
        finally:
            bed.stop()
    provenance.finish(info)
    info.update(memory=mem.as_dict(), wall_s=round(time.monotonic() - t0, 1),
                cross_traffic=bed.cross_report, finished=time.strftime("%FT%TZ", time.gmtime()))
    info.setdefault("scale", {"routers": s.routers, "clients": s.clients})
    if not rows:
        (out / "meta.json").write_text(json.dumps(info, indent=1, default=str) + "\n")
        say("no run finished")
        return status or 1
    summary = report.write_all(rows, info, out)
    print()
    print(report.table1_markdown(summary))
    print()
    failed = sum(r["failed"] for r in rows)
    unbalanced = [r for r in rows if r["mode"] == "on" and r.get("acks_unaccounted")]
    faithful = sum(1 for r in rows if r.get("faithful", True))
    say(f"{len(rows)} runs in {info['wall_s'] / 60:.1f} min; {failed} page fetches failed; "
        f"{faithful} of {len(rows)} runs faithful"
        f"{'' if s.keep_unfaithful or faithful == len(rows) else ' (Table 1 counts only those)'}; "
        f"ACK books balanced in {len(rows) - len(unbalanced)} of {len(rows)} runs; "
        f"peak memory +{mem.as_dict()['added_mib']} MiB; wrote {out}")
    kills = faults.summary(rows)                       # --kill-routerd (faults.py)
    if kills:
        say(kills)
    for r in unbalanced:
        say(f"  {r['env']} seed {r['seed']} {r['delay_ms']:g} ms: {r['acks_captured']} ACKs "
            f"captured, {r['records_at_r']} at R, lost on links (queue/loss/down) "
            f"{r['acks_lost_link_queue']}/{r['acks_lost_link_loss']}/{r['acks_lost_link_down']}, "
            f"{r['acks_unaccounted']} unaccounted (routers: {r.get('engine_dropped', 0)} "
            f"MplexPkts dropped by the spec, {r.get('engine_cpu_port_kernel_drops', 0)} frames "
            f"dropped at CPU ports, {r.get('routers_open_states_end', 0)} bundles open at the end)")
    return status or (1 if failed or unbalanced else 0)
