"""What Calvert, Griffioen, Sehgal and Wen report for the ACK study (ICNP 2000, section 5),
and their set-up, so every figure of ours can stand beside theirs.

Only values stated in the paper's text and Table 1 are here. Figures 5 and 6 are curves whose
exact points we do not have; what the text says about them is kept as claims (`FIGURE_CLAIMS`)
and drawn as such, never as invented points.
"""
from __future__ import annotations

DELAYS_MS = (0, 1, 5, 10, 20, 50)

#: Table 1: percentage of all ACKs that were combined, per MaxLocalDelay (ms).
TABLE1 = {
    "low-loss": {0: 2, 1: 77, 5: 97, 10: 98, 20: 99, 50: 99},
    "high-loss": {0: 41, 1: 86, 5: 97, 10: 99, 20: 99, 50: 99},
}

#: What the text says about Figures 5 (low loss) and 6 (high loss): session throughput of
#: the 200 clients with multiplexing, normalised to plain TCP.
FIGURE_CLAIMS = {
    "low-loss": [("at", 0, "==", 1.0, "zero delay costs no throughput"),
                 ("at", 10, "<", 0.8, "at 10 ms throughput drops by more than 20 %")],
    "high-loss": [("at", 0, "==", 1.0, "zero delay costs no throughput")],
}

#: The paper's set-up, for the side-by-side table in docs/experiments.md and the metadata.
SETUP = {
    "simulator": "ns-2",
    "topology": "GT-ITM transit-stub, 220 nodes: 1 transit domain of 4 nodes, "
                "24 stub domains of about 9 nodes",
    "link_delay_ms": 10,
    "core_mbps": 100,
    "edge_mbps": 10,
    "queue": "drop-tail, 20 packets, every link",
    "routers_running_service": "all",
    "workload": "one web server sends a 4 KB page to 200 clients at the same time",
    "tcp": "Reno",
    "low_loss": "light UDP cross traffic",
    "high_loss": "light UDP cross traffic plus 40 long-lived TCP flows",
    "max_total_delay": "unbounded",
    "same_source_rule": "two ACKs of the same source are never merged",
    "zero_delay": "only packets already waiting in the output queue are combined",
}
