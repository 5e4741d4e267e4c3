"""concast networks on Mininet: describe (ConcastNet), plan addresses, start, clean up.

    from concast.topologies import ConcastNet, tree
    with tree(levels=2, senders=8).start() as n:
        print(n.ping("s1", "rx"))
"""
from concast.topologies.net import ConcastNet  # noqa: F401
from concast.topologies.prebuilt import dumbbell, line, mixed, star, tree  # noqa: F401
from concast.topologies.transitstub import transit_stub  # noqa: F401


def cleanup(dry_run: bool = False, tag: str | None = None, force: bool = False) -> list[str]:
    """Remove leftovers of concast networks whose owner process is gone (`concast net
    cleanup`; see topologies/leftovers.py). Returns what was (or would be) removed."""
    from concast.topologies import leftovers
    return leftovers.cleanup(dry_run, tag, force)
