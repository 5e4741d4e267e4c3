"""Checks of the P4 part that need no compiler or switch (they run in CI too):
the numbers in p4src/concast.p4 and its includes agree with concast.controller.p4.pipeline, the test
packets of test_bmv2_dataplane.py are what they claim to be, and table entries are built
as P4Runtime wants them."""
from __future__ import annotations

import re
from ipaddress import IPv4Network

from concast.controller.p4 import pipeline as P
from concast.scapy import ERRORS, classify

from .test_bmv2_dataplane import CONCAST_AREAS, GROUP, OPTION_AREAS, header_ok, ipv4

SOURCE = "\n".join(p.read_text() for p in [P.P4_SOURCE, *P.P4_INCLUDES])


def _consts(prefix: str) -> dict[str, int]:
    return {m[1]: int(m[2], 0) for m in
            re.finditer(rf"const bit<\d+>\s+({prefix}\w+)\s*=\s*(\w+);", SOURCE)}


def test_cpu_port_agrees():
    assert re.search(rf"#define CPU_PORT_NUM {P.CPU_PORT}\b", SOURCE)
    # `received` is indexed by the ingress port: the CPU port must have its own cell
    assert re.search(rf"const bit<32> N_PORTS = {P.N_PORTS};", SOURCE)
    assert P.CPU_PORT < P.N_PORTS


def test_malformed_counter_indexes_agree():
    errs = _consts("ERR_")
    for name, index in P.MALFORMED_INDEX.items():
        assert name in ERRORS                       # a name protocol.md defines
        const = {"concast_option_bad_length": "ERR_CONCAST_OPT_BAD_LENGTH",
                 "concast_option_duplicate": "ERR_CONCAST_OPT_DUPLICATE"}.get(
                     name, "ERR_" + name.upper())
        assert errs[const] == index, name
    assert re.search(rf"const bit<32> N_ERR = {len(P.MALFORMED_KINDS)};", SOURCE)


def test_divert_and_drop_indexes_agree():
    div = _consts("DIV_")
    assert [div["DIV_OWN_ADDRESS"], div["DIV_CSP"], div["DIV_CONCAST"]] == \
        [P.DIVERT_OWN_ADDRESS, P.DIVERT_CSP, P.DIVERT_CONCAST]
    drops = _consts("DROP_")
    assert [drops[f"DROP_{r.upper()}"] for r in P.DROP_REASONS] == list(range(5))
    assert P.DROP_REASONS == ("not_ipv4", "ttl", "no_route", "local", "bad_checksum")
    assert re.search(rf"const bit<32> N_DROP = {len(P.DROP_REASONS)};", SOURCE)


def test_names_used_by_the_client_are_in_the_source():
    """Each name is pipeline-control.instance.member: the instance is declared in the
    pipeline control with a control type, and that control declares the member."""
    for full in (P.T_IPV4_LPM, P.T_DIVERT_STATIC, P.T_CONCAST_FLOWS, P.T_ARP_ANSWER,
                 P.A_SET_NHOP, P.A_LOCAL_DROP, P.A_DIVERT, P.A_ARP_REPLY):
        pipe, instance, name = full.split(".")
        ctype = re.search(rf"\b(\w+)\(\) {instance};", SOURCE)
        assert f"control {pipe}(" in SOURCE and ctype, full
        body = SOURCE[SOURCE.index(f"control {ctype[1]}("):]
        body = body[:body.index("\ncontrol ")] if "\ncontrol " in body else body
        assert re.search(rf"\b(table|action) {name}\b", body), full
    for full in (P.C_MALFORMED, P.C_DIVERTED, P.C_REINJECTED, P.C_FORWARDED, P.C_DROPPED,
                 P.C_ARP, P.C_RECEIVED):
        control, name = full.split(".")
        assert f"control {control}(" in SOURCE
        assert re.search(rf"\) {name};", SOURCE), full
    for key in ('@name("R")', '@name("G")', '@name("dst")', '@name("protocol")',
                '@name("ingress_port")', '@name("tpa")'):
        assert key in SOURCE


def test_test_packets_are_what_they_claim():
    for name, opts in OPTION_AREAS.items():
        raw = ipv4(opts)
        assert header_ok(raw) and classify(raw).kind == "ipv4", name
    for name, opts in CONCAST_AREAS.items():
        raw = ipv4(opts)
        c = classify(raw)
        assert header_ok(raw) and (c.kind, c.group) == ("concast", GROUP), name
    assert len(CONCAST_AREAS["end_of_40_bytes"]) == 40
    assert CONCAST_AREAS["end_of_40_bytes"][-6:-4] == b"\x9e\x06"


def test_entries():
    e = P.lpm_entry(IPv4Network("10.2.0.0/16"), 2, "02:cc:0a:02:00:02", "02:cc:0a:00:00:01")
    assert (e.table, e.action) == (P.T_IPV4_LPM, P.A_SET_NHOP)
    assert e.matches[0].value == 0x0A020000 and e.matches[0].arg == 16
    assert dict(e.params) == {"dmac": 0x02CC0A020002, "smac": 0x02CC0A000001, "port": 2}
    assert P.lpm_entry(IPv4Network("10.0.0.1/32"), None, None, "02:cc:0a:00:00:01").action == P.A_LOCAL_DROP
    f = P.concast_flow_entry("10.1.1.2", 7)
    assert [(m.name, m.value) for m in f.matches] == [("R", 0x0A010102), ("G", 7)]
    assert dict(f.params) == {"reason": P.DIVERT_CONCAST}
    csp = P.csp_divert_entry()
    assert csp.priority and csp.matches[0].value == 253 and csp.matches[0].arg == 0xFF
