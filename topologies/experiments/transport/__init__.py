"""`concast exp transport`: the MTP loss study (issue #11).

    client ──(HTB bottleneck each way, nftables random loss at both inputs)── server

Two Mininet hosts. For each rate, object size and loss, MTP (`mtping get`), kernel TCP (one
connection per object, `tcpobj`, with its congestion control named: CUBIC, and BBR, this
machine's default) and part 1's Bulk (`concast-perf`) move the same number of bytes; MTP and TCP
fetch the same seeded object file and are hash-checked against it, Bulk checks the SHA-256 of
its own bytes at both ends. Then the third-party test: MTP and TCP alone, then sharing the link.
Writes <out>/transport.csv, transport.json, transport.png; prints the tables.
"""
from .report import save, table, third_party_table
from .runner import cell, main, missing_prerequisites, run, sweep, third_party
from .settings import DISSERTATION, GOAL_RATIO, PROTOCOLS, Settings
from .testbed import Testbed

__all__ = ["Settings", "Testbed", "run", "sweep", "cell", "third_party", "main", "table",
           "third_party_table", "save", "missing_prerequisites", "DISSERTATION", "GOAL_RATIO", "PROTOCOLS"]
