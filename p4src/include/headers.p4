/* headers.p4 -- what a concast router's P4 program knows of the wire: its address types,
 * the numbers of docs/protocol.md, the headers it parses, and what the parser found. */
#ifndef CONCAST_HEADERS_P4
#define CONCAST_HEADERS_P4

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<9>  port_t;         /* v1model ports are 9 bits; 511 is the drop port */

#ifndef CPU_PORT_NUM
#define CPU_PORT_NUM 255
#endif
const port_t CPU_PORT = CPU_PORT_NUM;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<16> ARP_REQUEST    = 1;
const bit<16> ARP_REPLY      = 2;
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

/* Size of the `received` counter, indexed by the ingress port (CPU_PORT included). */
const bit<32> N_PORTS = 256;

/* Index of the `dropped` counter. */
const bit<32> DROP_NOT_IPV4 = 0;   /* neither IPv4 nor an ARP request we answer */
const bit<32> DROP_TTL      = 1;   /* TTL 0 or 1 on arrival: would reach 0 */
const bit<32> DROP_NO_ROUTE = 2;   /* ipv4_lpm miss */
const bit<32> DROP_LOCAL    = 3;   /* to an own address, not diverted (oblivious router) */
const bit<32> DROP_BAD_CHECKSUM = 4; /* IPv4 header checksum wrong (RFC 1812 5.2.2) */
const bit<32> N_DROP = 5;

header ethernet_t {
    mac_addr_t dst;
    mac_addr_t src;
    bit<16>    ether_type;
}

header arp_t {
    bit<16>     htype;
    bit<16>     ptype;
    bit<8>      hlen;
    bit<8>      plen;
    bit<16>     oper;
    mac_addr_t  sha;
    ipv4_addr_t spa;
    mac_addr_t  tha;
    ipv4_addr_t tpa;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<8>      tos;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src;
    ipv4_addr_t dst;
}

/* One byte of the options area. The walk extracts every byte it steps over into the next
 * element of a stack of these, so the deparser puts them back in their original order. */
header opt_byte_t {
    bit<8> b;
}

/* The options area the walk did not step over: from an EOL (the padding after it) or from
 * the option where a malformed area went wrong, to the end of the area. Extracted only so
 * the header checksum can be verified over the whole area (deparser.p4); it leaves the
 * switch unchanged, after hdr.opts. */
header opt_rest_t {
    varbit<320> bytes;
}

struct headers_t {
    ethernet_t     ethernet;
    arp_t          arp;
    ipv4_t         ipv4;
    opt_byte_t[40] opts;
    opt_rest_t     opts_rest;
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

#endif
