"""The Python side of the multiplex service without a network: pcap reading (NFLOG, raw,
Ethernet), ACK keys and MplexPkt records (topologies/experiments/pcapread.py), and the
`concast mplex` command lines refused before any daemon is asked."""
from __future__ import annotations

import struct

import pytest

from concast import cli
from concast.topologies.experiments import pcapread

C1, SV = bytes([10, 1, 1, 2]), bytes([10, 2, 1, 2])


def ipv4(src: bytes, dst: bytes, proto: int, payload: bytes, options: bytes = b"") -> bytes:
    ihl = 5 + len(options) // 4
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 4 * ihl + len(payload), 1, 0x4000, 64,
                      proto, 0, src, dst)
    return hdr + options + payload


def ack_segment(ack: int, flags: int = 0x10, data: bytes = b"") -> bytes:
    return struct.pack("!HHIIBBHHH", 40000, 8000, 7, ack, 5 << 4, flags, 502, 0xBEEF, 0) + data


def pcap(linktype: int, records: list[bytes]) -> bytes:
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)]
    for i, r in enumerate(records):
        out.append(struct.pack("<IIII", 1000 + i, 0, len(r), len(r)) + r)
    return b"".join(out)


def nflog(packet: bytes) -> bytes:
    """An NFLOG record: header, a prefix TLV, then the payload TLV (type 9)."""
    def tlv(kind: int, value: bytes) -> bytes:
        t = struct.pack("<HH", 4 + len(value), kind) + value
        return t + b"\0" * (-len(t) % 4)
    return struct.pack("!BBH", 2, 0, 17) + tlv(10, b"pfx\0") + tlv(9, packet)


def mplex_pkt(records: list[tuple[bytes, bytes]]) -> bytes:
    body = struct.pack("!BB2xIII", 64, 1, 10_000, 0, 2000)
    for src, seg in records:
        body += src + struct.pack("!BBHB", 63, 6, len(seg), 0) + seg
    return ipv4(bytes([10, 0, 0, 2]), SV, 254, body, options=bytes([0x9E, 6, 0, 0, 0, 1, 0, 0]))


def test_nflog_raw_and_ethernet_records_give_their_datagrams(tmp_path):
    ack = ipv4(C1, SV, 6, ack_segment(99))
    (tmp_path / "n.pcap").write_bytes(pcap(pcapread.LINKTYPE_NFLOG, [nflog(ack)]))
    (tmp_path / "r.pcap").write_bytes(pcap(pcapread.LINKTYPE_RAW, [ack]))
    eth = b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00"
    (tmp_path / "e.pcap").write_bytes(pcap(pcapread.LINKTYPE_ETHERNET, [eth + ack + b"\0" * 6]))
    for name in ("n", "r", "e"):
        (got,) = pcapread.datagrams(tmp_path / f"{name}.pcap")
        assert got[1] == ack, name          # Ethernet padding cut by the total length
    assert pcapread.datagrams(tmp_path / "absent.pcap") == []


def test_ack_keys_match_across_plain_and_bundled_forms():
    seg = ack_segment(5)
    plain = ipv4(C1, SV, 6, seg)
    assert pcapread.is_pure_ack(plain)
    assert not pcapread.is_pure_ack(ipv4(C1, SV, 6, ack_segment(5, data=b"GET /")))
    assert not pcapread.is_pure_ack(ipv4(C1, SV, 6, ack_segment(5, flags=0x11)))
    other = bytes([10, 1, 2, 2])
    recs = pcapread.mplex_records(mplex_pkt([(C1, seg), (other, ack_segment(6))]))
    assert [r.src for r in recs] == ["10.1.1.2", "10.1.2.2"]
    # The same ACK, plain or in a record, has the same key (the checksum is left out).
    assert pcapread.record_ack(recs[0], "10.2.1.2") == pcapread.ack_of(plain)
    changed = seg[:16] + b"\0\0" + seg[18:]
    assert pcapread.ack_of(ipv4(C1, SV, 6, changed)) == pcapread.ack_of(plain)
    assert pcapread.mplex_records(plain) is None
    assert pcapread.mplex_records(mplex_pkt([(C1, seg)])[:-3]) is None, "a cut record"


