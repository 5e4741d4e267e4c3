"""`concast conform`: build a target network, run the conformance suite (tests/conform/)
against it under pytest, print a per-section table and exit 0 only if the target conforms."""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from concast import ROOT, prereq, tools
from concast.argtypes import add_dataplane
from concast.conform import p4, ports, specids

SUITE = ROOT / "tests" / "conform"
CANNOT_TEST = prereq.EXIT   # exit status: the target could not be put under test here
JUNIT_FILE, PCAP_DIR = "junit.xml", "pcaps"     # what --out DIR holds


@dataclass
class Result:
    nodeid: str
    spec: str
    outcome: str = "passed"        # passed, failed, skipped
    message: str = ""
    pcap: str = ""


def section_of(spec_id: str) -> str:
    return spec_id.split("-")[0]


def in_section(spec_id: str, wanted: str | None) -> bool:
    s = section_of(spec_id)
    return wanted is None or s == wanted or s.startswith(wanted + ".")


class Collector:
    """A pytest plugin: keeps the tests of the chosen section and records each outcome."""

    def __init__(self, section: str | None) -> None:
        self.section = section
        self.results: dict[str, Result] = {}

    def pytest_collection_modifyitems(self, config, items):
        keep, drop = [], []
        for item in items:
            m = item.get_closest_marker("spec")
            item.user_properties.append(("spec", " ".join(m.args) if m else "?"))
            ids = m.args if m else ("?",)
            (keep if any(in_section(i, self.section) for i in ids) else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_collection_finish(self, session):
        # after every deselection (-k too); a test checking several sentences is filed
        # under its first
        for item in session.items:
            m = item.get_closest_marker("spec")
            self.results[item.nodeid] = Result(item.nodeid, m.args[0] if m else "?")

    def pytest_runtest_logreport(self, report):
        r = self.results.get(report.nodeid)
        if r is None:
            return
        if report.skipped and r.outcome == "passed":
            r.outcome = "skipped"
            lr = report.longrepr
            r.message = lr[2] if isinstance(lr, tuple) else str(lr)
        elif report.failed:
            r.outcome = "failed"
            crash = getattr(report.longrepr, "reprcrash", None)
            text = crash.message if crash else str(report.longrepr)
            r.message = (f"({report.when}) " if report.when != "call" else "") + \
                text.strip().splitlines()[0][:160]
            r.pcap = dict(report.user_properties).get("pcap", "")


def table(results: list[Result], sentences: dict[str, str]) -> str:
    by_section: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_section[section_of(r.spec)].append(r)

    def key(s):
        return [int(x) if x.isdigit() else 0 for x in s.split(".")]
    lines = [f"{'section':<9}{'tests':>6}{'pass':>6}{'fail':>6}{'skip':>6}"]
    for s in sorted(by_section, key=key):
        rs = by_section[s]
        n = {o: sum(r.outcome == o for r in rs) for o in ("passed", "failed", "skipped")}
        lines.append(f"{s:<9}{len(rs):>6}{n['passed']:>6}{n['failed']:>6}{n['skipped']:>6}")
    failed = [r for r in results if r.outcome == "failed"]
    if failed:
        lines.append("\nfailures:")
        for r in failed:
            lines.append(f"  [{r.spec}] {r.nodeid.split('::')[-1]}")
            lines.append(f"      spec: {sentences.get(r.spec, '(unknown id)')[:200]}")
            lines.append(f"      got:  {r.message}")
            if r.pcap:
                lines.append(f"      pcap: {r.pcap}")
    skipped = [r for r in results if r.outcome == "skipped"]
    reasons = sorted({r.message for r in skipped})
    if reasons:
        lines.append("\nskipped:")
        for why in reasons:
            lines.append(f"  {sum(r.message == why for r in skipped)} test(s): {why}")
    return "\n".join(lines)


def verdict(results: list[Result]) -> tuple[bool, str]:
    if not results:
        return False, "no conformance test selected"
    if any(r.outcome == "failed" for r in results):
        return False, "the target does NOT conform"
    if not any(r.outcome == "passed" for r in results):
        return False, "nothing ran (every test skipped): conformance not shown"
    return True, "the target conforms" + (
        " (some tests skipped, see above)" if any(r.outcome == "skipped" for r in results) else "")


def build_parser(p: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = p or argparse.ArgumentParser(prog="concast conform", description=__doc__.splitlines()[0])
    add_dataplane(p, "the project's own test network, s1 - r1 - rx, on this data plane "
                     "(bmv2: where p4c-bm2-ss and simple_switch_grpc are installed)")
    p.add_argument("--target", choices=["ours", "plain"], default=None,
                   help="ours: routerd on r1; plain: r1 is a router without concast (a "
                        "known-broken target, to see the suite fail)")
    p.add_argument("--section", help="only the tests of this protocol.md section (2, 2.8, ...)")
    p.add_argument("-k", dest="keyword", help="only tests matching this pytest -k expression")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help=f"write DIR/{JUNIT_FILE} (JUnit XML), the pcaps of failed tests to "
                        f"DIR/{PCAP_DIR}/ and meta.json (default a new folder "
                        f"results/conform/<UTC time>-<rev>/)")
    p.add_argument("--junit", type=Path, help=argparse.SUPPRESS)    # before --out: a file
    p.add_argument("--pcaps", type=Path, help=argparse.SUPPRESS)    # before --out: a folder
    p.add_argument("--p4", metavar="FILE.p4",
                   help="compile this v1model program (p4c-bm2-ss) and run the router tests on "
                        "BMv2 with it in place of p4src/concast.p4 (exit 3 where p4c or BMv2 "
                        "is missing)")
    dev = p.add_argument_group("an external device under test (--ports; see docs/conformance.md)")
    dev.add_argument("--ports", metavar="s1=IFACE,rx=IFACE",
                     help="run the router tests against a device attached to these interfaces "
                          "of this namespace: s1 faces the children, rx faces R")
    dev.add_argument("--addr", metavar="s1=IP,rx=IP",
                     help="the addresses the suite takes: the child's (s1) and R's (rx)")
    dev.add_argument("--dut-addr", metavar="IP[,IP...]",
                     help="the device's own addresses; the first receives unicast CSP")
    dev.add_argument("--dut-mac", metavar="MAC|s1=MAC,rx=MAC",
                     help="the device's MAC on the ports (default: asked by ARP)")
    p.add_argument("-v", "--verbose", action="store_true", help="pytest's own output too")
    return p


def main(argv: list[str] | None = None, ns: argparse.Namespace | None = None) -> int:
    a = ns or build_parser().parse_args(argv)
    dut, program = None, None
    if a.p4:
        if a.ports or a.target is not None:
            print("concast conform: --p4 runs our network on BMv2 with your program; it goes "
                  "with neither --ports nor --target", file=sys.stderr)
            return 2
        try:
            program = p4.compile_program(Path(a.p4))
        except FileNotFoundError as e:
            print(f"concast conform: {e}", file=sys.stderr)
            return 2
        except p4.CannotTest as e:
            return prereq.report("concast conform", f"cannot test {a.p4} here: {e}")
        a.dataplane = "bmv2"
    if a.ports:
        if a.target is not None:
            print("concast conform: --target picks our own router; with --ports the device "
                  "is the target", file=sys.stderr)
            return 2
        try:
            dut = ports.parse(a.ports, a.addr, a.dut_addr, a.dut_mac)
        except ports.PortsError as e:
            print(f"concast conform: {e}", file=sys.stderr)
            return 2
    elif a.addr or a.dut_addr or a.dut_mac:
        print("concast conform: --addr, --dut-addr and --dut-mac describe a device: "
              "they go with --ports", file=sys.stderr)
        return 2
    a.target = a.target or "ours"
    if a.section is not None and not all(x.isdigit() for x in a.section.split(".")):
        print(f"concast conform: --section wants a section number such as 2 or 2.8, "
              f"not {a.section!r}", file=sys.stderr)
        return 2
    why = prereq.first(prereq.root("Mininet, network namespaces, raw sockets"),
                       None if dut else prereq.built("concast-routerd", "concast-hostd"))
    if why:
        return prereq.report("concast conform", why)
    from concast import provenance
    meta = provenance.start({"dataplane": a.dataplane, "target": a.target, "section": a.section,
                             "keyword": a.keyword, "p4": a.p4, "ports": a.ports},
                            seed="none: the suite's packets are fixed",
                            binaries=() if dut else ("concast-routerd", "concast-hostd"))
    if not a.out and not (a.junit or a.pcaps):     # the old file options keep their places
        a.out = provenance.run_folder(tools.RESULTS / "conform")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        a.junit = a.junit or a.out / JUNIT_FILE
        a.pcaps = a.pcaps or a.out / PCAP_DIR
    import pytest
    try:
        sentences = specids.spec_ids()
    except specids.SpecIdError as e:     # the text being edited: the ids it has still name tests
        print(f"concast conform: warning: docs/protocol.md: {e}", file=sys.stderr)
        sentences = {u.id: u.text for u in specids.units(specids.PROTOCOL.read_text()) if u.id}
    where = dut.argv() if dut else ["--conform-dataplane", a.dataplane,
                                    "--conform-target", a.target]
    if program:
        where += ["--conform-p4", ",".join(str(x) for x in program)]
    args = [str(SUITE), *where, "-p", "no:cacheprovider", "--import-mode=importlib",
            "-q" if a.verbose else "-qq", "--no-header", "-rN"]
    if not a.verbose:
        args.append("--tb=no")
    if a.keyword:
        args += ["-k", a.keyword]
    if a.junit:
        args += [f"--junitxml={a.junit}", "-o", "junit_family=xunit1"]
    if a.pcaps:
        args += ["--conform-pcaps", str(a.pcaps)]
    collector = Collector(a.section)
    code = pytest.main(args, plugins=[collector])
    results = list(collector.results.values())
    unknown = sorted({r.spec for r in results} - set(sentences))
    what = (f"device on s1={dut.ifaces['s1']}, rx={dut.ifaces['rx']}" if dut
            else f"P4 program {a.p4} on BMv2" if program
            else f"dataplane {a.dataplane}, target {a.target}")
    print(f"\nconcast conform: {what}" + (f", section {a.section}" if a.section else ""))
    print(table(results, sentences))
    if unknown:
        print(f"\ntests name ids protocol.md does not have: {', '.join(unknown)}")
    ok, words = verdict(results)
    if code not in (0, 1, 5) and ok:       # pytest itself failed (usage, internal error)
        ok, words = False, f"pytest stopped with status {int(code)}"
    if unknown:
        ok = False
    print(f"\n{words}")
    if a.out:
        meta["outcome"] = {"ok": ok, "verdict": words,
                           **{o: sum(r.outcome == o for r in results)
                              for o in ("passed", "failed", "skipped")}}
        print(f"results: {a.out} ({provenance.write(a.out, provenance.finish(meta)).name}, "
              f"{JUNIT_FILE})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
