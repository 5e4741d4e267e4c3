"""`concast perf [...]`: the host transport against kernel TCP and UDP (concast perf --help)."""
from __future__ import annotations


def add_verbs(sub) -> None:
    from concast import perf
    p = sub.add_parser("perf", help="measure the host transport (bulk, ping-pong, streaming) "
                                    "against kernel TCP and UDP in two namespaces (root)",
                       description=perf.DESCRIPTION)
    perf.add_arguments(p)
    p.set_defaults(func=perf.run)
