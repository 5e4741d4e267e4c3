"""`concast conform` refuses what it cannot do with a clear message, before building anything."""
import subprocess
import sys

from concast import ROOT
from concast.conform import run


def cli(*args):
    return subprocess.run([sys.executable, "-m", "concast.cli", "conform", *args],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=60)


def test_p4_and_ports_say_they_are_not_done_yet():
    for args in (["--p4", "mine.p4"], ["--ports", "eth1,eth2"]):
        r = cli(*args)
        assert r.returncode == 2 and "not done yet" in r.stderr, r.stderr


def test_a_section_that_is_not_a_number_is_refused():
    r = cli("--section", "two")
    assert r.returncode == 2 and "--section wants a section number" in r.stderr


def test_sections_match_their_subsections_only():
    assert run.in_section("2.8-1", "2") and run.in_section("2.8-1", "2.8")
    assert not run.in_section("2.8-1", "2.1") and not run.in_section("12-1", "1")


def test_the_verdict_needs_a_pass_and_no_failure():
    R = run.Result
    assert run.verdict([R("a", "1-1")])[0]
    assert not run.verdict([R("a", "1-1"), R("b", "1-2", "failed")])[0]
    assert not run.verdict([R("a", "1-1", "skipped")])[0]
    assert not run.verdict([])[0]


def test_the_table_puts_the_spec_sentence_beside_a_failure():
    out = run.table([run.Result("t.py::test_x", "2.8-1", "failed", "no JOIN", "/p.pcap")],
                    {"2.8-1": "JOIN from child C ..."})
    assert "[2.8-1] test_x" in out and "spec: JOIN from child C ..." in out
    assert "got:  no JOIN" in out and "pcap: /p.pcap" in out
