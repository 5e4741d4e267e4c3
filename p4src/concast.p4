/* concast.p4 -- the BMv2 (v1model) data plane of a concast router.
 *
 * What it does (docs/dataplane-bmv2.md has the picture, docs/protocol.md the bytes):
 *   - IPv4 longest-prefix forwarding (table ipv4_lpm): next-hop MAC, router MAC, port,
 *     TTL decrement, drop when the TTL would reach 0;
 *   - an IPv4 options walk over up to 40 bytes (protocol.md 1.1) that finds the Concast ID
 *     option (0x9E, length 6) wherever it stands, and flags malformed option lists, which
 *     are dropped and counted by error kind (counter `malformed`);
 *   - diversion to the CPU port (routerd): CSP datagrams and datagrams to the router's own
 *     addresses (table divert_static), concast datagrams of flows with an entry in table
 *     concast_flows (key: destination R, group G; installed by routerd at run time);
 *   - frames that arrive FROM the CPU port are never diverted: they go straight to
 *     forwarding (protocol.md section 4);
 *   - ARP requests for the router's port addresses are answered in the data plane
 *     (table arp_answer), as the OVS pipeline does.
 *
 * Checksum: the header checksum is updated incrementally (RFC 1624, eqn. 3) for the TTL
 * decrement. This needs no knowledge of the options, so it stays right with any options
 * area, and every options byte leaves the switch exactly as it came in. (Recomputing it
 * with update_checksum would need the whole options area as header fields; the walk below
 * extracts only the bytes it steps over, one header per byte, and stops at EOL.)
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
            OPT_EOL: accept;                    /* the rest is padding, left unparsed */
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

    state option_truncated   { meta.err = ERR_OPTION_TRUNCATED;       transition accept; }
    state option_bad_length  { meta.err = ERR_OPTION_BAD_LENGTH;      transition accept; }
    state option_overflow    { meta.err = ERR_OPTION_OVERFLOW;        transition accept; }
    state concast_bad_length { meta.err = ERR_CONCAST_OPT_BAD_LENGTH; transition accept; }
    state concast_duplicate  { meta.err = ERR_CONCAST_OPT_DUPLICATE;  transition accept; }
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
