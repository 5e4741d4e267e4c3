"""Small kernel knobs for our root-namespace interfaces."""
from __future__ import annotations


def disable_ipv6(ifaces: list[str]) -> None:
    """Keep the root namespace from sending router solicitations and MLD reports out of
    our veths into the routers (noise in every counter)."""
    for iface in ifaces:
        try:
            with open(f"/proc/sys/net/ipv6/conf/{iface}/disable_ipv6", "w") as f:
                f.write("1")
        except OSError:
            pass
