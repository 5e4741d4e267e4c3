/* skip_options_walk.p4 -- a deliberately BROKEN concast router for the conformance suite.
 *
 * p4src/concast.p4 with one thing taken out: the IPv4 options walk (protocol.md 1.1). It
 * takes every other part from p4src/include/ and brings its own parser, which looks only at
 * the FIRST option: a Concast ID there is found, one behind NOPs, a Router Alert or any
 * other option is not, and no malformed options area is recognised. Forwarding, TTL,
 * diversion tables and ARP are the real ones.
 *
 *   concast conform --p4 tests/conform/p4/skip_options_walk.p4
 *
 * must fail, at least with [1-2] (an MplexPkt whose option follows NOPs is not bundled: the
 * router never sees it) and [1.1-8] (a Router Alert of bad length before the Concast ID is
 * forwarded instead of dropped). tests/system/test_conform_p4.py checks that, where p4c and
 * BMv2 are installed.
 */
#include <core.p4>
#include <v1model.p4>

#include "../../../p4src/include/headers.p4"
#include "../../../p4src/include/ingress.p4"
#include "../../../p4src/include/deparser.p4"

parser ConcastParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t std) {
    state start {
        meta.err = ERR_NONE;
        meta.concast = 0;
        meta.group = 0;
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP:  parse_arp;
            default: accept;
        }
    }

    state parse_arp {
        pkt.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) {
            (4, 0 &&& 0xC): bad_ihl;           /* ihl 0..3 */
            (4, 4): bad_ihl;
            (4, _): start_options;
            default: bad_version;
        }
    }
    state bad_ihl         { meta.err = ERR_BAD_IHL; transition accept; }
    state bad_version     { meta.err = ERR_BAD_VERSION; transition accept; }

    /* BROKEN ON PURPOSE: no walk. Peek at the first option only. */
    state start_options {
        transition select(hdr.ipv4.ihl) {
            5: accept;                          /* no options */
            default: first_option;
        }
    }

    state first_option {
        bit<48> opt = pkt.lookahead<bit<48>>();
        transition select(opt[47:40], opt[39:32]) {
            (OPT_CONCAST, 6): first_is_concast;
            default: whole_area;                /* anything else: not looked at */
        }
    }

    state first_is_concast {
        bit<48> opt = pkt.lookahead<bit<48>>();
        meta.group = opt[31:0];
        meta.concast = 1;
        transition whole_area;
    }

    /* The area taken whole, unread, so the header checksum is still verified over it
     * (deparser.p4): this program is broken in its walk only. */
    state whole_area {
        pkt.extract(hdr.opts_rest, ((bit<32>) hdr.ipv4.ihl - 5) * 32);
        transition accept;
    }
}

V1Switch(ConcastParser(), ConcastVerifyChecksum(), ConcastIngress(), ConcastEgress(),
         ConcastComputeChecksum(), ConcastDeparser()) main;