def test_link_counts(tmp_path):
    seg = ack_segment(1)
    pkts = [mplex_pkt([(C1, seg), (bytes([10, 1, 2, 2]), seg)]), mplex_pkt([(C1, seg)]),
            ipv4(C1, SV, 6, seg), ipv4(C1, SV, 6, ack_segment(1, flags=0x02))]
    (tmp_path / "l.pcap").write_bytes(pcap(pcapread.LINKTYPE_RAW, pkts))
    c = pcapread.count_link([tmp_path / "l.pcap"])
    assert (c.packets, c.mplex, c.records, c.plain_acks, c.other) == (4, 2, 3, 1, 1)
    assert (c.acks, c.mean_bundle, c.sizes) == (4, 1.5, {2: 1, 1: 1})


@pytest.mark.parametrize("argv, why", [
    (["on", "--role", "receiver", "--to", "10.2.1.2"], "takes no --to"),
    (["on", "--role", "sender", "--to", "10.2.1.2"], "--max-local-delay and --max-total-delay"),
    (["on", "--role", "sender", "--max-local-delay", "1", "--max-total-delay", "2"], "needs --to"),
    (["on", "--role", "sender", "--to", "10.2.1.2", "--max-local-delay", "9",
      "--max-total-delay", "2"], "exceeds"),
    (["on", "--role", "sender", "--to", "10.2.1.999"], "not an IPv4 address"),
    (["on", "--role", "sender", "--to", "224.0.0.5"], "not a unicast"),
    (["on", "--role", "receiver", "--group", "0"], "not a multiplex group"),
    (["on", "--role", "sender", "--to", "10.2.1.2", "--max-local-delay", "-1"], "between 0 and"),
    (["on", "--role", "sender", "--to", "10.2.1.2", "--size-threshold", "20"], "between 28"),
    (["on", "--role", "sender", "--to", "10.2.1.2", "--max-local-delay", "1",
      "--max-total-delay", "2", "--size-threshold", "30"], "pure ACKs are at least 40"),
    (["on", "--role", "sender", "--to", "10.2.1.2", "--proto", "udp", "--max-local-delay", "1",
      "--max-total-delay", "2"], "needs --sport"),
    (["on", "--role", "sender", "--to", "10.2.1.2", "--sport", "5000", "--max-local-delay", "1",
      "--max-total-delay", "2"], "give --proto"),
    (["on", "--role", "sender", "--to", "10.2.1.2", "--proto", "tcp", "--sport", "80",
      "--max-local-delay", "1", "--max-total-delay", "2", "--size-threshold", "30"],
     "TCP segments are at least 40"),
    (["on", "--role", "sender", "--to", "10.2.1.2", "--proto", "udp", "--sport", "0"],
     "not a port"),
    (["on"], "--role sender or --role receiver"),
])
def test_bad_mplex_command_lines_exit_2_and_say_why(argv, why, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["mplex", *argv, "--socket", "/nonexistent/hostd.sock"])
    assert e.value.code == 2
    assert why in capsys.readouterr().err


def test_a_receiver_ignores_sender_options_and_says_so(capsys):
    """Paper 4.1: delays given to R are ignored, not refused (the request then goes on; here
    to a socket that does not exist, so it fails later, after the note)."""
    code = cli.main(["mplex", "on", "--role", "receiver", "--max-local-delay", "3",
                     "--socket", "/nonexistent/hostd.sock"])
    err = capsys.readouterr().err
    assert "ignores --max-local-delay" in err
    assert code == 3, "no hostd at the socket is a missing prerequisite (docs/cli.md)"
