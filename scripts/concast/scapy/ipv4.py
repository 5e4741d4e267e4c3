"""IPv4 decoding rules of concast that Scapy's own IP does not know, kept on our side.

Nothing here changes Scapy's IP: other users of Scapy in the same process see it as shipped.

1. `decode_ip(raw)` is total: bytes too short for the fixed 20-byte header decode as Raw.
   A top-level `IP(raw)` shorter than that raises in Scapy 2.8 (one layer down Scapy already
   gives Raw); a conformance suite decodes arbitrary bytes, so it calls `decode_ip`.
2. A fragment of a CSP or MplexPkt datagram is not a CSP message or an MplexPkt
   (docs/protocol.md section 1.2, "Fragments"): our layer classes carry a
   dispatch hook (`raw_inside_fragments`) that decodes the payload of a fragment as Raw.
"""
from scapy.config import conf
from scapy.layers.inet import IP
from scapy.packet import Packet

IPV4_HEADER_LEN = 20


def decode_ip(raw: bytes) -> Packet:
    """`IP(raw)`, or Raw when `raw` is shorter than an IPv4 header (never raises on bytes)."""
    if len(raw) < IPV4_HEADER_LEN and not conf.debug_dissector:
        return conf.raw_layer(raw)
    return IP(raw)


def is_fragment(ip) -> bool:
    """A later fragment (offset > 0) or a first one (More Fragments set)."""
    return isinstance(ip, IP) and bool(ip.frag or ip.flags.MF)


def _raw_inside_fragments(cls, _pkt=None, *args, **kargs):
    if is_fragment(kargs.get("_underlayer")):
        return conf.raw_layer
    return cls


raw_inside_fragments = classmethod(_raw_inside_fragments)
"""A layer bound above IP sets `dispatch_hook = raw_inside_fragments` in its class body
(Scapy looks for the hook in the class's own namespace): inside a fragment it decodes as Raw."""
