"""Running `concast exp mplex`: the phases in turn, prerequisites, the command line."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from concast import ROOT, prereq, provenance, tools
from concast.argtypes import add_dataplane

from .report import rows, save, table
from .settings import Phase, Settings, combine, say
from .testbed import Testbed


def run(s: Settings, modes=("on", "off"), repeat: int = 1,
        run_dir: Path | None = None) -> dict[str, Phase]:
    """The modes in turn, `repeat` times (interleaved, so slow drifts of this shared machine
    hit both alike); each mode's runs added up."""
    tb = Testbed(s, run_dir)
    runs: dict[str, list[Phase]] = {m: [] for m in modes}
    try:
        tb.start()
        for i in range(1, repeat + 1):
            for mode in modes:
                runs[mode].append(tb.run_phase(mode, tb.net.run_dir / "pcap" / f"{mode}-{i}",
                                               f"{i}/{repeat}"))
    finally:
        say("stopping the network")
        tb.stop()
    return {m: combine(ps) for m, ps in runs.items()}


def missing_prerequisites() -> str | None:
    return prereq.first(prereq.root("Mininet, network namespaces, Open vSwitch"),
                        prereq.commands("tcpdump", "iptables", "ovs-vsctl"),
                        prereq.built("concast-routerd", "concast-hostd", specs=("multiplex",)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="concast exp mplex", description=sys.modules[__package__].__doc__.split("\n\n")[0])
    d = Settings()
    p.add_argument("--clients", type=int, default=d.clients, help="clients (default 8)")
    p.add_argument("--size", type=int, default=d.size, help="page size in bytes (default 2000000)")
    p.add_argument("--max-local-delay", type=float, default=d.max_local_delay_ms, metavar="MS",
                   help=f"MaxLocalDelay, ms (default {d.max_local_delay_ms:g})")
    p.add_argument("--max-total-delay", type=float, default=d.max_total_delay_ms, metavar="MS",
                   help=f"MaxTotalDelay, ms (default {d.max_total_delay_ms:g})")
    p.add_argument("--size-threshold", type=int, default=d.size_threshold, metavar="BYTES",
                   help=f"bundle ACKs no larger than this (default {d.size_threshold})")
    p.add_argument("--modes", default="on,off", help="phases to run, in order (default on,off)")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of each mode, interleaved and added up (default 3)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="where results go (default a new folder results/mplex/<time>-<rev>/)")
    add_dataplane(p, "routers in Linux namespaces, on Open vSwitch or on BMv2 (needs p4c and "
                     "simple_switch_grpc on PATH)")
    ns = p.parse_args(argv)
    modes = tuple(m.strip() for m in ns.modes.split(",") if m.strip())
    if not modes or any(m not in ("on", "off") for m in modes):
        p.error("--modes takes on and/or off, e.g. on,off")
    if not 1 <= ns.clients <= 64 or ns.size < 1 or not 1 <= ns.repeat <= 50:
        p.error("--clients must be 1..64, --size positive and --repeat 1..50")
    why = missing_prerequisites()
    if why:
        return prereq.report("concast exp mplex", why)
    s = Settings(ns.clients, ns.size, ns.max_local_delay, ns.max_total_delay, ns.size_threshold,
                 dataplane=ns.dataplane)
    t0 = time.monotonic()
    meta = provenance.start(
        {**vars(s), "modes": list(modes), "repeat": ns.repeat},
        seed="none: the downloads start together; timing is the kernels'",
        command=["concast", "exp", "mplex", *(argv if argv is not None else sys.argv[1:])],
        specs=("multiplex",))
    phases = run(s, modes, ns.repeat)
    out = ns.out or provenance.run_folder(tools.RESULTS / "mplex")
    written = save(out, s, phases)
    written.append(provenance.write(out, provenance.finish(meta)))
    print()
    if ns.repeat > 1:
        print(f"(counts added up over {ns.repeat} runs of each mode; times averaged)")
    print(table(rows(phases.get("on"), phases.get("off"))))
    print()
    say(f"done in {time.monotonic() - t0:.0f} s; wrote " + ", ".join(str(w.relative_to(ROOT)) if w.is_relative_to(ROOT) else str(w) for w in written))
    bad = [m for m, ph in phases.items() if ph.intact != ph.n_downloads]
    return 1 if bad else 0

