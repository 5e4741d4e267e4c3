"""The Wireshark dissector (scripts/wireshark/concast.lua) against every protocol test vector.

One pcap holds every vector of tests/vectors/vectors.json, in order, one frame each, on the
link type LINKTYPE_IPV4 (228: the frame is the IPv4 datagram, nothing else). tshark runs once
over it with the Lua script (`-X lua_script:`) and prints PDML, the full protocol tree with
every field's `show`, `showname` and raw `value`; each vector is then checked against the
frame with its index.

Running as root: tshark only honours `-X lua_script:` as root when the global init.lua says
`run_user_scripts_when_superuser = true`, which Debian 12's wireshark 4.0 ships. Nothing on the
machine is changed: tshark gets a HOME and XDG_CONFIG_HOME in a temp dir, so no personal
preferences or personal plugins (for example an installed copy of concast.lua) take part.
If the script did not load, test_tshark_runs_the_dissector_cleanly says so.

IPv4 header errors (docs/protocol.md section 1.2). Wireshark's own IPv4 dissector sees them
first; this is what tshark 4.0.17 does with them (the dissector's postdissector still finds
the header, through the "ip" tree item, or as the whole frame on LINKTYPE_IPV4, and names the
spec's error in concast.error for all of them):

| vector                    | Wireshark's own verdict                                        |
| ------------------------- | -------------------------------------------------------------- |
| truncated_10_bytes        | Malformed Packet (exception in the IPv4 dissector)             |
| empty                     | Malformed Packet; no IPv4 tree at all (found as the frame)     |
| bad_version_6             | hands it to the IPv6 dissector: warning "payload length        |
|                           | exceeds framing length"; no IPv4 tree (found as the frame)     |
| bad_ihl_4                 | expert error "Bogus IP header length"                          |
| header_overflow           | expert error "total length exceeds packet length" + Malformed  |
| total_length_below_header | expert error "Bogus IP length"                                 |
| total_length_past_end     | expert error "IPv4 total length exceeds packet length"         |

For these vectors the test only requires that Wireshark flags the frame itself (Malformed, or
an expert info of severity warning or error outside the concast trees) or that concast.error
names the spec's error, and that concast.error never names a different error. Every other
malformed vector, option errors included, must carry exactly the vector's concast.error.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import concast.vectors as V
from concast import pcapfile

ROOT = Path(__file__).resolve().parents[2]
LUA = ROOT / "scripts" / "wireshark" / "concast.lua"
TSHARK = shutil.which("tshark")


VECTORS = V.load()

# Section 1.2 errors: Wireshark's IPv4 dissector may be the one that reports them (see above).
IPV4_HEADER_ERRORS = {"truncated", "bad_version", "bad_ihl", "header_overflow",
                      "bad_total_length"}


# CSP vector fields -> dissector fields (all carried as decimal or dotted-quad `show`).
CSP_FIELDS = {
    "group": "concast.csp.group",
    "csp_type": "concast.csp.type",
    "receiver": "concast.csp.receiver",
    "seq": "concast.csp.seq",
    "hold_time": "concast.csp.hold_time",
    "path_mtu": "concast.csp.path_mtu",
    "selector_proto": "concast.csp.selector_proto",
    "selector_dport": "concast.csp.selector_dport",
    "S": "concast.csp.join_flags.s",
    "spec_size": "concast.csp.spec_size",
    "chunk_index": "concast.csp.chunk_index",
    "chunk_count": "concast.csp.chunk_count",
    "data_len": "concast.csp.data_length",
    "error_code": "concast.csp.error_code",
    "offending_type": "concast.csp.offending_type",
    "reason": "concast.csp.reason",
}
MPLEX_FIELDS = {
    "group": "concast.group",
    "initial_ttl": "concast.mplex.initial_ttl",
    "version": "concast.mplex.version",
    "max_total_delay": "concast.mplex.max_total_delay",
    "delayed_so_far": "concast.mplex.delayed_so_far",
    "max_local_delay": "concast.mplex.max_local_delay",
}
RECORD_FIELDS = {
    "src": "concast.mplex.record.src",
    "ttl": "concast.mplex.record.ttl",
    "proto": "concast.mplex.record.proto",
    "payload_len": "concast.mplex.record.payload_length",
    "tos": "concast.mplex.record.tos",
}
# Wireshark's own IPv4 fields, to prove frame i really is vector i.
IPV4_FIELDS = {"src": "ip.src", "dst": "ip.dst", "ttl": "ip.ttl", "proto": "ip.proto",
               "total_length": "ip.len"}
# Section 2.7: names the dissector must show for error codes.
CSP_ERROR_NAMES = {1: "NO_SPEC", 2: "SPEC_REJECTED", 3: "UNKNOWN_FLOW", 4: "SPEC_NOT_FOUND",
                   5: "MALFORMED", 6: "FLOW_QUARANTINED", 7: "RESOURCE_LIMIT"}

SEVERITY_WARNING = 0x00600000  # PI_WARN; PI_ERROR is 0x00800000

pytestmark = pytest.mark.skipif(TSHARK is None, reason="tshark is not on PATH")


# ---------------------------------------------------------------------------------------------
# pcap writing and the tshark run
# ---------------------------------------------------------------------------------------------

class Run:
    """One tshark run: exit code, stderr, and the PDML <packet> elements in frame order."""

    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.packets = ET.fromstring(proc.stdout).findall("packet") if proc.stdout else []


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    tmp = tmp_path_factory.mktemp("wireshark")
    pcap = tmp / "vectors.pcap"
    pcapfile.write_ipv4(pcap, [v["raw"] for v in VECTORS])
    # A private HOME / XDG_CONFIG_HOME: no personal preferences or plugins take part.
    home = tmp / "home"
    (home / ".config").mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    proc = subprocess.run(
        [TSHARK, "-n", "-X", f"lua_script:{LUA}", "-r", str(pcap), "-T", "pdml"],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    return Run(proc)


# ---------------------------------------------------------------------------------------------
# reading PDML
# ---------------------------------------------------------------------------------------------

def fields(elem: ET.Element, name: str) -> list[ET.Element]:
    """Every field (or proto) named `name` under `elem`, in tree order."""
    return [e for e in elem.iter() if e.get("name") == name]


def one(elem: ET.Element, name: str, vector: str) -> ET.Element:
    found = fields(elem, name)
    assert found, f"{vector}: tshark shows no {name}"
    assert len(found) == 1, f"{vector}: {name} shown {len(found)} times"
    return found[0]


def shows(elem: ET.Element, name: str) -> list[str]:
    return [e.get("show") for e in fields(elem, name)]


def wireshark_flagged(packet: ET.Element) -> bool:
    """Wireshark itself (not the concast trees) marked the frame malformed or worth a warning."""
    for proto in packet.findall("proto"):
        if proto.get("name", "").startswith("concast"):
            continue
        if fields(proto, "_ws.malformed"):
            return True
        if any(int(s) >= SEVERITY_WARNING for s in shows(proto, "_ws.expert.severity")):
            return True
    return False


def params():
    out = []
    for i, v in enumerate(VECTORS):
        out.append(pytest.param(i, v, id=v["name"]))
    return out


# ---------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------

def test_tshark_runs_the_dissector_cleanly(run: Run):
    assert run.returncode == 0, f"tshark exited {run.returncode}: {run.stderr}"
    # A script that fails to load is reported on stderr ("Lua: Error during loading: ...");
    # an error inside a dissector becomes a "Lua Error" expert info / _ws.lua.error item.
    assert "lua" not in run.stderr.lower(), run.stderr
    assert "Lua Error" not in run.stdout
    assert "_ws.lua.error" not in run.stdout
    assert len(run.packets) == len(VECTORS)
    # If -X lua_script was ignored (e.g. init.lua refusing user scripts as root), nothing
    # below would be dissected: say so plainly.
    names = {p.get("name") for pkt in run.packets for p in pkt.findall("proto")}
    assert {"concast", "concast.csp", "concast.mplex"} <= names, (
        "concast.lua was not loaded; as root, tshark needs run_user_scripts_when_superuser "
        f"= true in its init.lua. Protocols seen: {sorted(n for n in names if n)}")


@pytest.mark.parametrize("index, vector", params())
def test_vector(run: Run, index: int, vector: dict):
    assert len(run.packets) == len(VECTORS), "tshark did not print one packet per vector"
    packet = run.packets[index]
    name = vector["name"]
    errors = shows(packet, "concast.error")

    if not vector["valid"]:
        expected = vector["error"]
        if expected in IPV4_HEADER_ERRORS:
            assert errors in ([], [expected]), f"{name}: concast.error {errors}, want {expected}"
            assert errors or wireshark_flagged(packet), (
                f"{name}: neither concast.error nor Wireshark flags {expected}")
        else:
            assert errors == [expected], f"{name}: concast.error {errors}, want [{expected!r}]"
        return

    assert errors == [], f"{name}: valid vector, but concast.error {errors}"
    f = vector["fields"]
    for key, field in IPV4_FIELDS.items():
        assert one(packet, field, name).get("show") == str(f[key]), f"{name}: {field}"
    assert one(packet, "ip.hdr_len", name).get("show") == str(f["ihl"] * 4)

    kind = vector["kind"]
    if kind == "ipv4":
        assert shows(packet, "concast.group") == [], f"{name}: not concast, but a group shown"
    elif kind == "concast":
        assert one(packet, "concast.group", name).get("show") == str(f["group"])
    elif kind == "csp":
        check_csp(packet, f, name)
    elif kind == "mplex":
        check_mplex(packet, f, name)
    else:
        pytest.fail(f"{name}: unknown vector kind {kind!r}")


def check_csp(packet: ET.Element, f: dict, name: str) -> None:
    csp = one(packet, "concast.csp", name)
    for key, field in CSP_FIELDS.items():
        if key in f:
            assert one(csp, field, name).get("show") == str(f[key]), (
                f"{name}: {field} shows {shows(csp, field)}, want {f[key]!r}")
    ctype = one(csp, "concast.csp.type", name)
    assert ctype.get("showname") == f"Type: {f['csp_type_name']} ({f['csp_type']})", name
    if "spec_hash" in f:
        assert one(csp, "concast.csp.spec_hash", name).get("value") == f["spec_hash"], name
    for key in ("spec_key", "signature"):   # R's signature trailer (2.9)
        got = [e.get("value") for e in csp.iter("field") if e.get("name") == f"concast.csp.{key}"]
        assert got == ([f[key]] if key in f else []), f"{name}: {key} {got}"
    if f.get("data_len"):
        assert len(one(csp, "concast.csp.data", name).get("value")) == 2 * f["data_len"], name
    if "error_code" in f:
        label = CSP_ERROR_NAMES.get(f["error_code"], "Unknown")
        assert label in one(csp, "concast.csp.error_code", name).get("showname"), name
    # every body field the dissector shows must be one the vector expects
    shown = {e.get("name") for e in csp.iter("field")} & set(CSP_FIELDS.values())
    assert shown <= {CSP_FIELDS[k] for k in f if k in CSP_FIELDS}, (
        f"{name}: unexpected fields {shown - {CSP_FIELDS[k] for k in f if k in CSP_FIELDS}}")


def check_mplex(packet: ET.Element, f: dict, name: str) -> None:
    mplex = one(packet, "concast.mplex", name)
    for key, field in MPLEX_FIELDS.items():
        assert one(packet, field, name).get("show") == str(f[key]), (
            f"{name}: {field} shows {shows(packet, field)}, want {f[key]!r}")
    assert one(mplex, "concast.mplex.record_count", name).get("show") == str(len(f["records"]))
    records = fields(mplex, "concast.mplex.record")
    assert len(records) == len(f["records"]), f"{name}: {len(records)} records shown"
    for n, (rec, want) in enumerate(zip(records, f["records"]), 1):
        for key, field in RECORD_FIELDS.items():
            assert one(rec, field, name).get("show") == str(want[key]), (
                f"{name}: record {n} {field} shows {shows(rec, field)}, want {want[key]!r}")
        payload = [e.get("value") for e in fields(rec, "concast.mplex.record.payload")]
        assert payload == ([want["payload_hex"]] if want["payload_hex"] else []), (
            f"{name}: record {n} payload")
