"""Waiting, through a hostd Client, until a sender's multiplex flow captures (docs/multiplex.md):
used by `concast mplex on` and the experiments that switch multiplexing on."""
from __future__ import annotations

import time


def wait_capture(client, receiver: str, group: int, timeout: float,
                 what: str = "pure ACKs") -> tuple[bool, str]:
    """After a sender's `on`: (capturing?, what to print)."""
    def ours(ev: dict) -> bool:
        return ev.get("receiver") == receiver and ev.get("group") == group and \
            ev.get("event") in ("mplex", "fallback")
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        ev = client.next_event(left, ours)
        if ev is None:
            break
        if ev["event"] == "fallback":
            return False, f"not multiplexing: the join fell back ({ev.get('reason')}); " \
                          f"is `concast mplex on --role receiver` running at {receiver}?"
        if ev.get("state") == "capturing":
            return True, f"capturing: {what} toward {receiver} now travel in group {group}"
        return False, f"not multiplexing: {ev.get('reason')}"
    return False, f"still joining after {timeout:g} s (capture starts once the join is active)"
