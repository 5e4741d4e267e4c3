/* deparser.p4 -- what leaves the switch: the headers as parsed, and the checksum controls.
 *
 * The IPv4 header checksum is verified over the whole header, options area included
 * (RFC 1812 5.2.2: a router must check it and discard a datagram that fails; protocol.md
 * 1.2-13): the area is hdr.opts (the bytes the walk stepped over) followed by
 * hdr.opts_rest (the rest), and BMv2 leaves the fields of invalid headers (the stack's
 * unused elements) out of the sum, so the list below is exactly the area's bytes in order.
 * A failure sets standard_metadata.checksum_error; ConcastIngress drops the datagram and
 * counts it (dropped[DROP_BAD_CHECKSUM], `bad_checksum`). It is not recomputed on the way
 * out: Forward's dec_ttl keeps it right incrementally (RFC 1624). */
#ifndef CONCAST_DEPARSER_P4
#define CONCAST_DEPARSER_P4

#include "headers.p4"

control ConcastVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst,
              hdr.opts[0].b,  hdr.opts[1].b,  hdr.opts[2].b,  hdr.opts[3].b,
              hdr.opts[4].b,  hdr.opts[5].b,  hdr.opts[6].b,  hdr.opts[7].b,
              hdr.opts[8].b,  hdr.opts[9].b,  hdr.opts[10].b, hdr.opts[11].b,
              hdr.opts[12].b, hdr.opts[13].b, hdr.opts[14].b, hdr.opts[15].b,
              hdr.opts[16].b, hdr.opts[17].b, hdr.opts[18].b, hdr.opts[19].b,
              hdr.opts[20].b, hdr.opts[21].b, hdr.opts[22].b, hdr.opts[23].b,
              hdr.opts[24].b, hdr.opts[25].b, hdr.opts[26].b, hdr.opts[27].b,
              hdr.opts[28].b, hdr.opts[29].b, hdr.opts[30].b, hdr.opts[31].b,
              hdr.opts[32].b, hdr.opts[33].b, hdr.opts[34].b, hdr.opts[35].b,
              hdr.opts[36].b, hdr.opts[37].b, hdr.opts[38].b, hdr.opts[39].b,
              hdr.opts_rest.bytes },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control ConcastComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control ConcastDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.arp);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.opts);      /* the walked option bytes, in order */
        pkt.emit(hdr.opts_rest); /* then the rest of the area */
    }
}

#endif
