"""Which ACKs the clients sent and which reached sv's TCP, from the captures."""
from __future__ import annotations

import collections

from concast.topologies.experiments import pcapread


def ack_accounting(nflog_pcaps, server_eth0_pcaps, server_tun_pcaps, sv: str) -> dict:
    """Every pure ACK toward sv that a client's kernel sent (NFLOG) against every one that
    reached sv's interface (plain, or as a record of an MplexPkt) and every one sv's kernel
    received (plain on eth0, injected on the TUN device), as multisets of (source,
    destination, TCP header without checksum). `lost_in_network` went missing between the
    clients and sv's interface, `lost_at_sv` between sv's interface and its TCP (the TTL rule
    is the only legitimate reason), `extra` reached TCP without having been sent (or twice)."""
    def keys(paths, records: bool) -> collections.Counter:
        c: collections.Counter = collections.Counter()
        for path in paths:
            for _, ip in pcapread.datagrams(path):
                recs = pcapread.mplex_records(ip) if records else None
                found = [pcapread.record_ack(r, sv) for r in recs] if recs else [pcapread.ack_of(ip)]
                c.update(k for k in found if k and k[1] == sv)
        return c
    sent = keys(nflog_pcaps, False)
    at_sv = keys(server_eth0_pcaps, True)
    arrived = keys([*server_eth0_pcaps, *server_tun_pcaps], False)
    missing, extra = sent - arrived, arrived - sent
    return {"sent": sum(sent.values()), "at_sv_interface": sum(at_sv.values()),
            "arrived": sum(arrived.values()), "missing": sum(missing.values()),
            "lost_in_network": sum((sent - at_sv).values()),
            "lost_at_sv": sum((at_sv - arrived).values()), "extra": sum(extra.values()),
            "missing_keys": list(missing)[:5], "extra_keys": list(extra)[:5]}
