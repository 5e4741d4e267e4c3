"""`concast conform` refuses what it cannot do with a clear message, before building anything."""
import subprocess
import sys

from concast import ROOT
from concast.conform import run


def cli(*args):
    return subprocess.run([sys.executable, "-m", "concast.cli", "conform", *args],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=60)


def test_a_device_description_that_cannot_work_is_refused_naming_the_flag():
    cases = {
        ("--ports", "lo"): "--ports: give two interfaces",
        ("--ports", "s1=lo,rx=lo"): "s1 and rx must be two interfaces",
        ("--ports", "s1=lo,tx=lo"): "'tx=lo' is not ROLE=VALUE",
        ("--ports", "s1=nosuch0,rx=lo"): "no interface 'nosuch0' (s1)",
        ("--ports", "lo,nosuch1"): "no interface 'nosuch1' (rx)",
        ("--ports", "s1=lo,rx=lo2", "--addr", "s1=10.0.0.2"): "no interface 'lo2' (rx)",
        ("--addr", "s1=10.1.1.2,rx=10.2.1.2"): "they go with --ports",
        ("--ports", "lo,nosuch1", "--target", "plain"): "with --ports the device is the target",
        ("--p4", "no/such.p4"): "--p4: no file no/such.p4",
        ("--p4", "x.p4", "--ports", "lo,lo"): "goes with neither --ports nor --target",
    }
    for args, words in cases.items():
        r = cli(*args)
        assert r.returncode == 2 and words in r.stderr, (args, r.stderr)


def test_ports_parse_both_forms_and_need_addresses(tmp_path):
    from concast.conform.ports import PortsError, parse
    for name in ("a0", "b0"):
        (tmp_path / name).mkdir()
    d = parse("a0,b0", "s1=10.1.1.2,rx=10.2.1.2", "10.0.0.1,10.1.1.1", sysfs=tmp_path)
    assert d.ifaces == {"s1": "a0", "rx": "b0"} and d.dut_addrs == ["10.0.0.1", "10.1.1.1"]
    assert d.dut_macs == {}
    d = parse("rx=b0,s1=a0", "rx=10.2.1.2,s1=10.1.1.2", "10.0.0.1", "AA:BB:CC:DD:EE:FF",
              sysfs=tmp_path)
    assert d.ifaces["s1"] == "a0" and d.dut_macs == {"s1": "aa:bb:cc:dd:ee:ff",
                                                     "rx": "aa:bb:cc:dd:ee:ff"}
    assert d.argv()[:2] == ["--conform-ports", "s1=a0,rx=b0"]
    bad = [(("a0,b0", None, "10.0.0.1"), "needs --addr"),
           (("a0,b0", "s1=10.1.1.2,rx=10.2.1.2", None), "needs --dut-addr"),
           (("a0,b0", "s1=10.1.1.2", "10.0.0.1"), "no rx"),
           (("a0,b0", "s1=10.1.1.2,rx=nowhere", "10.0.0.1"), "'nowhere' is not an IPv4"),
           (("a0,b0", "s1=10.1.1.2,rx=10.2.1.2", "10.1.1.2"), "cannot have the suite's own"),
           (("a0,b0", "s1=10.1.1.2,rx=10.2.1.2", "10.0.0.1", "s1=zz"), "no rx"),
           (("a0,b0", "s1=10.1.1.2,rx=10.2.1.2", "10.0.0.1", "zz"), "'zz' is not a MAC")]
    for args, words in bad:
        try:
            parse(*args, sysfs=tmp_path)
        except PortsError as e:
            assert words in str(e), (args, e)
        else:
            raise AssertionError(f"{args} was accepted")


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
