/* pending-take: a test spec for the C SDK's pending_scan / pending_take_list
 * (engine/tests/c_pending.rs builds it as ABI v2 and, with -DCONCAST_ABI_V1, as v1).
 *
 * Every datagram goes to tag 1. When a state's `done` is asked, the spec scans the whole
 * pending queue, reads each queued datagram's first payload byte (its marker) where the scan
 * says it is (in place) or with pending_peek (not in memory), and takes, with one take list,
 * every datagram whose marker is odd. The state is then built: one UDP datagram carrying
 * three big-endian u32s: datagrams in the state (merged + taken), the sum of their markers,
 * and how many scanned datagrams had to be peeked.
 */
#include "concast_spec.h"

struct pending_state {
    uint32_t count, markers, peeked;
};

CONCAST_STATES(struct pending_state)

/* The first payload byte of an IPv4 datagram, or -1. */
static int32_t marker(const uint8_t *msg, uint32_t len) {
    struct concast_ipv4 ip;
    if (!concast_ipv4_read(msg, len, &ip) || ip.payload_len == 0)
        return -1;
    return ip.payload[0];
}

CONCAST_INIT() { return NULL; }

CONCAST_GET_TAG(len) { return 1; }

CONCAST_STATE_NEW(slot, tag) {
    struct pending_state *s = concast_state(slot);
    s->count = 0;
    s->markers = 0;
    s->peeked = 0;
}

CONCAST_MERGE(slot, len) {
    int32_t m = marker(concast_message, len);
    if (m < 0)
        return CONCAST_PASS;
    struct pending_state *s = concast_state(slot);
    s->count++;
    s->markers += (uint32_t)m;
    return CONCAST_MERGED;
}

static struct concast_scan_record records[CONCAST_SCAN_MAX];
static uint32_t chosen[CONCAST_TAKE_LIST_MAX];
static uint8_t peek_buf[1500];

CONCAST_DONE(slot) {
    struct pending_state *s = concast_state(slot);
    uint32_t taking = 0;
    int32_t first = 0;
    for (;;) {
        int32_t n = concast_pending_scan(first, records, CONCAST_SCAN_MAX);
        if (n <= 0)
            break;
        for (int32_t i = 0; i < n; i++) {
            const struct concast_scan_record *r = &records[i];
            const uint8_t *bytes;
            if (r->at != CONCAST_NOT_IN_MEMORY) {
                bytes = (const uint8_t *)(uintptr_t)r->at;
            } else {
                int32_t got = concast_pending_peek(first + i, peek_buf, sizeof peek_buf);
                if (got < 0 || (uint32_t)got > sizeof peek_buf)
                    concast_abort_str("pending_peek failed");
                bytes = peek_buf;
                s->peeked++;
            }
            int32_t m = marker(bytes, r->len);
            if (m >= 0 && (m & 1) && taking < CONCAST_TAKE_LIST_MAX) {
                chosen[taking++] = (uint32_t)(first + i);
                s->count++;
                s->markers += (uint32_t)m;
            }
        }
        first += n;
    }
    if (taking > 0 && concast_pending_take_list(chosen, taking) != (int32_t)taking)
        concast_abort_str("pending_take_list refused the scan's indices");
    return 1;
}

CONCAST_BUILD(slot) {
    struct pending_state *s = concast_state(slot);
    uint8_t out[CONCAST_UDP_HEADER_LEN + 12];
    concast_put_be32(out + 8, s->count);
    concast_put_be32(out + 12, s->markers);
    concast_put_be32(out + 16, s->peeked);
    concast_emit_udp(out, 12, 4000, 5000, 64, 0);
    return CONCAST_FREE;
}
