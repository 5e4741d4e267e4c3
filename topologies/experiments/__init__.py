"""Experiments on concast networks, each a module with `main(argv)` run by
`concast exp NAME` (scripts/concast/expcli.py):

- mplex.py: ACK multiplexing on a dumbbell, with and without (docs/multiplex.md)

Helpers: pcapread.py (pcaps of any link type tcpdump writes here, TCP ACKs and MplexPkt
records), fetch.py (an HTTP download client run inside a host's namespace).
"""
