/* skip_options_walk.p4 -- a deliberately BROKEN concast router for the conformance suite.
 *
 * A copy of p4src/concast.p4 with one thing taken out: the IPv4 options walk (protocol.md
 * 1.1). This parser looks only at the FIRST option: a Concast ID there is found, one behind
 * NOPs, a Router Alert or any other option is not, and no malformed options area is
 * recognised. Everything else (forwarding, TTL, diversion tables, ARP) is unchanged.
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

#ifndef CPU_PORT_NUM
#define CPU_PORT_NUM 255
#endif
const bit<9> CPU_PORT = CPU_PORT_NUM;   /* v1model ports are 9 bits; 511 is the drop port */

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<8>  PROTO_CSP      = 253;
const bit<8>  OPT_EOL        = 0x00;
const bit<8>  OPT_NOP        = 0x01;
const bit<8>  OPT_CONCAST    = 0x9E;
const bit<8>  OPT_RA         = 0x94;

/* Index of the `malformed` counter: the error names of protocol.md 1.2 and 1.1. */
const bit<8> ERR_NONE                   = 0;
const bit<8> ERR_TRUNCATED              = 1;
const bit<8> ERR_BAD_VERSION            = 2;
const bit<8> ERR_BAD_IHL                = 3;
const bit<8> ERR_HEADER_OVERFLOW        = 4;
const bit<8> ERR_BAD_TOTAL_LENGTH       = 5;
const bit<8> ERR_OPTION_TRUNCATED       = 6;
const bit<8> ERR_OPTION_BAD_LENGTH      = 7;
const bit<8> ERR_OPTION_OVERFLOW        = 8;
const bit<8> ERR_CONCAST_OPT_BAD_LENGTH = 9;
const bit<8> ERR_CONCAST_OPT_DUPLICATE  = 10;
const bit<32> N_ERR = 11;

/* Index of the `diverted` counter (the reason given by the matching table entry). */
const bit<8> DIV_OWN_ADDRESS = 0;
const bit<8> DIV_CSP         = 1;
const bit<8> DIV_CONCAST     = 2;
const bit<32> N_DIV = 3;

/* Index of the `dropped` counter. */
const bit<32> DROP_NOT_IPV4 = 0;   /* neither IPv4 nor an ARP request we answer */
const bit<32> DROP_TTL      = 1;   /* TTL 0 or 1 on arrival: would reach 0 */
const bit<32> DROP_NO_ROUTE = 2;   /* ipv4_lpm miss */
const bit<32> DROP_LOCAL    = 3;   /* to an own address, not diverted (oblivious router) */
const bit<32> N_DROP = 4;

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  tos;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src;
    bit<32> dst;
}

/* One byte of the options area. The walk extracts every byte it steps over into the next
 * element of a stack of these, so the deparser puts them back in their original order. */
header opt_byte_t {
    bit<8> b;
}

struct headers_t {
    ethernet_t     ethernet;
    arp_t          arp;
    ipv4_t         ipv4;
    opt_byte_t[40] opts;
}

struct metadata_t {
    bit<8>  err;            /* ERR_*, set by the parser */
    bit<8>  opt_rem;        /* bytes of the options area not yet walked */
    bit<8>  skip;           /* bytes of the current option still to extract */
    bit<8>  cur_type;
    bit<8>  cur_len;
    bit<16> rem_minus_len;  /* opt_rem - cur_len; bit 15 set = option overflows the area */
    bit<1>  concast;        /* a Concast ID option was found */
    bit<32> group;          /* its group ID G */
}

/* ------------------------------------------------------------------------------------ */

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
            default: accept;                    /* anything else: not looked at */
        }
    }

    state first_is_concast {
        bit<48> opt = pkt.lookahead<bit<48>>();
        meta.group = opt[31:0];
        meta.concast = 1;
        transition accept;                      /* the option bytes stay in the payload */
    }
}

/* The header checksum is not verified here: with options it would need the whole options
 * area as fields (see the top of the file). Senders and the vectors carry correct ones. */
control ConcastVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/* ------------------------------------------------------------------------------------ */

