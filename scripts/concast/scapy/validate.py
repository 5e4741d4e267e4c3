"""Validity of a datagram, exactly as docs/protocol.md defines it (sections 1.2, 1.1, 2.1, 3).

This works on raw bytes, not on Scapy's decode: Scapy's option parsing is lenient (it reads
past EOL, accepts any length), and a conformance suite must name the same error as every
other concast parser. Checks run in the spec's order; the first failure is the answer.
"""
from typing import NamedTuple

from scapy.fields import BitField
from scapy.packet import Packet

from .csp import (CHUNK_SIZE, CSP, CSP_BODIES, MAX_REASON_LEN, MAX_SPEC_SIZE, PROTO_CSP,
                  SIG_TRAILER_LEN, CSP_Error, CSP_SpecChunk, CSP_SpecRequest, CSP_SpecUpdate,
                  _Signable)
from .mplex import MPLEX_VERSION, PROTO_MPLEX, EncapsulatedPkt, MplexHdr
from .option import CONCAST_OPTION


def _offset(layer: type[Packet], field: str | None = None) -> int:
    """Where `field` starts in the layer's bytes (None: where its fixed-size fields end).

    Offsets and lengths come from the layers' field lists, so the Scapy classes and these
    checks cannot disagree about the layout."""
    pkt, bits = layer(), 0
    for f in layer.fields_desc:
        if f.name == field or (field is None and f.name in ("data", "reason", "records")):
            return bits // 8
        # Bit fields (the JOIN's S flag) count in bits; every other field in whole bytes.
        bits += f.size if isinstance(f, BitField) else \
            8 * len(f.addfield(pkt, b"", pkt.getfieldval(f.name)))
    if field is None:
        return bits // 8
    raise KeyError(f"{layer.__name__} has no field {field}")


EOL, NOP, ROUTER_ALERT = 0x00, 0x01, 0x94
CSP_HEADER_LEN = _offset(CSP)
# Bodies of fixed size, by type (SPEC_CHUNK and ERROR end in variable data).
CSP_BODY_LEN = {t: _offset(c) for t, c in CSP_BODIES.items()
                if c not in (CSP_SpecChunk, CSP_Error)}
CHUNK_HEAD_LEN = _offset(CSP_SpecChunk)
ERROR_HEAD_LEN = _offset(CSP_Error)
MPLEX_HEADER_LEN = _offset(MplexHdr)
RECORD_HEADER_LEN = _offset(EncapsulatedPkt)
RECORD_LEN_AT = _offset(EncapsulatedPkt, "payload_len")
MAX_CHUNKS = MAX_SPEC_SIZE // CHUNK_SIZE


class Classification(NamedTuple):
    kind: str              # "ipv4", "concast", "csp", "mplex" or "malformed"
    group: int | None      # the flow's group: Concast ID option, or CSP header for CSP
    error: str | None      # the spec's error name when malformed


class _Malformed(Exception):
    pass


def _u16(b: bytes, i: int) -> int:
    return int.from_bytes(b[i:i + 2], "big")


def _u32(b: bytes, i: int) -> int:
    return int.from_bytes(b[i:i + 4], "big")


def _walk_options(area: bytes) -> tuple[int | None, bool]:
    """Section 1.1: (Concast ID group or None, Router Alert present)."""
    group, alert, i = None, False, 0
    while i < len(area):
        kind = area[i]
        if kind == EOL:
            break
        if kind == NOP:
            i += 1
            continue
        if i + 1 >= len(area):
            raise _Malformed("option_truncated")
        length = area[i + 1]
        if length < 2:
            raise _Malformed("option_bad_length")
        if i + length > len(area):
            raise _Malformed("option_overflow")
        if kind == CONCAST_OPTION:
            if length != 6:
                raise _Malformed("concast_option_bad_length")
            if group is not None:
                raise _Malformed("concast_option_duplicate")
            group = _u32(area, i + 2)
        elif kind == ROUTER_ALERT:
            if length != 4:
                raise _Malformed("option_bad_length")
            alert = True
        i += length
    return group, alert


