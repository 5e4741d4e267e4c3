"""`concast exp mtp --scenario NAME`: `sim` (virtual time, sim.py) or one of the scenarios on
an emulated path (root): `michelle` (section 7.4's two-router LAN test), `wan` (section 7.2's
throughput against loss), `third-party` (section 7.3, Figure 16)."""
from __future__ import annotations

import argparse
import signal
import sys

from concast import ROOT, prereq
from concast.argtypes import comma_list

from . import michelle, sim, thirdparty, wan
from .path import RTO_MIN_1999_MS
from .transact import PROTOCOLS

REAL = {"michelle": michelle, "wan": wan, "third-party": thirdparty}
SCENARIOS = ("sim", *REAL)


def missing_prerequisites() -> str | None:
    from concast.topologies.experiments.transport.runner import missing_prerequisites as transport
    return prereq.first(transport(), prereq.commands("ping", "ip"))


def _scenario(argv: list[str]) -> str:
    """The --scenario given (sim when none): read before any parser, so that each scenario's
    own parser (and --help) is the one that runs."""
    for i, a in enumerate(argv):
        if a == "--scenario" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--scenario="):
            return a.split("=", 1)[1]
    return "sim"


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def parser(scenario: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=f"concast exp mtp --scenario {scenario}", description=REAL[scenario].__doc__)
    ap.add_argument("--scenario", choices=SCENARIOS, required=True, help="the scenario")
    ap.add_argument("--quick", action="store_true", help="the short version (seconds to a minute)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the served object's bytes (default 1)")
    ap.add_argument("--protocols", type=comma_list(str, what="protocols"), default=None,
                    help=f"comma separated, from {','.join(PROTOCOLS)}")
    ap.add_argument("--mtp-cc", default="mtp", help="MTP's window rules (mtping --cc; default mtp, the dissertation's)")
    ap.add_argument("--repeat-floor-ms", type=int, default=500,
                    help="MTP's repeat-interval floor, ms (the dissertation: 500)")
    ap.add_argument("--rto-min-ms", type=int, default=RTO_MIN_1999_MS,
                    help=f"reno-1999's minimum RTO (route rto_min), ms (default {RTO_MIN_1999_MS})")
    ap.add_argument("--out", type=__import__("pathlib").Path, default=ROOT / "results" / "mtp", metavar="DIR",
                    help="results go to a new timestamped folder in DIR (default results/mtp)")
    REAL[scenario].add_options(ap)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    scenario = _scenario(argv)
    if scenario not in REAL:
        return sim.main(argv)           # sim, or its parser's error for a name it does not know
    ap = parser(scenario)
    a = ap.parse_args(argv)
    bad = [p for p in (a.protocols or []) if p not in PROTOCOLS]
    if bad:
        ap.error(f"unknown protocol {bad[0]!r}: from {','.join(PROTOCOLS)}")
    why = missing_prerequisites()
    if why:
        return prereq.report("concast exp mtp", why)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _interrupt)
    try:
        return REAL[scenario].main(argv, a, a)
    except KeyboardInterrupt:
        print("concast exp mtp: interrupted: network stopped", file=sys.stderr)
        return 130
    except (RuntimeError, OSError, ValueError) as e:
        print(f"concast exp mtp: {e}", file=sys.stderr)
        return 2
