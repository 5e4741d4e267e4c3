"""The Concast ID IPv4 option (docs/protocol.md section 1)."""
from scapy.fields import ByteField, ConditionalField, IntField, StrLenField
from scapy.layers.inet import IP, IPOption, _IPOption_HDR

CONCAST_OPTION = 0x9E   # copy 1, class 0, number 30 (RFC 4727 experiment)
CONCAST_OPTION_LEN = 6


class IPOption_Concast(IPOption):
    """`9E 06 GGGGGGGG`: the option that makes a datagram belong to the flow (dst, group).

    Defining it as an IPOption subclass registers it with Scapy (by option number 30), so
    `IP(raw)` decodes it and `IP(options=[IPOption_Concast(group=7)])` builds it; IP's own
    post_build pads the area with zero bytes (EOL), which is exactly what concast senders emit.
    A wrong length is kept as raw `value` bytes instead of a misread group, so a malformed
    option stays visible rather than shifting the rest of the options area. (Scapy picks the
    class by option number alone, so a `1E` byte decodes here too, with copy_flag 0;
    `concast_option` and `validate` accept only `9E 06`.)
    """
    name = "IP Option Concast ID"
    copy_flag = 1
    option = 30
    fields_desc = [
        _IPOption_HDR,
        ByteField("length", CONCAST_OPTION_LEN),
        ConditionalField(IntField("group", 0), lambda p: p.length == CONCAST_OPTION_LEN),
        ConditionalField(StrLenField("value", b"", length_from=lambda p: max(p.length - 2, 0)),
                         lambda p: p.length != CONCAST_OPTION_LEN),
    ]


def concast_option(pkt) -> IPOption_Concast | None:
    """The Concast ID option that makes `pkt` a concast datagram, or None.

    Scapy keeps decoding options after an EOL; section 1.1 says they are padding, so the
    search stops at the first EOL, as every concast parser does.
    """
    for opt in pkt[IP].options:
        head = bytes(opt)[:2]
        if head[:1] in (b"", b"\0"):                  # EOL (or an undecodable tail)
            return None
        if isinstance(opt, IPOption_Concast) and head == b"\x9e\x06":
            return opt
    return None
