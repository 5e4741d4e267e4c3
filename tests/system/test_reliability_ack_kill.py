"""routerd killed inside the ACK study's runs (#28 item 4, docs/reliability.md): the quick
study's network, low-loss, MaxLocalDelay 10 ms, multiplexing on and off, with
`--kill-routerd 2@0.2` (kill -9 of routerd on two routers carrying the multiplex flow 0.2 s
into the fetches; bypass; restart after the run). Every page must arrive intact and every
run's ACK books balance, with the kill's losses booked under their own cause and within the
bound the dead routers allow."""
from __future__ import annotations

import csv

import pytest
from hostdtools import quick_ack_study


pytestmark = pytest.mark.mininet


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("ack-kill")
    return quick_ack_study(out, "--envs", "low-loss", "--delays", "10", "--kill-routerd", "2@0.2"), out


def test_pages_intact_and_books_balanced_with_the_kills_losses_under_their_cause(study):
    r, out = study
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "routerd killed in 2 runs (4 kills" in r.stdout, r.stdout[-2000:]
    runs = list(csv.DictReader((out / "runs.csv").open()))
    assert [row["mode"] for row in runs] == ["on", "off"]
    for row in runs:
        assert int(row["intact"]) == int(row["clients"]) == 24, row
        assert int(row["routerd_killed"]) == 2 and len(row["kill_routers"].split()) == 2, row
        assert int(row["acks_unaccounted"]) == 0, row
    on = runs[0]
    lost = int(on["acks_lost_routerd_kill"])
    links = sum(int(on[f"acks_lost_link_{c}"]) for c in ("queue", "loss", "down"))
    assert int(on["acks_captured"]) == int(on["records_at_r"]) + links + lost, on
    assert 0 <= lost <= int(on["kill_bound_records"]), on
