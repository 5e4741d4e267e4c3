/* parser.p4 -- ConcastParser: Ethernet, ARP, IPv4, and the walk over the IPv4 options
 * area (protocol.md 1.1) that finds the Concast ID option wherever it stands and names the
 * first error of a malformed area (meta.err). Each byte the walk steps over is extracted
 * into hdr.opts, and what it does not step over (after an EOL, or from a malformed option
 * on) into hdr.opts_rest, so the whole area is in headers for the checksum (deparser.p4) and
 * the deparser writes it back unchanged. */
#ifndef CONCAST_PARSER_P4
#define CONCAST_PARSER_P4

#include "headers.p4"

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

    state start_options {
        meta.opt_rem = ((bit<8>) hdr.ipv4.ihl << 2) - 20;
        transition walk;
    }

    /* protocol.md 1.1: one iteration per option. */
    state walk {
        transition select(meta.opt_rem) {
            0: accept;                          /* end of the area */
            default: walk_type;
        }
    }

    state walk_type {
        transition select(pkt.lookahead<bit<8>>()) {
            OPT_EOL: rest_of_area;              /* the rest is padding, not walked */
            OPT_NOP: walk_nop;
            default: walk_tl;
        }
    }

    state walk_nop {
        pkt.extract(hdr.opts.next);
        meta.opt_rem = meta.opt_rem - 1;
        transition walk;
    }

    state walk_tl {
        transition select(meta.opt_rem) {
            1: option_truncated;                /* no room for the length byte */
            default: walk_len;
        }
    }

    state walk_len {
        bit<16> tl = pkt.lookahead<bit<16>>();
        meta.cur_type = tl[15:8];
        meta.cur_len = tl[7:0];
        meta.rem_minus_len = (bit<16>) meta.opt_rem - (bit<16>) tl[7:0];
        transition select(tl[7:0]) {
            0: option_bad_length;
            1: option_bad_length;
            default: walk_fits;
        }
    }

    state walk_fits {
        transition select(meta.rem_minus_len[15:15]) {
            1: option_overflow;                 /* i + length > area end */
            default: walk_kind;
        }
    }

    state walk_kind {
        transition select(meta.cur_type, meta.cur_len, meta.concast) {
            (OPT_CONCAST, 6, 0): walk_concast;
            (OPT_CONCAST, 6, 1): concast_duplicate;
            (OPT_CONCAST, _, _): concast_bad_length;   /* checked before duplication */
            (OPT_RA, 4, _):      walk_skip_start;
            (OPT_RA, _, _):      option_bad_length;
            default:             walk_skip_start;      /* other options: skipped whole */
        }
    }

    state walk_concast {
        bit<48> opt = pkt.lookahead<bit<48>>();
        meta.group = opt[31:0];
        meta.concast = 1;
        transition walk_skip_start;
    }

    state walk_skip_start {
        meta.skip = meta.cur_len;
        meta.opt_rem = meta.opt_rem - meta.cur_len;
        transition walk_skip;
    }

    state walk_skip {
        pkt.extract(hdr.opts.next);
        meta.skip = meta.skip - 1;
        transition select(meta.skip) {
            0: walk;
            default: walk_skip;
        }
    }

    /* The error states looked ahead only: opt_rem still counts the bytes not extracted. */
    state option_truncated   { meta.err = ERR_OPTION_TRUNCATED;       transition rest_of_area; }
    state option_bad_length  { meta.err = ERR_OPTION_BAD_LENGTH;      transition rest_of_area; }
    state option_overflow    { meta.err = ERR_OPTION_OVERFLOW;        transition rest_of_area; }
    state concast_bad_length { meta.err = ERR_CONCAST_OPT_BAD_LENGTH; transition rest_of_area; }
    state concast_duplicate  { meta.err = ERR_CONCAST_OPT_DUPLICATE;  transition rest_of_area; }

    /* The opt_rem bytes of the area the walk did not step over, in one varbit header. */
    state rest_of_area {
        pkt.extract(hdr.opts_rest, ((bit<32>) meta.opt_rem) * 8);
        transition accept;
    }
}

#endif
