/* deparser.p4 -- what leaves the switch: the headers as parsed, and the checksum controls,
 * which have nothing to do. The header checksum is neither verified nor recomputed: with
 * options both would need the whole options area as header fields, and the walk extracts
 * only the bytes it steps over. Forward's dec_ttl keeps it right incrementally instead. */
#ifndef CONCAST_DEPARSER_P4
#define CONCAST_DEPARSER_P4

#include "headers.p4"

control ConcastVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

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

#endif
