"""Summaries of per-client fetch records (pure functions, unit-tested)."""
from __future__ import annotations

import math
from typing import Iterable, Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile, q in 0..100; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def completion_ns(rec: dict) -> int | None:
    """From the client's connect() to the page's last byte; None unless it completed."""
    if not rec.get("ok"):
        return None
    return rec["last_byte_ns"] - rec["connect_start_ns"]


def summarize(records: Iterable[dict]) -> dict:
    """completed/failed counts, completion-time statistics (ms) and throughputs (Mbit/s).

    Times in records are ns relative to the session's start (the first connect()).
    Aggregate throughput = all page bytes of completed fetches over the time from the
    start to the last completion; per-client throughput = its page bytes over its own
    completion time."""
    records = list(records)
    done = [r for r in records if r.get("ok")]
    times = [completion_ns(r) for r in done]
    errors: dict[str, int] = {}
    for r in records:
        if not r.get("ok"):
            key = r.get("error") or "unknown"
            errors[key] = errors.get(key, 0) + 1
    per_client = [r["body_bytes"] * 8 / t * 1e3 for r, t in zip(done, times) if t > 0]
    total = sum(r["body_bytes"] for r in done)
    start = min((r["connect_start_ns"] for r in records), default=0)
    end = max((r["last_byte_ns"] for r in done), default=None)
    span = None if end is None else end - start
    return {
        "clients": len(records), "completed": len(done), "failed": len(records) - len(done),
        "errors": errors,
        "completion_ms": {
            "mean": _ms(sum(times) / len(times)) if times else None,
            "median": _ms(percentile(times, 50)), "p95": _ms(percentile(times, 95)),
            "max": _ms(max(times)) if times else None, "min": _ms(min(times)) if times else None,
        },
        "page_bytes_total": total,
        "session_ms": _ms(span),
        "aggregate_mbps": total * 8 / span * 1e3 if span else None,
        "per_client_mbps": {
            "mean": sum(per_client) / len(per_client) if per_client else None,
            "median": percentile(per_client, 50), "min": min(per_client, default=None),
        },
    }
