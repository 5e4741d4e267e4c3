/* ingress.p4 -- what a concast router does with a frame, one small control per job:
 *   ArpResponder  answers ARP requests for the router's port addresses (table arp_answer);
 *   HeaderChecks  names the first thing wrong with an IPv4 header, in protocol.md 1.2's order;
 *   Divert        says whether routerd gets the datagram (divert_static, concast_flows);
 *   Forward       longest-prefix match, next hop, TTL - 1 with the checksum kept right.
 * ConcastIngress strings them together and keeps the counters, so every count is taken
 * in one place and the P4Runtime names of the counters do not depend on the split. */
#ifndef CONCAST_INGRESS_P4
#define CONCAST_INGRESS_P4

#include "headers.p4"

control ArpResponder(inout headers_t hdr, inout standard_metadata_t std,
                     out bool request, out bool answered) {
    action drop() {
        mark_to_drop(std);
    }

    action arp_reply(mac_addr_t mac) {
        answered = true;
        hdr.ethernet.dst = hdr.ethernet.src;
        hdr.ethernet.src = mac;
        hdr.arp.oper = ARP_REPLY;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.sha = mac;
        ipv4_addr_t asker = hdr.arp.spa;
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

    apply {
        answered = false;
        request = hdr.arp.oper == ARP_REQUEST && hdr.arp.ptype == ETHERTYPE_IPV4;
        if (request) {
            arp_answer.apply();
        } else {
            drop();
        }
    }
}

/* protocol.md 1.2, the checks in their order: the parser has already named a bad version
 * or IHL (it stops there), then the header must fit the frame, then the total length; an
 * error of the options walk counts only when the header itself is sound. */
control HeaderChecks(in headers_t hdr, in metadata_t meta, in standard_metadata_t std,
                     out bit<8> err) {
    apply {
        err = meta.err;
        if (!hdr.ipv4.isValid()) {
            err = std.parser_error == error.PacketTooShort ? ERR_TRUNCATED : ERR_NONE;
        } else if (err == ERR_BAD_VERSION || err == ERR_BAD_IHL) {
            /* named by the parser */
        } else if (std.parser_error == error.PacketTooShort
                   || ((bit<32>) hdr.ipv4.ihl << 2) + 14 > std.packet_length) {
            err = ERR_HEADER_OVERFLOW;           /* the options area runs past the frame */
        } else if (hdr.ipv4.total_len < ((bit<16>) hdr.ipv4.ihl << 2)
                   || (bit<32>) hdr.ipv4.total_len + 14 > std.packet_length) {
            err = ERR_BAD_TOTAL_LENGTH;
        }
    }
}

control Divert(in headers_t hdr, in metadata_t meta, out bool to_cpu, out bit<8> why) {
    action divert_to_cpu(bit<8> reason) {
        to_cpu = true;
        why = reason;
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

    apply {
        to_cpu = false;
        why = 0;
        divert_static.apply();
        if (!to_cpu && meta.concast == 1) {
            concast_flows.apply();
        }
    }
}

control Forward(inout headers_t hdr, inout standard_metadata_t std,
                out bool sent, out bit<32> why_not) {
    action drop() {
        mark_to_drop(std);
    }

    action set_nhop(mac_addr_t dmac, mac_addr_t smac, port_t port) {
        hdr.ethernet.src = smac;
        hdr.ethernet.dst = dmac;
        std.egress_spec = port;
        sent = true;
    }

    action local_drop() {      /* an own address that is not diverted */
        why_not = DROP_LOCAL;
        mark_to_drop(std);
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst : lpm @name("dst"); }
        actions = { set_nhop; local_drop; drop; }
        default_action = drop();
        size = 4096;
    }

    /* TTL - 1 and the header checksum updated to match (RFC 1624 eqn. 3:
     * HC' = ~(~HC + ~m + m'), m = the 16-bit word holding TTL and protocol). This needs
     * no knowledge of the options, and every options byte leaves as it came in. */
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
        sent = false;
        why_not = DROP_NO_ROUTE;
        if (hdr.ipv4.ttl <= 1) {
            why_not = DROP_TTL;
            drop();
        } else {
            ipv4_lpm.apply();
            if (sent) {
                dec_ttl();
            }
        }
    }
}

control ConcastIngress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t std) {
    counter(N_ERR, CounterType.packets) malformed;            /* index: ERR_* */
    counter(N_DIV, CounterType.packets_and_bytes) diverted;   /* index: DIV_* */
    counter(1, CounterType.packets_and_bytes) reinjected;     /* frames from the CPU port */
    counter(1, CounterType.packets_and_bytes) forwarded;      /* sent out by ipv4_lpm */
    counter(N_DROP, CounterType.packets) dropped;             /* index: DROP_* */
    counter(1, CounterType.packets) arp_answered;
    /* Every frame the parser handed to ingress, by the port it came in on: against the
     * kernel's rx count of that port's interface it gives what the switch lost at its
     * intake, before the parser (docs/dataplane-bmv2.md, "Intake loss"). */
    counter(N_PORTS, CounterType.packets) received;

    ArpResponder() arp;
    HeaderChecks() checks;
    Divert() divert;
    Forward() forward;

    apply {
        received.count((bit<32>) std.ingress_port);
        if (hdr.arp.isValid()) {
            bool request;
            bool answered;
            arp.apply(hdr, std, request, answered);
            if (answered) { arp_answered.count(0); }
            if (!request) { dropped.count(DROP_NOT_IPV4); }
            return;
        }

        bit<8> err;
        checks.apply(hdr, meta, std, err);
        if (err != ERR_NONE) {
            malformed.count((bit<32>) err);
            mark_to_drop(std);
            return;
        }
        if (!hdr.ipv4.isValid()) {
            dropped.count(DROP_NOT_IPV4);
            mark_to_drop(std);
            return;
        }
        if (std.checksum_error == 1) {  /* ConcastVerifyChecksum: header checksum wrong */
            dropped.count(DROP_BAD_CHECKSUM);
            mark_to_drop(std);
            return;
        }

        if (std.ingress_port == CPU_PORT) {
            reinjected.count(0);    /* re-injected by routerd: forwarded, never diverted again */
        } else {
            bool to_cpu;
            bit<8> why;
            divert.apply(hdr, meta, to_cpu, why);
            if (to_cpu) {           /* out of the CPU port as it came: TTL and MACs unchanged */
                diverted.count((bit<32>) why);
                std.egress_spec = CPU_PORT;
                return;
            }
        }

        bool sent;
        bit<32> why_not;
        forward.apply(hdr, std, sent, why_not);
        if (sent) {
            forwarded.count(0);
        } else {
            dropped.count(why_not);
        }
    }
}

control ConcastEgress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t std) {
    apply { }
}

#endif
