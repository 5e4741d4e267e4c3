"""Scapy layers for concast (docs/protocol.md), importable as `concast.scapy`.

Importing this package registers everything with Scapy: the Concast ID option is decoded
inside `IP(raw)`, IPv4 protocol 253 decodes as CSP (body chosen by type) and 254 as an
MplexHdr with its records (a fragment's payload stays Raw). Scapy's own classes are not
changed. `decode_ip` decodes any bytes without raising; `validate`/`classify` give the spec's
verdict on raw bytes.

Never put this folder on sys.path: it is named `scapy` and would shadow the real Scapy.
"""
from .ipv4 import decode_ip
from .csp import (CHUNK_SIZE, CSP, CSP_BODIES, CSP_ERRORS, CSP_TYPES, MAX_REASON_LEN,
                  MAX_SPEC_SIZE, PROTO_CSP, CSP_Error, CSP_Join, CSP_JoinAck, CSP_Leave,
                  CSP_Refresh, CSP_SpecChunk, CSP_SpecRequest, CSP_SpecUpdate, csp_datagram)
from .mplex import (MPLEX_GROUP, PROTO_MPLEX, EncapsulatedPkt, MplexHdr, mplex_datagram,
                    mplex_records)
from .unbundle import Unbundled, unbundle
from .option import CONCAST_OPTION, IPOption_Concast, concast_option
from .validate import Classification, classify, validate

ERRORS = (
    "truncated", "bad_version", "bad_ihl", "header_overflow", "bad_total_length",
    "option_truncated", "option_bad_length", "option_overflow", "concast_option_bad_length",
    "concast_option_duplicate",
    "csp_missing_router_alert", "csp_truncated", "csp_bad_version", "csp_unknown_type",
    "csp_bad_length", "csp_chunk_out_of_range",
    "mplex_missing_concast_option", "mplex_truncated_header", "mplex_bad_version",
    "mplex_zero_records",
    "mplex_record_truncated",
)
"""Every error name docs/protocol.md defines, in the order its tables list them."""

__all__ = [
    "IPOption_Concast", "concast_option", "CONCAST_OPTION",
    "CSP", "CSP_Join", "CSP_JoinAck", "CSP_Refresh", "CSP_Leave", "CSP_SpecRequest",
    "CSP_SpecChunk", "CSP_SpecUpdate", "CSP_Error", "CSP_BODIES", "CSP_TYPES", "CSP_ERRORS",
    "csp_datagram", "PROTO_CSP", "CHUNK_SIZE", "MAX_SPEC_SIZE", "MAX_REASON_LEN",
    "MplexHdr", "EncapsulatedPkt", "mplex_datagram", "mplex_records", "unbundle", "Unbundled",
    "PROTO_MPLEX", "MPLEX_GROUP",
    "validate", "classify", "Classification", "ERRORS", "decode_ip",
]
