"""Two adjustments to Scapy's IP for concast.

1. Make `IP(raw)` total: bytes too short for an IPv4 header decode as Raw instead of raising.

Scapy 2.8 dissects partial packets below the top layer as Raw, but a top-level `IP(raw)`
shorter than the fixed 20-byte header raises struct.error. A conformance suite feeds
arbitrary bytes to `IP()`, so we give IP the hook Scapy already uses to choose a class per
input (`dispatch_hook`): such input becomes `Raw`, exactly what Scapy does one layer down.
Longer input, building (`IP(src=...)`) and subclasses of IP are untouched; with
`conf.debug_dissector` set the error is raised as before.

2. A fragment of a CSP or MplexPkt datagram is not a CSP message or an MplexPkt
(docs/protocol.md section 1.2, "Fragments"): its payload decodes as Raw.
"""
from scapy.config import conf
from scapy.layers.inet import IP

IPV4_HEADER_LEN = 20


def _ip_dispatch_hook(cls, _pkt=None, *args, **kargs):
    if _pkt and len(_pkt) < IPV4_HEADER_LEN and not conf.debug_dissector:
        return conf.raw_layer
    return cls


if "dispatch_hook" not in IP.__dict__:
    IP.dispatch_hook = classmethod(_ip_dispatch_hook)


CONCAST_PROTOS = (253, 254)
_guess_payload_class = IP.guess_payload_class


def _ip_guess_payload_class(self, payload):
    if self.proto in CONCAST_PROTOS and (self.frag or self.flags.MF):
        return conf.raw_layer
    return _guess_payload_class(self, payload)


if IP.guess_payload_class is _guess_payload_class:
    IP.guess_payload_class = _ip_guess_payload_class