def _check_csp(msg: bytes) -> int:
    """Section 2.1 and the per-type rules; returns the CSP group."""
    if len(msg) < CSP_HEADER_LEN or _u16(msg, 2) > len(msg):
        raise _Malformed("csp_truncated")
    version, kind, length = msg[0], msg[1], _u16(msg, 2)
    if version != 1:
        raise _Malformed("csp_bad_version")
    if not 1 <= kind <= 8:
        raise _Malformed("csp_unknown_type")
    body = msg[CSP_HEADER_LEN:length]
    if length < len(msg):
        raise _Malformed("csp_bad_length")
    if kind in CSP_BODY_LEN and len(body) != CSP_BODY_LEN[kind]:
        # JOIN_ACK and SPEC_UPDATE may end in R's signature trailer (2.9).
        signed = (issubclass(CSP_BODIES[kind], _Signable)
                  and len(body) == CSP_BODY_LEN[kind] + SIG_TRAILER_LEN)
        if not signed:
            raise _Malformed("csp_bad_length")
    if kind == 5 and _u16(body, _offset(CSP_SpecRequest, "chunk_index")) >= MAX_CHUNKS:
        raise _Malformed("csp_chunk_out_of_range")
    if kind == 6:                                                       # SPEC_CHUNK
        if len(body) < CHUNK_HEAD_LEN:
            raise _Malformed("csp_bad_length")
        size, index, count = (_u32(body, _offset(CSP_SpecChunk, "spec_size")),
                              _u16(body, _offset(CSP_SpecChunk, "chunk_index")),
                              _u16(body, _offset(CSP_SpecChunk, "chunk_count")))
        if not 0 < size <= MAX_SPEC_SIZE or count != -(-size // CHUNK_SIZE) or index >= count:
            raise _Malformed("csp_chunk_out_of_range")
        want = CHUNK_SIZE if index < count - 1 else size - CHUNK_SIZE * (count - 1)
        if len(body) - CHUNK_HEAD_LEN != want:
            raise _Malformed("csp_bad_length")
    if kind == 7 and not 0 < _u32(body, _offset(CSP_SpecUpdate, "spec_size")) <= MAX_SPEC_SIZE:
        raise _Malformed("csp_chunk_out_of_range")
    if kind == 8 and not ERROR_HEAD_LEN <= len(body) <= ERROR_HEAD_LEN + MAX_REASON_LEN:
        raise _Malformed("csp_bad_length")
    return _u32(msg, 4)


def _check_mplex(body: bytes) -> None:
    """Section 3: the MplexHdr, then records back to back up to the total length."""
    if len(body) < MPLEX_HEADER_LEN:
        raise _Malformed("mplex_truncated_header")
    if body[1] != MPLEX_VERSION:
        raise _Malformed("mplex_bad_version")
    if len(body) == MPLEX_HEADER_LEN:
        raise _Malformed("mplex_zero_records")
    i = MPLEX_HEADER_LEN
    while i < len(body):
        n = RECORD_HEADER_LEN
        if len(body) - i < n or i + n + _u16(body, i + RECORD_LEN_AT) > len(body):
            raise _Malformed("mplex_record_truncated")
        i += n + _u16(body, i + RECORD_LEN_AT)


def _classify(raw: bytes) -> Classification:
    if len(raw) < 20:
        raise _Malformed("truncated")
    if raw[0] >> 4 != 4:
        raise _Malformed("bad_version")
    hlen = (raw[0] & 0x0F) * 4
    if hlen < 20:
        raise _Malformed("bad_ihl")
    if hlen > len(raw):
        raise _Malformed("header_overflow")
    total = _u16(raw, 2)
    if not hlen <= total <= len(raw):
        raise _Malformed("bad_total_length")
    group, alert = _walk_options(raw[20:hlen])
    payload, proto = raw[hlen:total], raw[9]          # bytes past total length are padding
    if _u16(raw, 6) & 0x3FFF:                          # MF or an offset: a fragment is never
        return Classification("ipv4" if group is None else "concast", group, None)  # CSP/Mplex
    if proto == PROTO_CSP:
        if not alert:
            raise _Malformed("csp_missing_router_alert")
        return Classification("csp", _check_csp(payload), None)
    if proto == PROTO_MPLEX:
        if group is None:
            raise _Malformed("mplex_missing_concast_option")
        _check_mplex(payload)
        return Classification("mplex", group, None)
    return Classification("ipv4" if group is None else "concast", group, None)


def classify(raw: bytes) -> Classification:
    """(kind, group, error) of an IPv4 datagram; kind "malformed" names the error. Never raises."""
    try:
        return _classify(bytes(raw))
    except _Malformed as e:
        return Classification("malformed", None, e.args[0])


def validate(raw: bytes) -> str | None:
    """The spec's error name for a malformed datagram, None for a valid one. Never raises."""
    return classify(raw).error
