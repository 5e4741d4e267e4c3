"""`concast exp NAME [...]`: run one of the experiments in topologies/experiments/."""
from __future__ import annotations

import argparse
import importlib

EXPERIMENTS = {"mplex": "ACK multiplexing on a dumbbell: packets per link, bundle sizes, "
                        "transfer times, with and without (results/mplex/<time>/)",
               "ack-study": "the paper's ACK study: transit-stub network, many web clients, "
                            "Table 1 and Figures 5-6 beside the paper's (results/ack-study/)",
               "transport": "the MTP loss study: MTP, kernel TCP and Bulk over an HTB bottleneck "
                            "at 0-10% random loss, and the third-party test (a new folder under results/transport/)",
               "mtp": "the dissertation's MTP experiments beside its numbers; --scenario sim: its "
                      "simulator in virtual time (results/mtp/)",
               "ctp": "the CTP paper's Tables I and II: latency and bandwidth of UDP, TCP and CTP "
                      "composites, round trips under 0-5% loss (results/ctp/<time>/)"}
MODULES = {"mplex": "mplex", "ack-study": "ackstudy", "transport": "transport", "mtp": "mtp",
           "ctp": "ctp"}


def add_verbs(sub) -> None:
    e = sub.add_parser("exp", help="run an experiment on a Mininet network (root)",
                       description="; ".join(f"{k}: {v}" for k, v in EXPERIMENTS.items()))
    e.add_argument("name", choices=sorted(EXPERIMENTS),
                   help="the experiment; concast exp NAME --help for its options")
    e.add_argument("args", nargs=argparse.REMAINDER, help="the experiment's own options "
                                                          "(concast exp NAME --help)")
    e.set_defaults(func=lambda ns: importlib.import_module(
        f"concast.topologies.experiments.{MODULES[ns.name]}").main(ns.args))
