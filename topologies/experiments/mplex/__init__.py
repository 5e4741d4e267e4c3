"""`concast exp mplex`: TCP ACK multiplexing on a dumbbell, with and without.

    c1..cN ── r1 ══ r2 ── sv        (routerd on r1 and r2, hostd on every host)

A web server on sv sends a page to every client at once over the kernels' own TCP; the
clients' ACKs travel toward sv. With the multiplex service on (`concast mplex on` at sv as
receiver and at every client as sender), each client's hostd takes its kernel's pure ACKs
from an NFQUEUE and sends each as a one-record MplexPkt; r1 bundles ACKs of different
clients, r2 bundles again, and sv's hostd unbundles and injects them into its kernel
through a TUN device. The same downloads then run with the service off.

What is counted, and where (docs/multiplex.md, "The experiment"):

- ACKs the clients' kernels sent: an NFLOG rule put first in each client's OUTPUT chain,
  captured with `tcpdump -i nflog:17` (NFQUEUE takes the ACKs before any interface sees
  them);
- datagrams toward sv on each link, at the receiving end of the link (`tcpdump -Q in`):
  the eight access links at r1's ports, r1→r2 at r2's port, r2→sv at sv's eth0; each
  MplexPkt is opened and its records counted;
- ACKs reaching sv's TCP: the TUN device (injected) plus plain ACKs on sv's eth0;
- downloads: bytes, SHA-256 and time of each (all start together);
- routerd's merge counters and hostd's multiplex counters.

Writes <out>/mplex.csv, <out>/mplex.png, <out>/mplex.json, <out>/meta.json (provenance:
revision, tool versions, machine, parameters) and the pcaps under <out>/mplex/<on|off>/, where
<out> is --out or a new folder results/mplex/<UTC time>-<revision>/; prints a line per phase
and the table at the end.
"""
from .accounting import ack_accounting
from .report import rows, save, table
from .runner import main, missing_prerequisites, run
from .settings import LINK_TITLES, LINKS, Download, Phase, Settings, combine
from .testbed import Testbed

__all__ = ["Settings", "Download", "Phase", "combine", "Testbed", "ack_accounting", "rows",
           "table", "save", "run", "missing_prerequisites", "main", "LINKS", "LINK_TITLES"]
