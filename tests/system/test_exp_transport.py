"""`concast exp transport`, short: two Mininet hosts, a 10 Mbit/s HTB bottleneck, 0 and 3 %
random loss; MTP, kernel TCP (CUBIC and BBR, each set on the connection) and Bulk each move two
100 kB objects, every byte hash-checked; then a two-second third-party run. Counts and hashes
are asserted, never speeds.
"""
from __future__ import annotations

import pytest

from concast.topologies.experiments import transport as exp

pytestmark = pytest.mark.skipif(exp.missing_prerequisites() is not None,
                                reason=exp.missing_prerequisites() or "")


def test_short_loss_sweep_and_third_party_complete_hash_checked(tmp_path):
    s = exp.Settings(rates=[10.0], losses=[0.0, 3.0], sizes=[100_000], count=2, limit_s=30.0,
                     third_party_s=2.0)
    res = exp.run(s, tmp_path)
    rows = res["rows"]
    assert [(r["loss_pct"], r["proto"]) for r in rows] == [
        (loss, p) for loss in (0.0, 3.0) for p in exp.PROTOCOLS]
    for r in rows:
        assert r["complete"] and r["hash_ok"], r
        assert r["bytes"] == 200_000, r
    lossy = [r for r in rows if r["loss_pct"] == 3.0]
    assert sum(r["dropped"] for r in lossy) > 0, "the loss was real"
    assert all(r["dropped"] == 0 for r in rows if r["loss_pct"] == 0.0)
    tp = res["third_party"][0]
    assert tp["mtp_shared"] > 0 and tp["tcp_shared"] > 0, tp
    table = exp.table(rows)
    assert "dissertation" in table and "MTP / cubic" in table and "MTP / bbr" in table
