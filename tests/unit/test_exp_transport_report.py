"""`concast exp transport`'s report: ratios are to CUBIC in the same rate, size and loss, every
kernel TCP measured gets its own MTP / TCP column, and a partial or failed cell says so."""
from __future__ import annotations

from concast.topologies.experiments.transport import report


def row(proto, kbs, loss=3.0, size=4_000_000, complete=True, nbytes=1, partial=0):
    return {"rate_mbit": 10.0, "size": size, "loss_pct": loss, "proto": proto, "kbytes_per_s": kbs,
            "bytes": nbytes, "partial_bytes": partial, "complete": complete, "hash_ok": True}


def test_ratios_are_to_cubic_of_the_same_cell():
    rows = report.with_ratios([row("mtp", 1000.0), row("tcp-cubic", 80.0), row("tcp-bbr", 900.0),
                               row("mtp", 400.0, size=256_000), row("tcp-cubic", 200.0, size=256_000)])
    assert [r["ratio_to_tcp"] for r in rows] == [12.5, 1.0, 11.25, 2.0, 1.0]


def test_table_has_a_column_per_kernel_tcp_and_marks_partial_cells():
    t = report.table([row("mtp", 1000.0), row("tcp-cubic", 80.0, complete=False, nbytes=0, partial=9),
                      row("tcp-bbr", 800.0, complete=False, nbytes=0, partial=0)])
    head, _, line, diss = t.splitlines()
    assert "MTP / cubic" in head and "MTP / bbr" in head
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:3] == ["10", "4 MB", "3"]
    assert cells[4] == "80.0 (partial)"             # no whole object, but bytes in order
    assert cells[5] == "800.0 (none in time)"
    assert cells[-2:] == ["12.50", "1.25"]
    assert diss.startswith("| dissertation") and "13.5" in diss
    assert diss.count("|") == head.count("|")


def test_a_cell_without_its_tcp_gets_no_ratio():
    t = report.table([row("mtp", 1000.0), row("tcp-cubic", 80.0), row("mtp", 500.0, loss=5.0)])
    assert t.splitlines()[3].rstrip(" |").endswith("—")