control ConcastIngress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t std) {

    counter(N_ERR, CounterType.packets) malformed;      /* index: ERR_* */
    counter(N_DIV, CounterType.packets_and_bytes) diverted;  /* index: DIV_* */
    counter(1, CounterType.packets_and_bytes) reinjected;    /* frames from the CPU port */
    counter(1, CounterType.packets_and_bytes) forwarded;     /* sent out by ipv4_lpm */
    counter(N_DROP, CounterType.packets) dropped;       /* index: DROP_* */
    counter(1, CounterType.packets) arp_answered;

    bool divert = false;
    bit<8> divert_reason = 0;

    action drop() {
        mark_to_drop(std);
    }

    /* ---- ARP answers for the router's port addresses ---- */
    bool arp_replied = false;

    action arp_reply(bit<48> mac) {
        arp_replied = true;
        hdr.ethernet.dst = hdr.ethernet.src;
        hdr.ethernet.src = mac;
        hdr.arp.oper = 2;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.sha = mac;
        bit<32> asker = hdr.arp.spa;
        hdr.arp.spa = hdr.arp.tpa;
        hdr.arp.tpa = asker;
        std.egress_spec = std.ingress_port;
    }

    table arp_answer {
        key = {
            std.ingress_port : exact @name("ingress_port");
            hdr.arp.tpa      : exact @name("tpa");
        }
        actions = { arp_reply; drop; }
        default_action = drop();
        size = 256;
    }

    /* ---- diversion ---- */
    action divert_to_cpu(bit<8> reason) {
        divert = true;
        divert_reason = reason;
    }

    /* Static diversion, written by the control plane: CSP (protocol 253, any destination)
     * and the router's own addresses. Removing these entries makes the router forward CSP
     * like an oblivious one (protocol.md section 4, "forwarding without routerd"). */
    table divert_static {
        key = {
            hdr.ipv4.dst      : ternary @name("dst");
            hdr.ipv4.protocol : ternary @name("protocol");
        }
        actions = { divert_to_cpu; NoAction; }
        default_action = NoAction();
        size = 256;
    }

    /* Run-time diversion, written by routerd: one entry per ACTIVE concast flow (R, G). */
    table concast_flows {
        key = {
            hdr.ipv4.dst : exact @name("R");
            meta.group   : exact @name("G");
        }
        actions = { divert_to_cpu; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    /* ---- forwarding ---- */
    bool routed = false;
    bool local = false;

    action set_nhop(bit<48> dmac, bit<48> smac, bit<9> port) {
        hdr.ethernet.src = smac;
        hdr.ethernet.dst = dmac;
        std.egress_spec = port;
        routed = true;
    }

    action local_drop() {      /* an own address that is not diverted */
        local = true;
        mark_to_drop(std);
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst : lpm @name("dst"); }
        actions = { set_nhop; local_drop; drop; }
        default_action = drop();
        size = 4096;
    }

    /* TTL - 1 and the header checksum updated to match (RFC 1624 eqn. 3:
     * HC' = ~(~HC + ~m + m'), m = the 16-bit word holding TTL and protocol). */
    action dec_ttl() {
        bit<16> m_old = hdr.ipv4.ttl ++ hdr.ipv4.protocol;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        bit<16> m_new = hdr.ipv4.ttl ++ hdr.ipv4.protocol;
        bit<32> sum = (bit<32>) (~hdr.ipv4.hdr_checksum) + (bit<32>) (~m_old) + (bit<32>) m_new;
        sum = (sum & 0xffff) + (sum >> 16);
        sum = (sum & 0xffff) + (sum >> 16);
        hdr.ipv4.hdr_checksum = ~(sum[15:0]);
    }

    apply {
        if (hdr.arp.isValid()) {
            if (hdr.arp.oper == 1 && hdr.arp.ptype == ETHERTYPE_IPV4) {
                arp_answer.apply();
                if (arp_replied) {
                    arp_answered.count(0);
                }
            } else {
                dropped.count(DROP_NOT_IPV4);
                drop();
            }
            return;
        }
        if (!hdr.ipv4.isValid()) {
            if (std.parser_error == error.PacketTooShort) {
                malformed.count((bit<32>) ERR_TRUNCATED);     /* < 20 bytes of IPv4 */
            } else {
                dropped.count(DROP_NOT_IPV4);
            }
            drop();
            return;
        }

        /* protocol.md 1.2: header checks in their order, then the option errors. */
        bit<8> err = meta.err;
        if (err == ERR_BAD_VERSION || err == ERR_BAD_IHL) {
            /* named by the parser, which stopped there */
        } else if (std.parser_error == error.PacketTooShort
                   || ((bit<32>) hdr.ipv4.ihl << 2) + 14 > std.packet_length) {
            err = ERR_HEADER_OVERFLOW;           /* the options area runs past the frame */
        } else if (hdr.ipv4.total_len < ((bit<16>) hdr.ipv4.ihl << 2)
                   || (bit<32>) hdr.ipv4.total_len + 14 > std.packet_length) {
            err = ERR_BAD_TOTAL_LENGTH;
        }
        if (err != ERR_NONE) {
            malformed.count((bit<32>) err);
            drop();
            return;
        }

        if (std.ingress_port == CPU_PORT) {
            /* re-injected by routerd: straight to forwarding, never diverted again */
            reinjected.count(0);
        } else {
            divert_static.apply();
            if (!divert && meta.concast == 1) {
                concast_flows.apply();
            }
            if (divert) {
                /* out of the CPU port as it arrived: no TTL decrement, MACs unchanged */
                diverted.count((bit<32>) divert_reason);
                std.egress_spec = CPU_PORT;
                return;
            }
        }

        if (hdr.ipv4.ttl <= 1) {
            dropped.count(DROP_TTL);
            drop();
            return;
        }
        ipv4_lpm.apply();
        if (routed) {
            dec_ttl();
            forwarded.count(0);
        } else if (local) {
            dropped.count(DROP_LOCAL);
        } else {
            dropped.count(DROP_NO_ROUTE);
        }
    }
}

control ConcastEgress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t std) {
    apply { }
}

/* Nothing to compute: dec_ttl() keeps the checksum right incrementally. */
control ConcastComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control ConcastDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.arp);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.opts);     /* the walked option bytes, in order; the rest is payload */
    }
}

V1Switch(ConcastParser(), ConcastVerifyChecksum(), ConcastIngress(), ConcastEgress(),
         ConcastComputeChecksum(), ConcastDeparser()) main;
